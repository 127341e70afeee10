"""Database URLs and engines (STORE-1 SQLite default, STORE-2 PostgreSQL).

Owns URL normalisation (plain ``sqlite://`` / ``postgresql://`` URLs become the async drivers
``sqlite+aiosqlite`` / ``postgresql+asyncpg``), engine construction, and the SQLite connection pragmas
(WAL journal, ``busy_timeout``, foreign keys). Every other store module gets its engine from here.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import StaticPool

__all__ = [
    "SQLITE_BUSY_TIMEOUT_MS",
    "SQLITE_POOL_SIZE",
    "DatabaseTarget",
    "create_engine",
    "parse_database_url",
    "session_factory",
]

SQLITE_BUSY_TIMEOUT_MS = 5_000
"""How long a SQLite writer waits for another process's write lock before failing (ms)."""

SQLITE_POOL_SIZE = 3
"""Most connections one engine keeps to a SQLite file (no overflow beyond it; callers queue for one).

Each aiosqlite connection is a thread with its own SQLite page cache (up to 2 MiB) and C heap, so every
extra connection stays resident for the life of the process; SQLite runs one writer at a time, so more
connections add memory, not throughput. Three cover the two batch writers (usage, decisions) plus one
reader. The SQLAlchemy default (5 kept + 10 overflow) let a burst of concurrent reads — e.g. many
requests refreshing one expired cache entry at once — grow the process by about 10 MB for good (PERF-5).
"""

_PG_SCHEMES = {"postgres", "postgresql", "postgresql+asyncpg", "postgresql+psycopg2", "postgresql+psycopg"}
_SQLITE_SCHEMES = {"sqlite", "sqlite+aiosqlite", "sqlite+pysqlite"}


@dataclass(frozen=True, slots=True)
class DatabaseTarget:
    """A parsed database URL: the async SQLAlchemy URL plus what the store needs to know about it.

    ``sqlite_path`` is the absolute database file (``None`` for PostgreSQL or in-memory SQLite);
    ``connect_args`` are driver keyword arguments (asyncpg ``server_settings``).
    """

    url: URL
    dialect: str
    sqlite_path: Path | None = None
    memory: bool = False
    connect_args: dict[str, Any] = field(default_factory=dict)

    def display(self) -> str:
        """The URL with the password hidden, for logs and errors."""
        return self.url.render_as_string(hide_password=True)


def _pg_server_settings(query: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Split libpq-style query options asyncpg does not take as keywords into ``server_settings``."""
    rest = dict(query)
    settings: dict[str, str] = {}
    options = rest.pop("options", None)
    if isinstance(options, str):
        # libpq syntax: "-c search_path=x -c statement_timeout=5000" (also "-csearch_path=x").
        tokens = shlex.split(options)
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok == "-c" and i + 1 < len(tokens):
                tok, i = tokens[i + 1], i + 1
            elif tok.startswith("-c"):
                tok = tok[2:]
            key, sep, value = tok.partition("=")
            if sep:
                settings[key.strip()] = value.strip()
            i += 1
    app = rest.pop("application_name", None)
    if isinstance(app, str):
        settings["application_name"] = app
    sslmode = rest.pop("sslmode", None)
    if isinstance(sslmode, str) and "ssl" not in rest:
        rest["ssl"] = sslmode
    return rest, settings


def parse_database_url(url: str, *, create_dirs: bool = True) -> DatabaseTarget:
    """Normalise ``url`` to an async driver URL (STORE-1/2).

    ``sqlite:///./data/x.db`` → ``sqlite+aiosqlite:////abs/data/x.db`` (with ``create_dirs`` a missing
    folder is created 0700 and a missing database file 0600, see :func:`_create_private`);
    ``sqlite://`` / ``sqlite:///:memory:`` → in-memory; ``postgres://``, ``postgresql://`` and sync
    PostgreSQL drivers → ``postgresql+asyncpg://``, with libpq's ``options`` (``-c search_path=…``),
    ``application_name`` and ``sslmode`` translated for asyncpg. Raises
    ``ValueError`` for any other scheme.
    """
    u = make_url(url)
    scheme = u.drivername
    if scheme in _SQLITE_SCHEMES:
        db = u.database or ""
        if db in ("", ":memory:") or db.startswith("file::memory:"):
            return DatabaseTarget(
                url=u.set(drivername="sqlite+aiosqlite", database=":memory:"), dialect="sqlite", memory=True
            )
        path = Path(db).expanduser().resolve()
        if create_dirs:
            _create_private(path)
        return DatabaseTarget(
            url=u.set(drivername="sqlite+aiosqlite", database=str(path)), dialect="sqlite", sqlite_path=path
        )
    if scheme in _PG_SCHEMES:
        query, settings = _pg_server_settings(dict(u.query))
        connect_args: dict[str, Any] = {"server_settings": settings} if settings else {}
        return DatabaseTarget(
            url=u.set(drivername="postgresql+asyncpg", query=query),
            dialect="postgresql",
            connect_args=connect_args,
        )
    raise ValueError(
        f"unsupported database URL scheme {scheme!r}: use sqlite:///path/to/file.db or postgresql://…"
    )


def _create_private(path: Path) -> None:
    """Create the database's folder (0700) and an empty database file (0600) when they are missing.

    The database holds conversations and key hashes; SQLite creates files 0644 and gives the
    ``-wal`` and ``-shm`` files the database file's mode, so creating the (empty, which SQLite takes
    as a new database) file first keeps all three private. Existing files keep their mode.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        # WAL lets readers run beside the single writer (STORE-1); NORMAL sync is durable under WAL
        # except for the last transactions on power loss, which usage rows can afford.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _json_dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def create_engine(target: DatabaseTarget, **kwargs: Any) -> AsyncEngine:
    """An :class:`AsyncEngine` for ``target``; SQLite connections get the pragmas on connect.

    Extra ``kwargs`` go to :func:`sqlalchemy.ext.asyncio.create_async_engine` (e.g. ``poolclass``).
    """
    opts: dict[str, Any] = {"json_serializer": _json_dumps, "json_deserializer": orjson.loads}
    if target.connect_args:
        opts["connect_args"] = dict(target.connect_args)
    if target.dialect == "postgresql":
        opts["pool_pre_ping"] = True
    if target.memory:
        # One shared connection, or every checkout would see a fresh empty database.
        opts["poolclass"] = StaticPool
    elif target.dialect == "sqlite" and "poolclass" not in kwargs:
        opts["pool_size"], opts["max_overflow"] = SQLITE_POOL_SIZE, 0
    opts.update(kwargs)
    engine = create_async_engine(target.url, **opts)
    if target.dialect == "sqlite":
        event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
    return engine


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """An ``AsyncSession`` factory whose objects stay readable after commit (``expire_on_commit=False``)."""
    return async_sessionmaker(engine, expire_on_commit=False)
