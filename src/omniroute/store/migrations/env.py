"""Alembic environment for the store's migrations (STORE-1 versioned schema).

Normally driven by :func:`omniroute.store.migrations.migrate`, which hands over an open connection in
``config.attributes["connection"]``. Without one (e.g. ``command.revision(..., autogenerate=True)`` from a
developer shell) it connects to ``sqlalchemy.url`` itself with the async driver.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from omniroute.store.db import create_engine, parse_database_url
from omniroute.store.models import Base

config = context.config
target_metadata = Base.metadata


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things in place; batch mode recreates the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine(url: str) -> None:
    engine = create_engine(parse_database_url(url))
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_configure_and_run)
            await conn.commit()
    finally:
        await engine.dispose()


def _run() -> None:
    if context.is_offline_mode():
        context.configure(
            url=config.get_main_option("sqlalchemy.url"),
            target_metadata=target_metadata,
            literal_binds=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection and no sqlalchemy.url for the migration environment")
    asyncio.run(_run_with_own_engine(url))


_run()
