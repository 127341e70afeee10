"""The :class:`Store` facade: opens the database, runs migrations, and composes the repositories.

Every method is async and returns plain dicts or frozen value objects (``omniroute.values.Connection``);
ORM rows never leave the store (DESIGN house style 9).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from sqlalchemy import case, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from omniroute.clock import Clock, SystemClock
from omniroute.store import models
from omniroute.store.db import DatabaseTarget, create_engine, parse_database_url
from omniroute.store.errors import SECRET_KEY_ENV, SecretKeyMissing
from omniroute.store.keyguard import check_key, encrypted_secret_count, reencrypt
from omniroute.store.migrations import migrate
from omniroute.store.repos.api_keys import ApiKeysRepo
from omniroute.store.repos.combos import CombosRepo
from omniroute.store.repos.connections import ConnectionsRepo
from omniroute.store.repos.routing import RoutingRepo
from omniroute.store.repos.sessions import SessionsRepo
from omniroute.store.repos.usage import UsageRepo
from omniroute.store.secrets import (
    KEY_FILE_NAME,
    SecretBox,
    existing_secret_box,
    key_file_path,
    load_secret_box,
)

__all__ = ["PING_TIMEOUT_S", "Store"]

log = logging.getLogger(__name__)

PING_TIMEOUT_S = 2.0
"""How long :meth:`Store.ping` waits for the database before reporting it unreachable (s)."""


class Store(ConnectionsRepo, ApiKeysRepo, CombosRepo, RoutingRepo, UsageRepo, SessionsRepo):
    """Config and usage persistence on SQLite (STORE-1) or PostgreSQL (STORE-2).

    Build it with :meth:`open`; close it with :meth:`close`. Methods by area:

    * connections (PROV-3): ``upsert_connection``, ``list_connections``, ``get_connection``,
      ``delete_connection``, ``update_connection_state``, ``connection_state``,
      ``list_connections_public``; provider nodes: ``upsert_provider_node``, ``list_provider_nodes``,
      ``delete_provider_node``
    * API keys (API-8): ``create_api_key``, ``verify_api_key``, ``api_keys_for_auth``, ``list_api_keys``,
      ``revoke_api_key``, ``update_api_key``, ``add_spend``, ``reserve_spend``, ``settle_spend``,
      ``upsert_api_key_from_config``
    * combos (COMBO-1/2): ``list_combos``, ``get_combo``, ``create_combo``, ``update_combo``,
      ``delete_combo``, ``upsert_combo_by_name``; ``list_mappings``, ``get_mapping``, ``create_mapping``,
      ``update_mapping``, ``delete_mapping``, ``upsert_mapping_by_pattern``, ``upsert_mapping_from_config``
    * fallback chains (RESIL-4): ``list_chains``, ``set_chain``, ``delete_chain``; auto exclusions
      (AUTO-2): ``list_exclusions``, ``add_exclusion``, ``remove_exclusion``
    * usage (OBS-1): ``write_usage``, ``usage_stats``, ``usage_summary``, ``traffic_summary``,
      ``recent_usage``; decisions (OBS-2):
      ``save_decisions``, ``get_decision``; responses: ``save_response``, ``get_response``; ``prune``
    * console sessions (OPS-3): ``revoke_console_session``, ``console_session_revoked``
    """

    def __init__(self, engine: AsyncEngine, secrets: SecretBox, target: DatabaseTarget, clock: Clock) -> None:
        self._engine = engine
        self._secrets = secrets
        self._target = target
        self._clock = clock

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        secret_key: str | None = None,
        data_dir: str | None = None,
        clock: Clock | None = None,
    ) -> Store:
        """Connect to ``url``, upgrade the schema to head, and resolve the secret key.

        ``url``: ``sqlite:///./data/omniroute.db`` (parent folder created), ``sqlite://`` (in memory) or
        ``postgresql://user@host/db``. ``secret_key``: Fernet key(s), else ``OMNIROUTE_SECRET_KEY``, else
        ``<data_dir or the SQLite folder or ~/.omniroute>/secret.key`` (created 0600). ``clock`` stamps
        rows and times the Responses store's TTL (default the process clock; a gateway passes its
        own). Raises ``ValueError`` for an unsupported URL or malformed key,
        :class:`SecretKeyMissing` when secrets are stored but no key is found (none is generated then),
        :class:`SecretKeyMismatch` when the key is not the one they were written with (its
        fingerprint is kept in the database), and SQLAlchemy/driver errors when the database is
        unreachable.
        """
        target = parse_database_url(url)
        key_file = key_file_path(sqlite_path=target.sqlite_path, data_dir=data_dir)
        secrets = existing_secret_box(
            secret_key=secret_key, sqlite_path=target.sqlite_path, data_dir=data_dir, ephemeral=target.memory
        )
        engine = create_engine(target)
        try:
            await migrate(engine)
            if secrets is None:
                # Never generate a key for a store that already holds secrets: it could not read them.
                if await encrypted_secret_count(engine):
                    raise SecretKeyMissing(str(key_file))
                secrets = load_secret_box(
                    sqlite_path=target.sqlite_path, data_dir=data_dir, ephemeral=target.memory
                )
            await check_key(engine, secrets, key_file=str(key_file))
        except BaseException:
            await engine.dispose()
            raise
        log.info("store open: %s (secret key from %s)", target.display(), secrets.source)
        if target.dialect == "postgresql" and secrets.source.endswith(KEY_FILE_NAME):
            # Replicas on other hosts would each generate their own file and fail to read each other's
            # secrets (STORE-2); one shared key in the environment avoids that.
            log.warning(
                "PostgreSQL store with a local key file (%s): set %s so every replica uses the same key",
                secrets.source,
                SECRET_KEY_ENV,
            )
        return cls(engine, secrets, target, clock or SystemClock())

    @property
    def key_source(self) -> str:
        """Where the secret key came from: ``OMNIROUTE_SECRET_KEY``, the key file's path, …"""
        return self._secrets.source

    async def rotate_secrets(self, new: SecretBox) -> int:
        """Re-encrypt every stored connection secret with ``new`` and record its fingerprint, atomically;
        this store uses ``new`` afterwards. Returns how many connections were rewritten; raises
        :class:`SecretKeyMismatch` (nothing changed) when the current key cannot decrypt one."""
        count = await reencrypt(self._engine, self._secrets, new)
        self._secrets = new
        return count

    async def close(self) -> None:
        """Close every pooled connection; the store is unusable afterwards."""
        await self._engine.dispose()

    def derive_key(self, purpose: bytes) -> bytes:
        """A 32-byte signing key for ``purpose`` derived from the secret key (see :meth:`SecretBox.derive`);
        the same in every worker and replica that shares the secret key."""
        return self._secrets.derive(purpose)

    async def ping(self) -> bool:
        """``True`` when the database answers ``SELECT 1`` within :data:`PING_TIMEOUT_S` (OBS-4 ready)."""
        try:
            async with asyncio.timeout(PING_TIMEOUT_S), self._engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as exc:
            log.warning("store ping failed: %s", exc)
            return False
        return True

    async def snapshot_fingerprint(self) -> tuple[Any, ...]:
        """A cheap value that changes whenever a table the routing snapshot is built from changes.

        Why: another process (the CLI, another replica) may write the same database; a running gateway
        compares this value every few seconds and rebuilds its snapshot when it differs. One statement
        of per-table aggregates (row count plus newest ``created_at``/``updated_at``, epoch seconds): an
        insert or delete changes the count or the newest timestamp, an edit bumps ``updated_at``. API
        keys also count revoked rows (revoke is a flag) and their newest ``updated_at`` (an edit).
        Runtime connection state (cooldowns) does not bump ``updated_at`` and so does not count.
        """
        k = models.api_keys
        parts: list[Any] = [
            select(func.count()).select_from(k).scalar_subquery(),
            select(func.max(k.c.created_at)).scalar_subquery(),
            select(func.sum(case((k.c.revoked.is_(True), 1), else_=0))).scalar_subquery(),
            select(func.max(k.c.updated_at)).scalar_subquery(),
        ]
        for t in (
            models.connections,
            models.provider_nodes,
            models.combos,
            models.model_combo_mappings,
            models.fallback_chains,
        ):
            parts.append(select(func.count()).select_from(t).scalar_subquery())
            parts.append(select(func.max(t.c.updated_at)).scalar_subquery())
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(*parts))).one()
        return tuple(row)

    @property
    def url(self) -> str:
        """The database URL with the password hidden."""
        return self._target.display()

    @property
    def engine(self) -> AsyncEngine:
        """The underlying engine, for tests and maintenance commands; application code uses the methods."""
        return self._engine

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
