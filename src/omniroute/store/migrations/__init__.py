"""Schema migrations (STORE-1: versioned with Alembic), run from code so they work from an installed wheel.

:func:`migrate` upgrades a database to ``head``; the Alembic config is built here with
``script_location`` pointing at this package directory, so no ``alembic.ini`` is needed. Concurrent
starters are serialised: PostgreSQL takes a transaction-scoped advisory lock, SQLite a
``BEGIN IMMEDIATE`` write lock, and whoever comes second finds the schema at head and does nothing.

Alembic itself (with Mako and Pygments, about 8 MB of resident memory) is imported only when an existing
schema must change (PERF-5). :func:`migrate` first reads ``alembic_version`` with plain SQLAlchemy and
compares it with the newest revision id found in ``versions/*.py``: a database at head is left alone. An
empty database (no tables at all) gets the head schema from the ORM models (``create_all``, which the
scripts are tested to match) and is stamped with the head revision — Alembic's own recipe for a new
database; a database at an older revision is upgraded by Alembic.
"""

from __future__ import annotations

import asyncio
import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, func, inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from omniroute.store.db import SQLITE_BUSY_TIMEOUT_MS, create_engine, parse_database_url

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "MIGRATIONS_DIR",
    "alembic_config",
    "current_revision",
    "head_revision",
    "migrate",
    "stamped_revisions",
]

MIGRATIONS_DIR = Path(__file__).resolve().parent
# Arbitrary constant shared by every OmniRoute process: the advisory lock id for schema upgrades.
_PG_MIGRATION_LOCK_ID = 0x0E171_0001


def alembic_config(url: str | None = None) -> Config:
    """An Alembic :class:`Config` for this package's scripts; ``url`` (any form ``parse_database_url`` takes)
    is only needed when Alembic must connect by itself (e.g. autogenerating a new revision)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        rendered = parse_database_url(url).url.render_as_string(hide_password=False)
        cfg.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    """The newest revision id shipped with this package (asks Alembic; see :func:`shipped_head` for the
    cheap read used at start)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("no migration scripts found")
    return head


_REVISION_LINE = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*(?:[\"']([^\"']+)[\"']|None)", re.M)


@functools.cache
def shipped_head() -> str | None:
    """The newest revision id in ``versions/*.py``, read as text (no Alembic import): the one revision no
    other script names as its ``down_revision``. ``None`` when that is ambiguous (several heads, or a
    script the pattern cannot read); :func:`migrate` then lets Alembic decide."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = dict((m.group(1), m.group(2)) for m in _REVISION_LINE.finditer(script.read_text("utf-8")))
        if not found.get("revision") or "down_revision" not in found:
            return None
        revisions.add(found["revision"])
        if found["down_revision"]:
            parents.add(found["down_revision"])
    heads = revisions - parents
    return next(iter(heads)) if len(heads) == 1 else None


# Alembic's bookkeeping table, as ``alembic upgrade`` creates it (default name and schema).
_VERSION_TABLE = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


def _create_fresh(connection: Connection, head: str) -> bool:
    """On a database with no tables, create the head schema from the models and stamp it ``head``;
    ``False`` (nothing done) when any table exists."""
    if inspect(connection).get_table_names():
        return False
    from omniroute.store.models import Base

    Base.metadata.create_all(connection)
    _VERSION_TABLE.create(connection)
    connection.execute(_VERSION_TABLE.insert().values(version_num=head))
    return True


def stamped_revisions(connection: Connection) -> list[str]:
    """The rows of ``alembic_version`` (``[]`` for a database Alembic never touched)."""
    if not inspect(connection).has_table("alembic_version"):
        return []
    return [str(r[0]) for r in connection.execute(text("SELECT version_num FROM alembic_version"))]


def _upgrade(connection: Connection, cfg: Config) -> None:
    from alembic import command

    cfg.attributes["connection"] = connection
    command.upgrade(cfg, "head")


def _current(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

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


async def _at_head(engine: AsyncEngine) -> bool:
    """Whether the database is stamped with exactly :func:`shipped_head` (read without a lock: a database
    at head stays there, and anything else goes through the locked upgrade, which checks again)."""
    head = shipped_head()
    if head is None:
        return False
    async with engine.connect() as conn:
        stamped = await conn.run_sync(stamped_revisions)
        await conn.rollback()
    return stamped == [head]


SQLITE_LOCKED_RETRIES = 20  # SQLite: attempts when a concurrent starter's lock makes a connect fail


async def _migrate_engine(engine: AsyncEngine) -> None:
    """Migrate under the lock; on SQLite, retry while another starter holds the new database.

    Two processes opening one new SQLite file at once can meet SQLite's lock-upgrade deadlock: the
    second's ``PRAGMA journal_mode=WAL`` (on connect) needs the file exclusively while the first
    holds its write lock, and SQLite answers "database is locked" at once instead of waiting. The
    second tries again shortly and then finds the schema at head (STORE-2)."""
    for attempt in range(SQLITE_LOCKED_RETRIES):
        try:
            await _migrate_once(engine)
            return
        except OperationalError as exc:
            locked = engine.dialect.name == "sqlite" and "database is locked" in str(exc)
            if not locked or attempt == SQLITE_LOCKED_RETRIES - 1:
                raise
            # Real time, whatever the gateway's clock: this waits for another process to release
            # the database file, before any clock is handed to the store.
            await asyncio.sleep(0.05 * (attempt + 1))  # noqa: TID251


async def _migrate_once(engine: AsyncEngine) -> None:
    if await _at_head(engine):
        return
    head = shipped_head()
    async with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(select(func.pg_advisory_xact_lock(_PG_MIGRATION_LOCK_ID)))
        elif conn.dialect.name == "sqlite":
            # Take the write lock before reading alembic_version so two starters cannot both upgrade;
            # a starter may wait for another's whole migration, so allow longer than the usual timeout.
            await conn.exec_driver_sql(f"PRAGMA busy_timeout={MIGRATION_BUSY_TIMEOUT_MS}")
            await conn.exec_driver_sql("BEGIN IMMEDIATE")
        if head is None or not await conn.run_sync(_create_fresh, head):
            await conn.run_sync(_upgrade, alembic_config())
        await conn.commit()
        if conn.dialect.name == "sqlite":
            await conn.exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at, or ``None`` for an empty database."""
    async with engine.connect() as conn:
        return await conn.run_sync(_current)
