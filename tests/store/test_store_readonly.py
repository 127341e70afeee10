"""The read-only store behind ``omniroute doctor`` (OPS-1) on SQLite and PostgreSQL: it reads the
schema revision, the key fingerprint and the secrets, and refuses every write."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from sqlalchemy.exc import DBAPIError

from omniroute.store import Store
from omniroute.store.readonly import open_readonly
from omniroute.values import Connection


async def test_readonly_store_reads_schema_key_and_secrets_and_refuses_writes(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("OMNIROUTE_SECRET_KEY", key)
    s = await Store.open(db_url)
    await s.upsert_connection(Connection(id="c", provider="openai", api_key="sk-readonly-0001"))
    await s.close()
    db = open_readonly(db_url, data_dir=None)
    try:
        stamped, head = await db.schema()
        assert stamped == [head]
        assert db.key is not None and await db.fingerprint() in db.key.fingerprints()
        assert await db.encrypted_secret_count() == 1
        assert [c.api_key for c in await db.store.list_connections()] == ["sk-readonly-0001"]
        with pytest.raises(DBAPIError):
            await db.store.upsert_connection(Connection(id="d", provider="openai"))
    finally:
        await db.close()
