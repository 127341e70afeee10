"""Auto-combo endpoints on ``/v1`` (AUTO-2, AUTO-3): a channel's candidate pool with live reachability,
per-API-key exclusions, and quality feedback.

- ``GET /api/combos/auto`` is served by the combos router (it must precede ``/api/combos/{id}``) from
  :func:`omniroute.routing.auto.listing.auto_variants`.
- ``GET /v1/auto-combo/{channel}/candidates`` (client API key): the pool of ``auto`` (channel
  ``auto``), ``auto/<channel>`` or a persisted auto combo, each candidate with its breaker state,
  cooldown deadline, invalid mark, model lockout, ``reachable`` and this key's ``excluded`` flag.
- ``PUT`` / ``DELETE /v1/auto-combo/{channel}/candidates/{candidate_key}`` exclude / re-include one
  candidate for the calling key (``candidate_key`` = ``provider/model@connection`` or a connection id);
  ``PUT /v1/auto-combo/{channel}/candidates`` with ``{"exclude": [...], "include": [...]}`` does several.
- ``POST /v1/auto-combo/feedback`` ``{"request_id", "score"}`` adds a quality observation (0–1) for
  the candidate that served that request (the ``quality`` factor of auto routing).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from omniroute.api.admin.core import gateway
from omniroute.errors import GatewayError
from omniroute.gateway import Gateway
from omniroute.resilience._fmt import iso
from omniroute.resilience.filters import lock_key
from omniroute.routing.auto.factory import (
    combo_pool,
    filter_variant,
    key_exclusions,
    set_exclusion,
    virtual_pool,
)
from omniroute.routing.auto.inputs import record_feedback
from omniroute.routing.auto.variants import parse_auto_id
from omniroute.routing.decision import Decision
from omniroute.state.records import BreakerState, breaker_view
from omniroute.values import Candidate

router = APIRouter(tags=["auto"])


def client_key(request: Request, gw: Annotated[Gateway, Depends(gateway)]) -> str | None:
    """The calling API key's id (``None`` for the keyless client); 401 as on ``/v1`` (API-8)."""
    rec = gw.authenticate(request.headers)
    return str(rec["id"]) if rec else None


ClientKey = Annotated[str | None, Depends(client_key)]
Gw = Annotated[Gateway, Depends(gateway)]


def channel_pool(gw: Gateway, channel: str) -> list[Candidate]:
    """The pool of ``channel``: ``auto``, a suffix of ``auto/`` or a persisted auto combo name; 400
    for anything else (naming the valid ids)."""
    now = gw.clock.time()
    combo = gw.registry.combos.get(channel)
    if combo is not None and combo.strategy == "auto":
        return combo_pool(gw, combo, Decision(request_id="", requested_model=channel), now)
    variant = parse_auto_id("auto" if channel == "auto" else f"auto/{channel}")
    pool, _ = filter_variant(virtual_pool(gw.registry, now), variant)
    return pool


async def reachability(gw: Gateway, pool: list[Candidate], excluded: set[str]) -> list[dict[str, Any]]:
    """Per candidate of ``pool``: identity, limits, breaker/cooldown/invalid/lockout state, ``reachable``
    with the reasons it is not, and whether it is in ``excluded`` (AUTO-2)."""
    now = gw.clock.time()
    state = gw.state
    breakers = await state.get_breakers({c.provider.id for c in pool})
    cooldowns = await state.get_cooldowns({c.connection.id for c in pool})
    locks = await state.get_lockouts([lock_key(c) for c in pool])
    out: list[dict[str, Any]] = []
    for c in pool:
        b = breakers[c.provider.id]
        seen = breaker_view(b, now)
        cd = cooldowns.get(c.connection.id)
        lk = locks.get(lock_key(c))
        reasons: list[str] = []
        if seen is BreakerState.OPEN:
            reasons.append(f"circuit open until {iso(b.next_probe_at)}")
        cooldown = None
        if cd is not None and cd.holds(c.model.id, now):
            cooldown = {"until": cd.until, "until_iso": iso(cd.until), "reason": cd.reason}
            reasons.append(f"{cd.reason or 'cooling down'} until {iso(cd.until)}")
        if cd is not None and cd.invalid:
            reasons.append(f"credentials invalid: {cd.invalid_reason}")
        lockout = None
        if lk is not None and lk.until > now:
            lockout = {"until": lk.until, "until_iso": iso(lk.until), "reason": lk.reason}
            reasons.append(f"model locked: {lk.reason} until {iso(lk.until)}")
        out.append(
            {
                "key": c.key,
                "provider": c.provider.id,
                "model": c.model.id,
                "connection": c.connection.id,
                "context_length": c.model.context_window,
                "max_output_tokens": c.model.max_output_tokens,
                "breaker": {
                    "state": seen.value,
                    "next_probe_at": b.next_probe_at,
                    "next_probe_at_iso": iso(b.next_probe_at),
                },
                "cooldown": cooldown,
                "invalid": bool(cd is not None and cd.invalid),
                "lockout": lockout,
                "reachable": not reasons,
                "unreachable_reasons": reasons,
                "excluded": c.key in excluded,
            }
        )
    return out


