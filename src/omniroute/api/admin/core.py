"""Health (OBS-4), metrics (OBS-3), API keys (API-8), connections (PROV-3), routing decisions
(OBS-2) and config reload (OPS-2) in the management API, and its authentication (API-8)."""

from __future__ import annotations

import hmac
import ipaddress
import logging
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from omniroute.accounting.budget import update_key as update_stored_key
from omniroute.api.admin import session
from omniroute.api.hosts import check_management_request
from omniroute.config import ConfigError
from omniroute.core.fields import INT64_MAX
from omniroute.errors import AuthenticationFailed, GatewayError, InvalidRequest
from omniroute.gateway import Gateway
from omniroute.state.memory import memory_state_of

router = APIRouter()
log = logging.getLogger("omniroute.api")


def gateway(request: Request) -> Gateway:
    """The app's gateway (dependency)."""
    gw: Gateway = request.app.state.gateway
    return gw


def is_loopback(request: Request) -> bool:
    """Whether the client connected from a loopback address (127.0.0.0/8, ::1)."""
    host = request.client.host if request.client else None
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def loopback_only() -> GatewayError:
    """The 403 for a non-loopback client when no admin key is configured (API-8)."""
    return GatewayError(
        "No server.admin_key is configured: the management API answers on loopback only.",
        status=403,
        code="admin_loopback_only",
    )


def check_origin(request: Request, gw: Gateway) -> None:
    """The Host/Origin checks against DNS rebinding and cross-site changes (:mod:`omniroute.api.hosts`)
    that the management API and the console apply before anything else; 403 when they fail."""
    server = gw.config.server
    check_management_request(
        request.method,
        request.headers.get("host"),
        request.headers.get("origin"),
        allowed_hosts=server.allowed_hosts,
        admin_key_set=bool(server.admin_key),
    )


async def require_admin(request: Request, gw: Annotated[Gateway, Depends(gateway)]) -> Gateway:
    """API-8: ``Authorization: Bearer <admin_key>``, or a console session signed in with the admin key
    (OPS-3) whose unsafe calls carry its CSRF token (403 without it); without an admin key, loopback
    clients only; and first the Host/Origin checks (:func:`check_origin`)."""
    check_origin(request, gw)
    admin_key = gw.config.server.admin_key
    auth = request.headers.get("authorization", "")
    if not auth.isascii():  # no key is non-ASCII; and compare_digest refuses such strings
        raise AuthenticationFailed("Invalid credentials: keys are ASCII text.")
    if admin_key:
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        if token and hmac.compare_digest(token.encode(), admin_key.encode()):
            return gw
        sess = await session.read_session(request, gw)
        if sess is None or not sess.admin:
            raise AuthenticationFailed("The management API needs 'Authorization: Bearer <server.admin_key>'.")
        if request.method not in session.SAFE_METHODS and not sess.csrf_ok(
            request.headers.get(session.CSRF_HEADER)
        ):
            raise session.csrf_error()
        return gw
    if not is_loopback(request):
        raise loopback_only()
    return gw


Admin = Annotated[Gateway, Depends(require_admin)]


async def api_key_id(gw: Gateway, key: str | None, param: str) -> str | None:
    """The id of the API key named by id or name in ``key`` (``None`` for no key); 400 naming
    ``param`` when no key matches."""
    if not key:
        return None
    assert gw.store is not None
    for rec in await gw.store.list_api_keys():
        if key in (rec["id"], rec["name"]):
            return str(rec["id"])
    raise InvalidRequest(f"{param}: no API key '{key}'.", param=param)


@router.get("/health", tags=["health"])
async def health() -> dict[str, Any]:
    """Liveness (OBS-4): the process is up."""
    return {"status": "ok"}


@router.get("/health/ready", tags=["health"])
async def ready(gw: Annotated[Gateway, Depends(gateway)], response: Response) -> dict[str, Any]:
    """Readiness (OBS-4, OPS-4): 200 while the gateway can serve. Requests are routed from the
    in-memory snapshot, so a database or Redis that stops answering after start-up leaves the gateway
    serving in a degraded mode (local routing state, usage rows retried): ``status: degraded`` with
    the failing part ``false``, still 200, so an orchestrator keeps a working replica in rotation
    (``omniroute_routing_state_degraded`` says the same in ``/metrics``). 503 only when it cannot
    serve: before start-up has finished (also while a database unreachable at start-up is retried,
    ``status: unavailable``), and while draining after SIGTERM (``status: draining``)."""
    if gw.store is None or gw.draining:
        response.status_code = 503
        status = "draining" if gw.draining else "unavailable"
        return {"status": status, "database": gw.store is not None, "state": gw.store is not None}
    db_ok = await gw.store.ping()
    state_ok = await gw.state_ready()
    gw.metrics.set_state_degraded(not state_ok)
    return {
        "status": "ok" if db_ok and state_ok else "degraded",
        "database": db_ok,
        "state": state_ok,
        "simulated": gw.simulated is not None,
        "uptime_s": round(gw.clock.time() - gw.started_at, 1),
    }


