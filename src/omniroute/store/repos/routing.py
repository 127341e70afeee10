"""Declarative fallback chains (RESIL-4) and per-key auto-combo exclusions (AUTO-2)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import delete, select

from omniroute.store import models
from omniroute.store.repos._base import RepoBase

_chain = models.fallback_chains
_excl = models.auto_exclusions


def normalise_chain(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``[{provider, priority, enabled}]`` sorted by ``priority`` (lower first, stable) (RESIL-4).

    A missing ``priority`` defaults to the entry's position, ``enabled`` to ``True``. Raises
    ``ValueError`` for an entry without a ``provider``.
    """
    out: list[dict[str, Any]] = []
    for i, e in enumerate(entries):
        provider = e.get("provider")
        if not isinstance(provider, str) or not provider:
            raise ValueError(f"fallback chain entry {i} needs a 'provider'")
        priority = e.get("priority")
        out.append(
            {
                "provider": provider,
                "priority": int(priority) if priority is not None else i,
                "enabled": bool(e.get("enabled", True)),
            }
        )
    out.sort(key=lambda e: int(e["priority"]))
    return out


def _key(api_key_id: str | None) -> str:
    # Primary-key columns cannot be NULL; the keyless client (no keys required) is stored as "".
    return api_key_id or ""


class RoutingRepo(RepoBase):
    """Fallback chains keyed by model id and exclusions keyed by ``(api_key_id, channel)``."""

    # fallback chains -----------------------------------------------------------------------------

    async def list_chains(self) -> dict[str, list[dict[str, Any]]]:
        """Every chain: ``{model: [{provider, priority, enabled}, …]}``, entries lower priority first."""
        async with self._engine.connect() as conn:
            rows = (
                await conn.execute(select(_chain.c.model, _chain.c.entries).order_by(_chain.c.model))
            ).all()
        return {model: list(entries) for model, entries in rows}

    async def set_chain(self, model: str, entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Create or replace ``model``'s chain (RESIL-4); returns the normalised entries."""
        normalised = normalise_chain(entries)
        async with self._engine.begin() as conn:
            await conn.execute(
                self._upsert(_chain, ["model"], ["entries", "updated_at"]),
                {"model": model, "entries": normalised, "updated_at": self._now()},
            )
        return normalised

    async def delete_chain(self, model: str) -> bool:
        """Delete ``model``'s chain; ``False`` when it had none."""
        async with self._engine.begin() as conn:
            res = await conn.execute(delete(_chain).where(_chain.c.model == model))
        return bool(res.rowcount)

    # auto-combo exclusions -----------------------------------------------------------------------

    async def list_exclusions(self, api_key_id: str | None, channel: str) -> set[str]:
        """Candidate keys (``provider/model@connection``) the API key excluded from ``channel`` (AUTO-2)."""
        async with self._engine.connect() as conn:
            rows = await conn.scalars(
                select(_excl.c.candidate_key).where(
                    _excl.c.api_key_id == _key(api_key_id), _excl.c.channel == channel
                )
            )
            return set(rows)

    async def add_exclusion(self, api_key_id: str | None, channel: str, candidate_key: str) -> None:
        """Exclude a candidate for this key and channel; idempotent."""
        async with self._engine.begin() as conn:
            await conn.execute(
                self._upsert(_excl, ["api_key_id", "channel", "candidate_key"]),
                {
                    "api_key_id": _key(api_key_id),
                    "channel": channel,
                    "candidate_key": candidate_key,
                    "created_at": self._now(),
                },
            )

    async def remove_exclusion(self, api_key_id: str | None, channel: str, candidate_key: str) -> bool:
        """Re-include a candidate; ``False`` when it was not excluded."""
        async with self._engine.begin() as conn:
            res = await conn.execute(
                delete(_excl).where(
                    _excl.c.api_key_id == _key(api_key_id),
                    _excl.c.channel == channel,
                    _excl.c.candidate_key == candidate_key,
                )
            )
        return bool(res.rowcount)