async def _listing(gw: Gateway, channel: str, key_id: str | None) -> dict[str, Any]:
    pool = channel_pool(gw, channel)
    excluded = await key_exclusions(gw, key_id, channel)
    return {"channel": channel, "api_key_id": key_id, "data": await reachability(gw, pool, excluded)}


@router.get("/v1/auto-combo/{channel}/candidates")
async def list_candidates(channel: str, gw: Gw, key_id: ClientKey) -> dict[str, Any]:
    """A channel's pool with live reachability and this key's ``excluded`` flag (AUTO-2)."""
    return await _listing(gw, channel, key_id)


def resolve_keys(gw: Gateway, channel: str, wanted: list[str]) -> list[str]:
    """Candidate keys of ``channel`` for ``wanted`` keys or connection ids (404 naming the pool)."""
    pool = channel_pool(gw, channel)
    by_key = {c.key: c.key for c in pool} | {c.connection.id: c.key for c in pool}
    out: list[str] = []
    for w in wanted:
        if w not in by_key:
            raise GatewayError(
                f"No candidate '{w}' in auto channel '{channel}'. Candidates: "
                + ", ".join(c.key for c in pool),
                status=404,
                code="not_found",
                param="candidate_key",
            )
        out.append(by_key[w])
    return out


@router.put("/v1/auto-combo/{channel}/candidates/{candidate_key:path}")
async def exclude_candidate(channel: str, candidate_key: str, gw: Gw, key_id: ClientKey) -> dict[str, Any]:
    """Exclude one candidate from this key's routing on ``channel`` (AUTO-2)."""
    await set_exclusion(gw, key_id, channel, resolve_keys(gw, channel, [candidate_key]), True)
    return await _listing(gw, channel, key_id)


@router.delete("/v1/auto-combo/{channel}/candidates/{candidate_key:path}")
async def include_candidate(channel: str, candidate_key: str, gw: Gw, key_id: ClientKey) -> dict[str, Any]:
    """Re-include one candidate for this key on ``channel`` (AUTO-2)."""
    await set_exclusion(gw, key_id, channel, resolve_keys(gw, channel, [candidate_key]), False)
    return await _listing(gw, channel, key_id)


class ExclusionEdit(BaseModel):
    """``PUT /v1/auto-combo/{channel}/candidates`` body: candidate keys to exclude and to re-include."""

    exclude: list[str] = Field(default_factory=list)
    include: list[str] = Field(default_factory=list)


@router.put("/v1/auto-combo/{channel}/candidates")
async def edit_exclusions(channel: str, body: ExclusionEdit, gw: Gw, key_id: ClientKey) -> dict[str, Any]:
    """Exclude and re-include several candidates at once for this key (AUTO-2)."""
    await set_exclusion(gw, key_id, channel, resolve_keys(gw, channel, body.exclude), True)
    await set_exclusion(gw, key_id, channel, resolve_keys(gw, channel, body.include), False)
    return await _listing(gw, channel, key_id)


class Feedback(BaseModel):
    """``POST /v1/auto-combo/feedback`` body: the request and a quality score in [0, 1]."""

    request_id: str = Field(min_length=1)
    score: float = Field(ge=0, le=1)


@router.post("/v1/auto-combo/feedback")
async def feedback(body: Feedback, gw: Gw, key_id: ClientKey) -> dict[str, Any]:
    """Record quality feedback for the candidate that served ``request_id`` (the ``quality``
    factor of auto routing). Only the key that sent the request may rate it: another key's request
    id is a 404, as if unknown."""
    d = await gw.get_decision(body.request_id)
    if d is not None and d.get("api_key_id") != key_id:
        d = None
    served = d.get("served") if d else None
    if not served:
        raise GatewayError(
            f"No served request '{body.request_id}' to give feedback on.", status=404, code="not_found"
        )
    await record_feedback(gw.state, str(served), body.score)
    return {"request_id": body.request_id, "candidate": served, "score": body.score}