async def require_metrics_access(request: Request, gw: Annotated[Gateway, Depends(gateway)]) -> Gateway:
    """Who may read ``/metrics`` (``server.metrics_auth``): ``public`` anyone; ``admin`` the
    management API's rule (:func:`require_admin`); ``token`` ``Authorization: Bearer
    <server.metrics_token>`` or the admin key. 401 otherwise (non-ASCII credentials included)."""
    server = gw.config.server
    if server.metrics_auth == "public":
        return gw
    if server.metrics_auth == "admin":
        return await require_admin(request, gw)
    auth = request.headers.get("authorization", "")
    if not auth.isascii():
        raise AuthenticationFailed("Invalid credentials: keys are ASCII text.")
    token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    for expected in (server.metrics_token, server.admin_key):
        if token and expected and hmac.compare_digest(token.encode(), expected.encode()):
            return gw
    raise AuthenticationFailed("/metrics needs 'Authorization: Bearer <server.metrics_token>'.")


@router.get("/metrics", tags=["health"], response_class=Response)
async def metrics(gw: Annotated[Gateway, Depends(require_metrics_access)]) -> Response:
    """Prometheus exposition (OBS-3): requests, attempts, fallbacks, breaker state per provider,
    cooldowns, lockouts, latency/TTFT/overhead histograms, tokens and cost, requests in flight,
    whether the shared routing state is degraded and the in-process state tables' sizes; summed over
    workers under ``--workers N``. Who may read it is ``server.metrics_auth`` (the admin key, or
    loopback without one, by default)."""
    if gw.store is not None:
        gw.metrics.set_state_degraded(not await gw.state_ready())
    local = memory_state_of(gw.state)
    body = gw.metrics.render(
        await gw.resilience.snapshot(),
        state_entries=local.entry_counts() if local is not None else None,
        state_evictions=local.evictions if local is not None else None,
    )
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


