"""Read-only access to a store for checks that must change nothing (``omniroute doctor``).

:func:`open_readonly` connects without migrating, without creating the database file or its folder and
without a key file: SQLite is opened with ``mode=ro`` (the file's bytes and mtime stay as they were),
PostgreSQL with ``default_transaction_read_only``. The returned :class:`~omniroute.store.Store` serves
reads (``list_connections``, ``list_provider_nodes``); a write raises a driver error.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from omniroute.clock import SystemClock
from omniroute.store.db import DatabaseTarget, create_engine, parse_database_url
from omniroute.store.keyguard import encrypted_secret_count, stored_fingerprint
from omniroute.store.migrations import shipped_head, stamped_revisions
from omniroute.store.secrets import SecretBox, existing_secret_box
from omniroute.store.store import Store

__all__ = ["ReadonlyStore", "open_readonly"]


@dataclass(frozen=True, slots=True)
class ReadonlyStore:
    """A store opened by :func:`open_readonly`.

    ``store``: reads only (its secret box is the configured key, or a placeholder that fails every
    decryption when there is none); ``key``: the configured key or key file, ``None`` when neither
    exists.
    """

    store: Store
    target: DatabaseTarget
    key: SecretBox | None

    async def schema(self) -> tuple[list[str], str | None]:
        """(revisions stamped in ``alembic_version`` — ``[]`` for a database never migrated, the newest
        revision this package ships — ``None`` when that cannot be read cheaply)."""
        async with self.store.engine.connect() as conn:
            stamped = await conn.run_sync(stamped_revisions)
            await conn.rollback()
        return stamped, shipped_head()

    async def encrypted_secret_count(self) -> int:
        """How many connections hold an encrypted API key or access token."""
        return await encrypted_secret_count(self.store.engine)

    async def fingerprint(self) -> str | None:
        """The recorded secret key fingerprint; ``None`` when none is recorded (or, on a schema whose
        migrations are pending, cannot be)."""
        try:
            return await stored_fingerprint(self.store.engine)
        except DBAPIError:  # no store_meta table before its migration runs
            return None

    async def close(self) -> None:
        """Dispose the engine (nothing was written)."""
        await self.store.close()


def _readonly_engine(target: DatabaseTarget) -> AsyncEngine:
    if target.dialect == "sqlite":
        # ``mode=ro``: SQLite refuses every write, and no connect pragma (journal mode) is issued that
        # could rewrite the header; ``uri=true`` makes the driver read the path as a URI. A cleanly
        # closed database has no ``-wal`` file, and a read-only reader would leave new ``-wal``/``-shm``
        # files behind: ``immutable=1`` reads the file alone (nothing sits in a log to be missed).
        path = target.sqlite_path
        assert path is not None
        wal = path.with_name(path.name + "-wal").exists()
        url = target.url.set(
            database=f"file:{path}?mode=ro" + ("" if wal else "&immutable=1"), query={"uri": "true"}
        )
        return create_engine(DatabaseTarget(url=url, dialect="sqlite"), poolclass=NullPool)
    settings = dict(target.connect_args.get("server_settings", {}))
    settings["default_transaction_read_only"] = "on"
    ro = DatabaseTarget(
        url=target.url,
        dialect=target.dialect,
        connect_args={**target.connect_args, "server_settings": settings},
    )
    return create_engine(ro, poolclass=NullPool)


def open_readonly(url: str, *, data_dir: str | None) -> ReadonlyStore:
    """Open ``url`` for reading only (see the module docstring); ``data_dir`` as for ``Store.open``.

    Raises ``ValueError`` for an unsupported URL, an in-memory database (nothing to read) or a
    malformed key, and ``FileNotFoundError`` naming a SQLite file that does not exist.
    """
    target = parse_database_url(url, create_dirs=False)
    if target.memory:
        raise ValueError("an in-memory database holds nothing to check")
    if target.sqlite_path is not None and not target.sqlite_path.exists():
        raise FileNotFoundError(str(target.sqlite_path))
    key = existing_secret_box(sqlite_path=target.sqlite_path, data_dir=data_dir)
    engine = _readonly_engine(target)
    # Without a key only secret-free rows can be read; a stand-in key (never generated: all zero bytes)
    # makes reading an encrypted secret fail as a mismatch instead of creating a key file.
    box = key or SecretBox([base64.urlsafe_b64encode(bytes(32))], source="no key configured")
    return ReadonlyStore(Store(engine, box, target, SystemClock()), target, key)
