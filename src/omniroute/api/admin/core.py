"""Health (OBS-4), metrics (OBS-3), API keys (API-8), connections (PROV-3), usage (OBS-1) and routing
decisions (OBS-2) in the management API."""

from __future__ import annotations

import hmac
import ipaddress
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from omniroute.api.hosts import check_management_request
from omniroute.errors import AuthenticationFailed, GatewayError
from omniroute.gateway import Gateway

router = APIRouter()


def gateway(request: Request) -> Gateway:
    """The app's gateway (dependency)."""
    gw: Gateway = request.app.state.gateway
    return gw


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def require_admin(request: Request, gw: Annotated[Gateway, Depends(gateway)]) -> Gateway:
    """API-8: ``Authorization: Bearer <admin_key>``; without an admin key, loopback clients only;
    and the Host/Origin checks against DNS rebinding (:mod:`omniroute.api.hosts`)."""
    server = gw.config.server
    admin_key = server.admin_key
    check_management_request(
        request.method,
        request.headers.get("host"),
        request.headers.get("origin"),
        allowed_hosts=server.allowed_hosts,
        admin_key_set=bool(admin_key),
    )
    auth = request.headers.get("authorization", "")
    if not auth.isascii():  # no key is non-ASCII; and compare_digest refuses such strings
        raise AuthenticationFailed("Invalid credentials: keys are ASCII text.")
    if admin_key:
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        if not token or not hmac.compare_digest(token.encode(), admin_key.encode()):
            raise AuthenticationFailed("The management API needs 'Authorization: Bearer <server.admin_key>'.")
        return gw
    client = request.client.host if request.client else None
    if not _is_loopback(client):
        raise GatewayError(
            "No server.admin_key is configured: the management API answers on loopback only.",
            status=403,
            code="admin_loopback_only",
        )
    return gw


Admin = Annotated[Gateway, Depends(require_admin)]


@router.get("/health", tags=["health"])
async def health() -> dict[str, Any]:
    """Liveness (OBS-4): the process is up."""
    return {"status": "ok"}


@router.get("/health/ready", tags=["health"])
async def ready(gw: Annotated[Gateway, Depends(gateway)], response: Response) -> dict[str, Any]:
    """Readiness (OBS-4): the database and the routing-state store answer."""
    db_ok = gw.store is not None and await gw.store.ping()
    state_ok = await gw.state_ready()
    ok = db_ok and state_ok
    if not ok:
        response.status_code = 503
    return {
        "status": "ok" if ok else "unavailable",
        "database": db_ok,
        "state": state_ok,
        "simulated": gw.simulated is not None,
        "uptime_s": round(time.time() - gw.started_at, 1),
    }


@router.get("/metrics", tags=["health"], response_class=Response)
async def metrics(gw: Annotated[Gateway, Depends(gateway)]) -> Response:
    """Prometheus exposition (OBS-3): requests, attempts, fallbacks, breaker state per provider,
    cooldowns, lockouts, latency/TTFT/overhead histograms, tokens and cost."""
    body = gw.metrics.render(await gw.resilience.snapshot())
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


class KeyCreate(BaseModel):
    """``POST /api/keys`` body (API-8)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    allowed_models: list[str] = Field(default_factory=lambda: ["*"])
    budget_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)


@router.get("/api/keys", tags=["keys"])
async def list_keys(gw: Admin) -> dict[str, Any]:
    """API keys without secrets (prefix only)."""
    assert gw.store is not None
    return {"data": await gw.store.list_api_keys()}


@router.post("/api/keys", tags=["keys"], status_code=201)
async def create_key(body: KeyCreate, gw: Admin) -> dict[str, Any]:
    """Create a key; the plaintext ``key`` is in this response only (stored hashed)."""
    assert gw.store is not None
    rec, plaintext = await gw.store.create_api_key(
        body.name, allowed_models=tuple(body.allowed_models), budget_usd=body.budget_usd
    )
    await gw.refresh()
    return {**rec, "key": plaintext}


@router.delete("/api/keys/{key_id}", tags=["keys"])
async def revoke_key(key_id: str, gw: Admin) -> dict[str, Any]:
    """Revoke a key by id or name."""
    assert gw.store is not None
    if not await gw.store.revoke_api_key(key_id):
        raise GatewayError(f"No API key '{key_id}'.", status=404, code="not_found")
    await gw.refresh()
    return {"revoked": key_id}


@router.get("/api/connections", tags=["connections"])
async def list_connections(gw: Admin) -> dict[str, Any]:
    """Connections with secrets masked (PROV-3), plus live routing state."""
    assert gw.store is not None
    rows = await gw.store.list_connections_public()
    if gw.simulated is not None:
        rows += [
            {
                "id": c.id,
                "provider": c.provider,
                "name": c.name,
                "api_key": "sim",
                "simulated": True,
                "priority": c.priority,
                "is_active": True,
            }
            for c in gw.simulated.connections()
        ]
    return {"data": rows}


@router.get("/api/usage", tags=["usage"])
async def recent_usage(gw: Admin, limit: int = 100) -> dict[str, Any]:
    """The most recent usage-log rows (OBS-1)."""
    assert gw.store is not None and gw.usage is not None
    await gw.usage.flush()
    return {"data": await gw.store.recent_usage(limit=max(1, min(limit, 1000)))}


@router.get("/api/routing/decisions/{request_id}", tags=["routing"])
async def get_decision(request_id: str, gw: Admin) -> dict[str, Any]:
    """The full routing decision of one request (OBS-2)."""
    d = await gw.get_decision(request_id)
    if d is None:
        raise GatewayError(f"No decision recorded for request '{request_id}'.", status=404, code="not_found")
    return d
