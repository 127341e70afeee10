"""Schema migrations and database URLs (STORE-1 versioned schema, STORE-2 PostgreSQL by URL)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from omniroute.clock import SystemClock
from omniroute.store import Store, migrate, migrations
from omniroute.store.db import create_engine, parse_database_url
from omniroute.store.migrations import current_revision, head_revision, shipped_head
from omniroute.store.models import Base
from omniroute.store.secrets import load_secret_box
from omniroute.values import Connection as Conn

TABLES = {
    "provider_nodes",
    "connections",
    "api_keys",
    "combos",
    "model_combo_mappings",
    "fallback_chains",
    "auto_exclusions",
    "usage_log",
    "routing_decisions",
    "responses_store",
}


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names())


def _diff(conn: Connection) -> list[Any]:
    return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))


async def test_migrations_create_every_table_at_head(db_url: str, secret_key: str) -> None:
    """STORE-1: opening a store upgrades an empty database to the newest revision, matching the models."""
    s = await Store.open(db_url, secret_key=secret_key)
    try:
        assert await current_revision(s.engine) is not None
        async with s.engine.connect() as conn:
            assert await conn.run_sync(_tables) >= TABLES | {"alembic_version"}
            assert await conn.run_sync(_diff) == []  # the scripts build exactly what the ORM declares
        assert await current_revision(s.engine) == head_revision()
    finally:
        await s.close()


async def test_rerunning_migrate_is_a_noop_and_keeps_data(db_url: str, secret_key: str) -> None:
    """STORE-1: ``migrate`` on a database at head changes nothing; reopening keeps the rows."""
    s = await Store.open(db_url, secret_key=secret_key)
    try:
        await s.upsert_connection(Conn(id="c1", provider="openai", api_key="sk-test-0123456789abcd"))
        await migrate(db_url)
        await migrate(s.engine)
        assert await current_revision(s.engine) == head_revision()
    finally:
        await s.close()
    again = await Store.open(db_url, secret_key=secret_key)
    try:
        conn = await again.get_connection("c1")
        assert conn is not None and conn.api_key == "sk-test-0123456789abcd"
    finally:
        await again.close()


async def test_concurrent_migrations_are_serialised(db_url: str) -> None:
    """STORE-2: replicas starting together both succeed; one upgrades, the other finds head."""
    await asyncio.gather(migrate(db_url), migrate(db_url), migrate(db_url))
    engine = create_engine(parse_database_url(db_url))
    try:
        assert await current_revision(engine) == head_revision()
    finally:
        await engine.dispose()


async def test_sqlite_pragmas_are_set_on_connect(tmp_path: Path, secret_key: str) -> None:
    """STORE-1: SQLite runs in WAL mode with a busy timeout and enforced foreign keys."""
    s = await Store.open(f"sqlite:///{tmp_path}/x.db", secret_key=secret_key)
    try:
        async with s.engine.connect() as conn:
            assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
            assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
            assert (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar() == 5000
    finally:
        await s.close()


async def test_in_memory_sqlite_works(secret_key: str) -> None:
    """``sqlite://`` is an in-memory database shared by the store's one connection."""
    s = await Store.open("sqlite://", secret_key=secret_key)
    try:
        await s.create_combo({"name": "m"})
        assert [c["name"] for c in await s.list_combos()] == ["m"]
        assert await s.ping()
    finally:
        await s.close()


def test_sqlite_url_is_normalised_and_its_folder_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sqlite:///./data/x.db`` → aiosqlite driver, absolute path, parent folder created."""
    monkeypatch.chdir(tmp_path)
    t = parse_database_url("sqlite:///./data/x.db")
    assert t.url.drivername == "sqlite+aiosqlite"
    assert t.sqlite_path == tmp_path / "data" / "x.db"
    assert (tmp_path / "data").is_dir()
    assert parse_database_url("sqlite://").memory


@pytest.mark.parametrize(
    "url",
    ["postgresql://u:p@h:5433/db", "postgres://u:p@h:5433/db", "postgresql+psycopg2://u:p@h:5433/db"],
)
def test_postgres_urls_use_asyncpg(url: str) -> None:
    """STORE-2: any PostgreSQL URL runs on asyncpg."""
    t = parse_database_url(url)
    assert t.url.drivername == "postgresql+asyncpg"
    assert (t.url.host, t.url.port, t.url.database) == ("h", 5433, "db")
    assert "p" not in t.display().split("@")[0].split(":")[-1]


def test_postgres_libpq_options_become_server_settings() -> None:
    t = parse_database_url(
        "postgresql://h/db?options=-csearch_path%3Dtenant%20-c%20statement_timeout%3D5000&sslmode=require"
    )
    assert t.connect_args == {"server_settings": {"search_path": "tenant", "statement_timeout": "5000"}}
    assert dict(t.url.query) == {"ssl": "require"}