def _epoch(value: Any) -> Any:
    """Epoch seconds from a number or an ISO 8601 date or date-time (UTC when no zone is given)."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError("must be epoch seconds or an ISO 8601 date-time") from None
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, date) and not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()
    return value


MAX_EPOCH_S = 253_402_300_799
"""9999-12-31T23:59:59Z, the last second an ISO 8601 date-time (four-digit year) can name."""
Epoch = Annotated[float, BeforeValidator(_epoch), Field(allow_inf_nan=False, ge=0, le=MAX_EPOCH_S)]
Period = Literal["daily", "weekly", "monthly", "total"]


def _not_blank(value: str) -> str:
    """A key name with visible characters (``"   "`` names nothing a user could pick out)."""
    if not value.strip():
        raise ValueError("must not be blank")
    return value


KeyName = Annotated[str, Field(min_length=1, max_length=100, strict=True), AfterValidator(_not_blank)]
Usd = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]
"""USD; strict: a JSON number (integers accepted), never a string or a boolean."""
PerMinute = Annotated[int, Field(ge=1, le=INT64_MAX, strict=True)]
"""Requests or tokens per minute; strict: a JSON integer, never a string, float or boolean."""


def reject_past_expiry(expires_at: float | None, now: float) -> None:
    """400 naming ``expires_at`` when it (epoch s) is not after ``now`` (epoch s): such a key could
    never be used. ``None`` (never expires) passes."""
    if expires_at is not None and expires_at <= now:
        when = datetime.fromtimestamp(expires_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        raise InvalidRequest(
            f"expires_at: {when} is already in the past; give a future time or null (never expires).",
            param="expires_at",
        )


Models = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


class KeyCreate(BaseModel):
    """``POST /api/keys`` body (API-8): ``budget_usd`` per ``budget_period`` (UTC boundaries),
    ``expires_at`` epoch seconds or ISO 8601, ``rpm``/``tpm`` requests and tokens per minute."""

    model_config = ConfigDict(extra="forbid")

    name: KeyName
    allowed_models: Models = Field(default_factory=lambda: ["*"])
    budget_usd: Usd | None = None
    budget_period: Period = "total"
    expires_at: Epoch | None = None
    rpm: PerMinute | None = None
    tpm: PerMinute | None = None


class KeyUpdate(BaseModel):
    """``PATCH /api/keys/{id}`` body (API-8): only the fields sent change; ``null`` clears
    ``budget_usd`` (no cap), ``expires_at`` (never) and ``rpm``/``tpm`` (the config defaults)."""

    model_config = ConfigDict(extra="forbid")

    allowed_models: Models | None = None
    budget_usd: Usd | None = None
    budget_period: Period | None = None
    expires_at: Epoch | None = None
    rpm: PerMinute | None = None
    tpm: PerMinute | None = None

    def changes(self) -> dict[str, Any]:
        """The fields the client sent; 400 naming ``allowed_models``/``budget_period`` when sent as null."""
        sent = self.model_dump(exclude_unset=True)
        for name in ("allowed_models", "budget_period"):
            if name in sent and sent[name] is None:
                raise InvalidRequest(f"{name}: may not be null", param=name)
        return sent


@router.get("/api/keys", tags=["keys"])
async def list_keys(gw: Admin) -> dict[str, Any]:
    """API keys without secrets (prefix only), with the spend of the current budget period and
    ``resets_at``, when that period ends (ISO 8601 UTC; ``null`` for a ``total`` budget)."""
    assert gw.store is not None
    return {"data": [gw.budgets.current(rec) for rec in await gw.store.list_api_keys()]}


@router.post("/api/keys", tags=["keys"], status_code=201)
async def create_key(body: KeyCreate, gw: Admin) -> dict[str, Any]:
    """Create a key; the plaintext ``key`` is in this response only (stored hashed). 400 naming
    ``expires_at`` when it is already in the past."""
    assert gw.store is not None
    reject_past_expiry(body.expires_at, gw.clock.time())
    rec, plaintext = await gw.store.create_api_key(
        body.name,
        allowed_models=tuple(body.allowed_models),
        budget_usd=body.budget_usd,
        budget_period=body.budget_period,
        expires_at=body.expires_at,
        rpm=body.rpm,
        tpm=body.tpm,
    )
    await gw.refresh()
    return {**rec, "key": plaintext}


@router.patch("/api/keys/{key_id}", tags=["keys"])
async def update_key(key_id: str, body: KeyUpdate, gw: Admin) -> dict[str, Any]:
    """Change a key's budget, budget period, allowed models, rate limits or expiry (by id or name);
    returns the key as ``GET /api/keys`` lists it. Spend so far is kept; a new ``budget_period``
    starts from the spend the usage log records in its current period. A key defined in the config
    file gets the file's values again on the next reload or restart."""
    assert gw.store is not None
    changes = body.changes()
    reject_past_expiry(changes.get("expires_at"), gw.clock.time())
    if "budget_period" in changes and gw.usage is not None:
        await gw.usage.flush()  # the new period's spend is read from the usage log
    rec = await update_stored_key(gw.store, key_id, changes, gw.clock.time())
    if rec is None:
        raise GatewayError(f"No API key '{key_id}'.", status=404, code="not_found")
    if "budget_period" in changes:
        await gw.budgets.restart_period(rec)
    await gw.refresh()
    return gw.budgets.current(rec)


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


@router.get("/api/routing/decisions/{request_id}", tags=["routing"])
async def get_decision(request_id: str, gw: Admin) -> dict[str, Any]:
    """The full routing decision of one request (OBS-2)."""
    d = await gw.get_decision(request_id)
    if d is None:
        raise GatewayError(f"No decision recorded for request '{request_id}'.", status=404, code="not_found")
    return d


@router.post("/api/reload")
async def reload_config(gw: Admin) -> dict[str, Any]:
    """Re-read the config file and apply it without dropping requests; an invalid or missing file is
    refused (400 with the reason) and the running configuration is kept."""
    try:
        await gw.reload()
    except (ConfigError, FileNotFoundError, ValueError) as exc:
        log.error("configuration not reloaded, keeping the running one: %s", exc)
        raise InvalidRequest(
            f"Configuration not reloaded (the running one is kept): {exc}", param="config"
        ) from None
    return {"reloaded": True, "config": str(gw.config.source_path)}
