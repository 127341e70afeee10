"""Connections (PROV-3) and custom provider nodes (PROV-2) in the management API.

``GET/POST /api/connections``, ``GET/PUT/DELETE /api/connections/{id}`` and
``GET/POST /api/providers``, ``DELETE /api/providers/{id}``. Secrets are write-only: responses mask them.
Every edit rebuilds the routing snapshot, so a new or fixed connection serves the very next request
(and joins the auto pool at once, AUTO-2). A connection whose credentials were marked invalid is
marked valid again when its secret is replaced (RESIL-2: "until an operator fixes it").
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from omniroute import wire
from omniroute.api.admin.core import Admin
from omniroute.core.egress import EgressDenied, EgressPolicy
from omniroute.errors import GatewayError, InvalidRequest
from omniroute.gateway import Gateway
from omniroute.values import Connection

router = APIRouter(tags=["connections"])


MAX_PRICE = 100_000.0  # USD per 1M tokens; anything above is a typo, and it keeps costs finite
MAX_TOKENS = 100_000_000


def _http_url(v: str | None) -> str | None:
    """``base_url`` must be an absolute http(s) URL with a host (PROV-2)."""
    if v is None:
        return v
    from urllib.parse import urlsplit

    try:
        u = urlsplit(v)
        port_ok = u.port is None or 0 < u.port < 65536
    except ValueError:
        raise ValueError("must be an http(s) URL like http://host:port/v1") from None
    if u.scheme not in ("http", "https") or not u.hostname or not port_ok:
        raise ValueError("must be an http(s) URL like http://host:port/v1")
    return v


HttpUrl = Annotated[str | None, AfterValidator(_http_url)]


WireFormatName = Annotated[str | None, Field(min_length=1, max_length=100)]
"""A provider ``format``: checked against the gateway's wire formats (the registry,
:mod:`omniroute.wire`, plus its extensions) by the handler."""


class ConnectionIn(BaseModel):
    """A connection as created or replaced through the API."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    provider: str = Field(min_length=1)
    name: str | None = None
    auth_type: Literal["api_key", "oauth"] = "api_key"
    api_key: str | None = None
    access_token: str | None = None
    expires_at: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    base_url: HttpUrl = None
    default_model: str | None = None
    priority: int = Field(default=1, ge=0, le=1_000_000)
    is_active: bool = True
    account_tier: Literal["ultra", "pro", "standard", "free"] = "standard"
    max_concurrent: int | None = Field(default=None, ge=1)
    tags: list[str] = Field(default_factory=list)


class ConnectionPatch(BaseModel):
    """``PUT /api/connections/{id}``: any subset of the fields; omitted fields keep their value."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    api_key: str | None = None
    access_token: str | None = None
    expires_at: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    base_url: HttpUrl = None
    default_model: str | None = None
    priority: int | None = Field(default=None, ge=0, le=1_000_000)
    is_active: bool | None = None
    account_tier: Literal["ultra", "pro", "standard", "free"] | None = None
    max_concurrent: int | None = Field(default=None, ge=1)
    tags: list[str] | None = None


def _public(gw: Gateway, rows: list[dict[str, Any]], cid: str) -> dict[str, Any]:
    for r in rows:
        if r["id"] == cid:
            return r
    raise GatewayError(f"No connection '{cid}'.", status=404, code="not_found", param="id")


def _check_base_url(gw: Gateway, url: str | None) -> None:
    """The ``base_url`` policy (``security`` in the config, :mod:`omniroute.core.egress`): a refused
    address is a 400 naming ``base_url``."""
    if url:
        try:
            EgressPolicy.from_config(gw.config.security).check_url(url)
        except EgressDenied as exc:
            raise InvalidRequest(str(exc), param="base_url") from None


def _check_provider(gw: Gateway, provider: str) -> None:
    if gw.registry.catalog.provider(provider) is None:
        raise InvalidRequest(
            f"provider: unknown provider '{provider}' (add it under /api/providers first).", param="provider"
        )


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
    if await gw.store.get_connection(body.id) is not None:
        raise InvalidRequest(
            f"a connection with id '{body.id}' already exists "
            f"(update it with PUT /api/connections/{body.id})",
            param="id",
        )
    _check_provider(gw, body.provider)
    _check_base_url(gw, body.base_url)
    if body.auth_type == "api_key" and not body.api_key:
        raise InvalidRequest("api_key: required when auth_type is api_key.", param="api_key")
    if body.auth_type == "oauth" and not body.access_token:
        raise InvalidRequest("access_token: required when auth_type is oauth.", param="access_token")
    data = body.model_dump()
    data["name"] = data["name"] or body.id
    data["tags"] = tuple(body.tags)
    await gw.store.upsert_connection(Connection(**data))
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
    _check_base_url(gw, changes.get("base_url"))
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


class ModelIn(BaseModel):
    """A model of a custom provider; prices in USD per 1M tokens (PROV-2)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    name: str | None = None
    input_price: float | None = Field(default=None, ge=0, le=MAX_PRICE)
    output_price: float | None = Field(default=None, ge=0, le=MAX_PRICE)
    context_window: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    max_output_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    capabilities: (
        list[Literal["tools", "vision", "reasoning", "structured_output", "embeddings", "audio"]] | None
    ) = None
    tier: Literal["free", "standard", "premium"] | None = None


class ProviderIn(BaseModel):
    """A custom OpenAI-/Anthropic-/Gemini-compatible provider, or an override of a catalog one."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")
    format: WireFormatName = None
    base_url: HttpUrl = None
    name: str | None = None
    aliases: list[str] = Field(default_factory=list)
    models: list[ModelIn] = Field(default_factory=list)


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
    problem = wire.unknown_upstream_format(body.format, gw.formats) if body.format is not None else None
    if problem is not None:
        raise InvalidRequest(f"format: {problem}", param="format")
    if gw.registry.catalog.provider(body.id) is None and not body.base_url:
        raise InvalidRequest("base_url: required for a provider the catalog does not know.", param="base_url")
    _check_base_url(gw, body.base_url)
    node = body.model_dump()
    previous = [n for n in await gw.store.list_provider_nodes() if n["id"] == body.id]
    await gw.store.upsert_provider_node(node)
    try:
        await gw.refresh()
    except ValueError as exc:  # the merged catalog rejected it (alias clash, bad limits …)
        if previous:
            await gw.store.upsert_provider_node(previous[0])
        else:
            await gw.store.delete_provider_node(body.id)
        await gw.refresh()
        raise InvalidRequest(f"provider '{body.id}': {exc}", param="id") from None
    return {"id": body.id, "stored": True}


@router.delete("/api/providers/{pid}")
async def delete_provider(pid: str, gw: Admin) -> dict[str, Any]:
    """Remove a stored custom provider node (catalog providers stay)."""
    assert gw.store is not None
    if not await gw.store.delete_provider_node(pid):
        raise GatewayError(f"No stored provider '{pid}'.", status=404, code="not_found", param="id")
    await gw.refresh()
    return {"deleted": pid}