def test_unsupported_url_is_rejected() -> None:
    with pytest.raises(ValueError, match="unsupported database URL"):
        parse_database_url("mysql://h/db")


async def test_ping_reports_an_unreachable_database(secret_key: str) -> None:
    """OBS-4: ``ping`` answers ``False`` instead of raising when the database is gone."""
    target = parse_database_url("postgresql://postgres@127.0.0.1:1/none")  # nothing listens on port 1
    s = Store(create_engine(target), load_secret_box(secret_key=secret_key), target, SystemClock())
    try:
        assert await s.ping() is False
    finally:
        await s.close()


def test_shipped_head_is_alembics_head() -> None:
    """The revision read from the scripts as text (no Alembic import) is Alembic's own head."""
    assert shipped_head() == head_revision()


def _schema(conn: Connection) -> dict[str, Any]:
    """Every table's columns, keys, constraints and indexes, as reflected (names included)."""
    insp = inspect(conn)
    out: dict[str, Any] = {}
    for t in sorted(insp.get_table_names()):
        out[t] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], c.get("default")) for c in insp.get_columns(t)
            ],
            "pk": insp.get_pk_constraint(t),
            "unique": sorted((u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(t)),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), i["unique"]) for i in insp.get_indexes(t)
            ),
            "fks": sorted(
                (f["name"], tuple(f["constrained_columns"]), f["referred_table"])
                for f in insp.get_foreign_keys(t)
            ),
        }
    return out


async def _reflect(url: str) -> tuple[dict[str, Any], str | None]:
    engine = create_engine(parse_database_url(url))
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_schema), await current_revision(engine)
    finally:
        await engine.dispose()


async def test_new_database_gets_exactly_the_scripts_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new database is built from the models and stamped at head (PERF-5: no Alembic import); that
    must be the very schema the migration scripts build, constraint and index names included."""
    await migrate(f"sqlite:///{tmp_path}/fresh.db")
    monkeypatch.setattr(migrations, "shipped_head", lambda: None)  # unknown head: Alembic runs the scripts
    await migrate(f"sqlite:///{tmp_path}/scripted.db")
    fresh, scripted = (
        await _reflect(f"sqlite:///{tmp_path}/fresh.db"),
        await _reflect(f"sqlite:///{tmp_path}/scripted.db"),
    )
    assert fresh[1] == scripted[1] == head_revision()
    assert fresh[0] == scripted[0]


async def test_scripts_build_the_models_schema(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """STORE-1/2: the Alembic path (taken whenever the fast paths do not apply) reaches head and matches."""
    monkeypatch.setattr(migrations, "shipped_head", lambda: None)
    await migrate(db_url)
    engine = create_engine(parse_database_url(db_url))
    try:
        assert await current_revision(engine) == head_revision()
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()


async def test_database_with_other_tables_is_upgraded_by_alembic(db_url: str) -> None:
    """Only a database with no tables at all is built from the models; one holding anything else (here
    an unrelated table, no ``alembic_version``) goes through the scripts and keeps its table."""
    engine = create_engine(parse_database_url(db_url))
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE someone_elses (id INTEGER PRIMARY KEY)"))
        await migrate(engine)
        assert await current_revision(engine) == head_revision()
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) >= TABLES | {"someone_elses", "alembic_version"}
    finally:
        await engine.dispose()


def test_starting_on_a_new_or_current_database_does_not_import_alembic(tmp_path: Path) -> None:
    """PERF-5: Alembic (about 8 MB resident) stays unloaded when there is nothing to upgrade."""
    code = (
        "import asyncio, sys\n"
        "from omniroute.store import migrate\n"
        f"url = 'sqlite:///{tmp_path}/x.db'\n"
        "asyncio.run(migrate(url))\n"
        "asyncio.run(migrate(url))\n"
        "print('alembic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False"]


async def test_sqlite_keeps_at_most_a_few_connections_under_a_burst(tmp_path: Path, secret_key: str) -> None:
    """PERF-5: a burst of concurrent reads queues for the SQLite file's few connections instead of opening
    more; each connection is a thread with its own page cache that would stay resident for good."""
    import threading

    from omniroute.store.db import SQLITE_POOL_SIZE

    before = threading.active_count()
    s = await Store.open(f"sqlite:///{tmp_path}/x.db", secret_key=secret_key)
    try:
        await asyncio.gather(*(s.list_exclusions("k", "auto") for _ in range(64)))
        pool = s.engine.sync_engine.pool
        assert pool.checkedin() + pool.checkedout() <= SQLITE_POOL_SIZE  # type: ignore[attr-defined]
        assert threading.active_count() - before <= SQLITE_POOL_SIZE
    finally:
        await s.close()
