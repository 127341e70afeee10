"""Fixtures for the store tests, on SQLite and on PostgreSQL (STORE-1/2).

PostgreSQL is taken from ``OMNIROUTE_TEST_PG_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
and isolated by schema, selected through libpq's ``options=-csearch_path=…``:

* ``db_url``: an empty database per test (a SQLite file, or a new schema dropped after the test), for the
  migration tests;
* ``store``: an open store on a database migrated once per run (the SQLite file is copied, the PostgreSQL
  schema is truncated before each test), which keeps the suite fast. The run's schema is dropped at the end.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from cryptography.fernet import Fernet
from sqlalchemy.engine import make_url

from omniroute.store import Store, migrate
from omniroute.store.models import Base

PG_URL = os.environ.get("OMNIROUTE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
TABLES = [t.name for t in Base.metadata.sorted_tables]


def _run_isolated(coro: Coroutine[Any, Any, None]) -> None:
    # Session-scoped setup runs outside the tests' event loops; a private thread keeps asyncio.run from
    # touching the loop pytest-asyncio installed.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coro).result()


async def _pg_exec(sql: str) -> None:
    conn = await asyncpg.connect(PG_URL.replace("postgresql+asyncpg://", "postgresql://", 1), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _schema_url(schema: str) -> str:
    sep = "&" if "?" in PG_URL else "?"
    return f"{PG_URL}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture(scope="session")
def pg_available() -> str | None:
    """``None`` when the PostgreSQL port accepts connections, else why not (checked once per run)."""
    u = make_url(PG_URL)
    try:
        socket.create_connection((u.host or "127.0.0.1", u.port or 5432), timeout=2).close()
    except OSError as exc:
        return f"PostgreSQL at {u.host}:{u.port} unreachable ({exc}); set OMNIROUTE_TEST_PG_URL"
    return None


@pytest.fixture(scope="session")
def pg_migrated_url(pg_available: str | None) -> Iterator[str]:
    """A PostgreSQL schema for this test run, migrated once and dropped at the end."""
    if pg_available is not None:
        pytest.skip(pg_available)
    schema = f"omniroute_test_{uuid.uuid4().hex[:12]}"
    _run_isolated(_pg_exec(f'CREATE SCHEMA "{schema}"'))
    try:
        _run_isolated(migrate(_schema_url(schema)))
        yield _schema_url(schema)
    finally:
        _run_isolated(_pg_exec(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once; tests get copies."""
    path = tmp_path_factory.mktemp("template") / "omniroute.db"
    _run_isolated(migrate(f"sqlite:///{path}"))
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
async def db_url(
    request: pytest.FixtureRequest, tmp_path: Path, pg_available: str | None
) -> AsyncIterator[str]:
    """The URL of an empty database: a SQLite file in ``tmp_path`` or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/data/omniroute.db"
        return
    if pg_available is not None:
        pytest.skip(pg_available)
    schema = f"omniroute_test_{uuid.uuid4().hex[:12]}"
    await _pg_exec(f'CREATE SCHEMA "{schema}"')
    try:
        yield _schema_url(schema)
    finally:
        await _pg_exec(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def secret_key() -> str:
    return Fernet.generate_key().decode()


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path, secret_key: str) -> AsyncIterator[Store]:
    """An open :class:`Store` on an empty, migrated database of each kind, closed after the test."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "data" / "omniroute.db"
        path.parent.mkdir()
        shutil.copyfile(template, path)
        url = f"sqlite:///{path}"
    else:
        url = request.getfixturevalue("pg_migrated_url")
        schema = url.rsplit("%3D", 1)[1]
        await _pg_exec(f"TRUNCATE {', '.join(f'{schema}.{t}' for t in TABLES)} RESTART IDENTITY CASCADE")
    s = await Store.open(url, secret_key=secret_key, data_dir=str(tmp_path / "keys"))
    try:
        yield s
    finally:
        await s.close()
