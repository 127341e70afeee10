"""Connections (PROV-3) and custom provider nodes (PROV-2) in the management API.

``GET/POST /api/connections``, ``GET/PUT/DELETE /api/connections/{id}`` and
``GET/POST /api/providers``, ``DELETE /api/providers/{id}``. Secrets are write-only: responses mask them.
Every edit rebuilds the routing snapshot, so a new or fixed connection serves the very next request
(and joins the auto pool at once, AUTO-2). A connection whose credentials were marked invalid is
marked valid again when its secret is replaced (RESIL-2: "until an operator fixes it").
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter

from omniroute.api.admin.core import Admin
from omniroute.core.egress import EgressPolicy
from omniroute.errors import GatewayError, InvalidRequest
from omniroute.gateway import Gateway
from omniroute.inventory import (
    ConnectionIn,
    ConnectionPatch,
    ModelIn,
    ProviderIn,
    add_connection,
    add_provider,
    check_base_url,
)

__all__ = ["ConnectionIn", "ConnectionPatch", "ModelIn", "ProviderIn", "router"]

router = APIRouter(tags=["connections"])


def _public(gw: Gateway, rows: list[dict[str, Any]], cid: str) -> dict[str, Any]:
    for r in rows:
        if r["id"] == cid:
            return r
    raise GatewayError(f"No connection '{cid}'.", status=404, code="not_found", param="id")


@router.get("/api/connections/{cid}")
async def get_connection(cid: str, gw: Admin) -> dict[str, Any]:
    """One connection, secrets masked."""
    assert gw.store is not None
    return _public(gw, await gw.store.list_connections_public(), cid)


@router.post("/api/connections", status_code=201)
async def create_connection(body: ConnectionIn, gw: Admin) -> dict[str, Any]:
    """Add a connection; it serves the very next request. An id that already exists is a 400 (change
    it with ``PUT /api/connections/{id}``, never by re-creating it)."""
    assert gw.store is not None
    await add_connection(gw.store, gw.registry.catalog, body, EgressPolicy.from_config(gw.config.security))
    await gw.resilience.mark_connection_valid(body.id)
    await gw.refresh()
    return _public(gw, await gw.store.list_connections_public(), body.id)


@router.put("/api/connections/{cid}")
async def update_connection(cid: str, body: ConnectionPatch, gw: Admin) -> dict[str, Any]:
    """Change some fields of a connection; a new secret clears an "invalid credentials" mark.

    A new ``base_url`` drops the stored secret unless the same request supplies one (``api_key`` or
    ``access_token``): whoever answers at the new address would otherwise receive the old key.
    """
    assert gw.store is not None
    current = await gw.store.get_connection(cid)
    if current is None:
        raise GatewayError(f"No connection '{cid}'.", status=404, code="not_found", param="id")
    changes = body.model_dump(exclude_unset=True)
    check_base_url(changes.get("base_url"), EgressPolicy.from_config(gw.config.security))
    if "base_url" in changes and changes["base_url"] != current.base_url:
        changes.setdefault("api_key", None)
        changes.setdefault("access_token", None)
    if "tags" in changes:
        changes["tags"] = tuple(changes["tags"] or ())
    await gw.store.upsert_connection(dataclasses.replace(current, **changes))
    if "api_key" in changes or "access_token" in changes:
        await gw.resilience.mark_connection_valid(cid)
    await gw.refresh()
    return _public(gw, await gw.store.list_connections_public(), cid)


@router.delete("/api/connections/{cid}")
async def delete_connection(cid: str, gw: Admin) -> dict[str, Any]:
    """Remove a connection."""
    assert gw.store is not None
    if not await gw.store.delete_connection(cid):
        raise GatewayError(f"No connection '{cid}'.", status=404, code="not_found", param="id")
    await gw.refresh()
    return {"deleted": cid}


@router.get("/api/providers")
async def list_providers(gw: Admin) -> dict[str, Any]:
    """Every provider of the effective catalog, with connected/simulated flags and models."""
    reg = gw.registry
    return {
        "data": [
            {
                "id": p.id,
                "name": p.name,
                "format": p.format,
                "base_url": p.base_url,
                "aliases": list(p.aliases),
                "connected": reg.is_connected(p.id),
                "simulated": p.simulated,
                "models": [
                    {
                        "id": m.id,
                        "input_price": m.input_price,
                        "output_price": m.output_price,
                        "context_window": m.context_window,
                        "max_output_tokens": m.max_output_tokens,
                        "capabilities": None if m.capabilities is None else sorted(m.capabilities),
                        "tier": m.tier,
                    }
                    for m in p.models
                ],
            }
            for p in reg.catalog.providers
        ]
    }


@router.post("/api/providers", status_code=201)
async def upsert_provider(body: ProviderIn, gw: Admin) -> dict[str, Any]:
    """Add a custom provider or override catalog fields; a new provider needs ``base_url``."""
    assert gw.store is not None
    try:
        await add_provider(
            gw.store,
            gw.registry.catalog,
            body,
            gw.refresh,
            gw.formats,
            EgressPolicy.from_config(gw.config.security),
        )
    except InvalidRequest:
        await gw.refresh()  # the snapshot of the restored store
        raise
    return {"id": body.id, "stored": True}


@router.delete("/api/providers/{pid}")
async def delete_provider(pid: str, gw: Admin) -> dict[str, Any]:
    """Remove a stored custom provider node (catalog providers stay)."""
    assert gw.store is not None
    if not await gw.store.delete_provider_node(pid):
        raise GatewayError(f"No stored provider '{pid}'.", status=404, code="not_found", param="id")
    await gw.refresh()
    return {"deleted": pid}
