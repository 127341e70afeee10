"""Connections (PROV-3) and custom provider nodes (PROV-2): credentials encrypted at rest, runtime state."""

from __future__ import annotations

import enum
from typing import Any, Final

from sqlalchemy import delete, select, update
from sqlalchemy.engine import RowMapping

from omniroute.store import models
from omniroute.store.repos._base import RepoBase
from omniroute.store.secrets import mask
from omniroute.values import Connection

_conn = models.connections
_node = models.provider_nodes

_CONFIG_COLUMNS: Final = (
    "provider",
    "name",
    "auth_type",
    "api_key_enc",
    "access_token_enc",
    "expires_at",
    "base_url",
    "default_model",
    "priority",
    "is_active",
    "account_tier",
    "max_concurrent",
    "tags",
    "updated_at",
)
_STATE_COLUMNS: Final = ("rate_limited_until", "backoff_level", "test_status", "last_error")
_NODE_COLUMNS: Final = ("format", "base_url", "name", "aliases", "models", "updated_at")


class _Unset(enum.Enum):
    UNSET = enum.auto()


UNSET: Final = _Unset.UNSET
"""Default of :meth:`ConnectionsRepo.update_connection_state` parameters: "leave this field alone"."""


class ConnectionsRepo(RepoBase):
    """Connections with Fernet-encrypted ``api_key``/``access_token`` (PROV-3) and provider nodes."""

    # connections ---------------------------------------------------------------------------------

    async def upsert_connection(self, c: Connection) -> None:
        """Insert or replace a connection's configuration by ``id`` (PROV-3).

        Secrets are encrypted before they reach the database; runtime state (``rate_limited_until``,
        ``backoff_level``, ``test_status``, ``last_error``) and ``created_at`` are kept on update.
        """
        ts = self._now()
        values: dict[str, Any] = {
            "id": c.id,
            "provider": c.provider,
            "name": c.name,
            "auth_type": c.auth_type,
            "api_key_enc": self._secrets.encrypt(c.api_key) if c.api_key is not None else None,
            "access_token_enc": (
                self._secrets.encrypt(c.access_token) if c.access_token is not None else None
            ),
            "expires_at": c.expires_at,
            "base_url": c.base_url,
            "default_model": c.default_model,
            "priority": c.priority,
            "is_active": c.is_active,
            "account_tier": c.account_tier,
            "max_concurrent": c.max_concurrent,
            "tags": list(c.tags),
            "backoff_level": 0,
            "test_status": "untested",
            "created_at": ts,
            "updated_at": ts,
        }
        async with self._engine.begin() as conn:
            await conn.execute(self._upsert(_conn, ["id"], _CONFIG_COLUMNS), values)

    async def list_connections(self) -> list[Connection]:
        """Every connection with decrypted secrets, ordered by ``priority`` (lower first) then ``id``.

        Raises :class:`~omniroute.store.errors.SecretKeyMismatch` when the key cannot decrypt them.
        """
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select(_conn).order_by(_conn.c.priority, _conn.c.id))).mappings()
            return [self._to_connection(r) for r in rows]

    async def get_connection(self, id: str) -> Connection | None:
        """One connection with decrypted secrets, or ``None``."""
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(_conn).where(_conn.c.id == id))).mappings().first()
        return self._to_connection(row) if row is not None else None

    async def delete_connection(self, id: str) -> bool:
        """Delete a connection; ``False`` when it did not exist."""
        async with self._engine.begin() as conn:
            res = await conn.execute(delete(_conn).where(_conn.c.id == id))
        return bool(res.rowcount)

    async def update_connection_state(
        self,
        id: str,
        *,
        rate_limited_until: float | _Unset | None = UNSET,
        backoff_level: int | _Unset = UNSET,
        test_status: str | _Unset = UNSET,
        last_error: str | _Unset | None = UNSET,
    ) -> None:
        """Write only the given runtime-state fields (PROV-3); ``rate_limited_until`` is epoch seconds.

        An unknown ``id`` is ignored.
        """
        given = {
            "rate_limited_until": rate_limited_until,
            "backoff_level": backoff_level,
            "test_status": test_status,
            "last_error": last_error,
        }
        values = {k: v for k, v in given.items() if v is not UNSET}
        if not values:
            return
        async with self._engine.begin() as conn:
            await conn.execute(update(_conn).where(_conn.c.id == id).values(**values))

    async def connection_state(self, id: str) -> dict[str, Any]:
        """Runtime ``{rate_limited_until, backoff_level, test_status, last_error}``; ``{}`` if unknown."""
        cols = [_conn.c[name] for name in _STATE_COLUMNS]
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(*cols).where(_conn.c.id == id))).mappings().first()
        return dict(row) if row is not None else {}

    async def list_connections_public(self) -> list[dict[str, Any]]:
        """Every connection as a JSON-ready dict for the management API, secrets masked (PROV-3).

        ``api_key``/``access_token`` hold :func:`~omniroute.store.secrets.mask` output (``""`` when unset),
        never plaintext; runtime state and timestamps are included.
        """
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select(_conn).order_by(_conn.c.priority, _conn.c.id))).mappings()
            out = []
            for r in rows:
                c = self._to_connection(r)
                d: dict[str, Any] = {
                    "id": c.id,
                    "provider": c.provider,
                    "name": c.name,
                    "auth_type": c.auth_type,
                    "api_key": mask(c.api_key),
                    "access_token": mask(c.access_token),
                    "expires_at": c.expires_at,
                    "base_url": c.base_url,
                    "default_model": c.default_model,
                    "priority": c.priority,
                    "is_active": c.is_active,
                    "account_tier": c.account_tier,
                    "max_concurrent": c.max_concurrent,
                    "tags": list(c.tags),
                }
                d.update({k: r[k] for k in (*_STATE_COLUMNS, "created_at", "updated_at")})
                out.append(d)
            return out

    def _to_connection(self, r: RowMapping) -> Connection:
        api_key = r["api_key_enc"]
        token = r["access_token_enc"]
        return Connection(
            id=r["id"],
            provider=r["provider"],
            name=r["name"],
            auth_type=r["auth_type"],
            api_key=self._secrets.decrypt(api_key) if api_key is not None else None,
            access_token=self._secrets.decrypt(token) if token is not None else None,
            expires_at=r["expires_at"],
            base_url=r["base_url"],
            default_model=r["default_model"],
            priority=r["priority"],
            is_active=bool(r["is_active"]),
            account_tier=r["account_tier"],
            max_concurrent=r["max_concurrent"],
            tags=tuple(r["tags"] or ()),
        )

    # provider nodes ------------------------------------------------------------------------------

    async def upsert_provider_node(self, node: dict[str, Any]) -> None:
        """Insert or replace a custom provider by ``node["id"]`` (PROV-2).

        Keys: ``id`` (required), ``format`` (``openai``|``anthropic``|``gemini``, default ``openai``),
        ``base_url``, ``name``, ``aliases`` (list of str), ``models`` (list of model dicts). Raises
        ``ValueError`` without an ``id``.
        """
        node_id = node.get("id")
        if not node_id or not isinstance(node_id, str):
            raise ValueError("provider node needs a string 'id'")
        ts = self._now()
        values = {
            "id": node_id,
            "format": node.get("format") or "openai",
            "base_url": node.get("base_url") or "",
            "name": node.get("name") or "",
            "aliases": list(node.get("aliases") or ()),
            "models": list(node.get("models") or ()),
            "created_at": ts,
            "updated_at": ts,
        }
        async with self._engine.begin() as conn:
            await conn.execute(self._upsert(_node, ["id"], _NODE_COLUMNS), values)

    async def list_provider_nodes(self) -> list[dict[str, Any]]:
        """Custom providers: ``{id, format, base_url, name, aliases, models, created_at, updated_at}``."""
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select(_node).order_by(_node.c.id))).mappings()
            return [dict(r) for r in rows]

    async def delete_provider_node(self, id: str) -> bool:
        """Delete a custom provider; ``False`` when it did not exist."""
        async with self._engine.begin() as conn:
            res = await conn.execute(delete(_node).where(_node.c.id == id))
        return bool(res.rowcount)
