"""Resilience state (RESIL-1 … RESIL-3) and declarative fallback chains (RESIL-4) in the management API.

``GET /api/resilience`` shows breakers, cooldowns, invalid connections and lockouts with reasons and
deadlines plus the recent transitions; ``POST /api/resilience/reset`` clears them (all, or one provider
or connection). ``GET/POST/DELETE /api/fallback/chains`` edit chains at run time; every edit applies to
the very next request.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from omniroute.api.admin.core import Admin
from omniroute.core.fields import Int
from omniroute.errors import GatewayError

router = APIRouter(tags=["resilience"])


@router.get("/api/resilience")
async def resilience_state(gw: Admin) -> dict[str, Any]:
    """Breaker, cooldown and lockout state with reasons and deadlines (epoch seconds and ISO)."""
    return await gw.resilience.snapshot()


class ResetBody(BaseModel):
    """``POST /api/resilience/reset``: nothing = everything; else one provider and/or connection."""

    model_config = ConfigDict(extra="forbid")

    provider: str | None = None
    connection: str | None = None


@router.post("/api/resilience/reset")
async def resilience_reset(gw: Admin, body: ResetBody | None = None) -> dict[str, Any]:
    """Close breakers, clear cooldowns, invalid marks and lockouts; 404 naming a ``provider`` or
    ``connection`` the gateway does not know."""
    b = body or ResetBody()
    reg = gw.registry
    if (
        b.provider is not None
        and reg.catalog.provider(b.provider) is None
        and b.provider not in reg.connections
    ):
        raise GatewayError(
            f"provider: unknown provider '{b.provider}'", status=404, code="not_found", param="provider"
        )
    known = {c.id for conns in reg.connections.values() for c in conns}
    if b.connection is not None and b.connection not in known:
        raise GatewayError(
            f"connection: unknown connection '{b.connection}'",
            status=404,
            code="not_found",
            param="connection",
        )
    await gw.resilience.reset(provider=b.provider, connection=b.connection)
    return {"reset": True, "provider": b.provider, "connection": b.connection}


class ChainEntry(BaseModel):
    """One chain entry (RESIL-4): provider, priority (lower first), enabled."""

    model_config = ConfigDict(extra="forbid")

    provider: str = Field(min_length=1)
    priority: Int | None = None
    enabled: bool = True


class ChainBody(BaseModel):
    """``POST /api/fallback/chains``: register (replace) the chain of one model id."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(min_length=1, max_length=256)
    chain: list[ChainEntry] = Field(min_length=1)


@router.get("/api/fallback/chains")
async def list_chains(gw: Admin) -> dict[str, Any]:
    """Every registered chain: ``{model: [{provider, priority, enabled}]}``."""
    assert gw.store is not None
    return {"chains": await gw.store.list_chains()}


@router.get("/api/fallback/chains/{model:path}")
async def get_chain(model: str, gw: Admin) -> dict[str, Any]:
    """One model's chain, with what ``resolve`` would use now (enabled entries in priority order)."""
    assert gw.store is not None
    chains = await gw.store.list_chains()
    if model not in chains:
        raise GatewayError(
            f"No fallback chain for model '{model}'.", status=404, code="not_found", param="model"
        )
    entries = chains[model]
    return {
        "model": model,
        "chain": entries,
        "resolved": [e["provider"] for e in entries if e.get("enabled", True)],
    }


@router.post("/api/fallback/chains", status_code=201)
async def set_chain(body: ChainBody, gw: Admin) -> dict[str, Any]:
    """Register a chain; unknown providers are a 400 naming the entry."""
    assert gw.store is not None
    for i, e in enumerate(body.chain):
        if gw.registry.catalog.provider(e.provider) is None:
            raise GatewayError(
                f"chain[{i}].provider: unknown provider '{e.provider}'.",
                status=400,
                code="invalid_request_error",
                param=f"chain[{i}].provider",
            )
    entries = [
        {"provider": e.provider, "priority": i if e.priority is None else e.priority, "enabled": e.enabled}
        for i, e in enumerate(body.chain)
    ]
    saved = await gw.store.set_chain(body.model, entries)
    await gw.refresh()
    return {"model": body.model, "chain": saved}


@router.delete("/api/fallback/chains/{model:path}")
async def delete_chain(model: str, gw: Admin) -> dict[str, Any]:
    """Remove a model's chain."""
    assert gw.store is not None
    if not await gw.store.delete_chain(model):
        raise GatewayError(
            f"No fallback chain for model '{model}'.", status=404, code="not_found", param="model"
        )
    await gw.refresh()
    return {"deleted": model}
