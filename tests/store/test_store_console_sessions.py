"""Signed-out console sessions are kept in the store, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from sqlalchemy import select

from omniroute.store import Store
from omniroute.store.models import store_meta


async def test_a_signed_out_session_stays_refused_and_expired_entries_are_dropped(store: Store) -> None:
    assert await store.console_session_revoked("s1") is False
    now = store._now()
    await store.revoke_console_session("s1", now + 3600)
    await store.revoke_console_session("s1", now + 3600)  # signing out twice is harmless
    await store.revoke_console_session("old", now - 1)  # its cookie has already expired
    assert await store.console_session_revoked("s1") is True
    assert await store.console_session_revoked("s2") is False
    await store.revoke_console_session("s2", now + 3600)  # prunes "old"
    async with store.engine.connect() as conn:
        query = select(store_meta.c.key).where(store_meta.c.key.like("console_%"))
        keys = (await conn.execute(query)).scalars()
        assert sorted(keys) == ["console_signed_out:s1", "console_signed_out:s2"]
