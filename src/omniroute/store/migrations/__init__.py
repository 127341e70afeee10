"""Schema migrations (STORE-1: versioned with Alembic), run from code so they work from an installed wheel.

:func:`migrate` upgrades a database to ``head``; the Alembic config is built here with
``script_location`` pointing at this package directory, so no ``alembic.ini`` is needed. Concurrent
starters are serialised: PostgreSQL takes a transaction-scoped advisory lock, SQLite a
``BEGIN IMMEDIATE`` write lock, and whoever comes second finds the schema at head and does nothing.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import func, select
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from omniroute.store.db import SQLITE_BUSY_TIMEOUT_MS, create_engine, parse_database_url

__all__ = ["MIGRATIONS_DIR", "alembic_config", "current_revision", "head_revision", "migrate"]

MIGRATIONS_DIR = Path(__file__).resolve().parent
# Arbitrary constant shared by every OmniRoute process: the advisory lock id for schema upgrades.
_PG_MIGRATION_LOCK_ID = 0x0E171_0001


def alembic_config(url: str | None = None) -> Config:
    """An Alembic :class:`Config` for this package's scripts; ``url`` (any form ``parse_database_url`` takes)
    is only needed when Alembic must connect by itself (e.g. autogenerating a new revision)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        rendered = parse_database_url(url).url.render_as_string(hide_password=False)
        cfg.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    """The newest revision id shipped with this package."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("no migration scripts found")
    return head


def _upgrade(connection: Connection, cfg: Config) -> None:
    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def migrate(url_or_engine: str | AsyncEngine) -> None:
    """Upgrade the database to the newest schema (``alembic upgrade head``); a no-op when already there.

    Takes a database URL (``sqlite:///…``, ``postgresql://…``) or an existing engine (needed for
    in-memory SQLite, whose data lives in the engine's one connection).
    """
    if isinstance(url_or_engine, AsyncEngine):
        await _migrate_engine(url_or_engine)
        return
    engine = create_engine(parse_database_url(url_or_engine), poolclass=NullPool)
    try:
        await _migrate_engine(engine)
    finally:
        await engine.dispose()


MIGRATION_BUSY_TIMEOUT_MS = 60_000  # SQLite: how long a starter waits for another's migration


async def _migrate_engine(engine: AsyncEngine) -> None:
    cfg = alembic_config()
    async with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(select(func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK_ID)))
        elif conn.dialect.name == "sqlite":
            # Take the write lock before reading alembic_version so two starters cannot both upgrade;
            # a starter may wait for another's whole migration, so allow longer than the usual timeout.
            await conn.exec_driver_sql(f"PRAGMA busy_timeout={MIGRATION_BUSY_TIMEOUT_MS}")
            await conn.exec_driver_sql("BEGIN IMMEDIATE")
        await conn.run_sync(_upgrade, cfg)
        await conn.commit()
        if conn.dialect.name == "sqlite":
            await conn.exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at, or ``None`` for an empty database."""
    async with engine.connect() as conn:
        return await conn.run_sync(_current)
