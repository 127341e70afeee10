"""Auto routing as the operator sees it (AUTO-2, AUTO-3, AUTO-8, OPS-3): per channel, every candidate's
16 factor values, weights and score, its live reachability, self-healing exclusions and one API key's
exclusions, plus setting that key's exclusions.

``GET /api/auto/scores?channel=coding&api_key=dev`` scores the pool the way a request without a
prompt would be scored (task ``default``, no session, no request headers) and changes no state: no
self-healing exclusion is written and no probe is claimed. ``PUT /api/auto/exclusions`` excludes or
re-includes candidates for a key (or for requests without a key), like the client-side
``/v1/auto-combo/{channel}/candidates`` endpoints do for the calling key.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from omniroute.api.admin.auto import channel_pool, reachability, resolve_keys
from omniroute.api.admin.core import Admin, api_key_id
from omniroute.gateway import Gateway
from omniroute.resilience._fmt import iso
from omniroute.routing.auto import healing, packs
from omniroute.routing.auto import scoring as sc
from omniroute.routing.auto.factory import auto_config, key_exclusions, set_exclusion
from omniroute.routing.auto.inputs import MeasureHints, measure
from omniroute.routing.auto.options import resolve_variant, weights_for

router = APIRouter(tags=["auto"])


class Factor(BaseModel):
    """One factor of a candidate: its value in [0, 1], its weight and ``weight·value``."""

    name: str
    value: float
    weight: float
    contribution: float


class ScoredCandidate(BaseModel):
    """A pool member with its score (Σ weight·factor), factors and why it would not be used."""

    key: str
    provider: str
    model: str
    connection: str
    score: float
    factors: list[Factor]
    cost_per_1m: float | None = Field(description="blended USD per 1M tokens (.6 input + .4 output)")
    p95_ms: float
    error_rate: float
    measured: bool = Field(description="latency measured (else catalog and bootstrap defaults)")
    breaker: str
    reachable: bool
    unreachable_reasons: list[str]
    excluded_for_key: bool
    self_healing: str | None = Field(description="self-healing exclusion in force, if any")
    below_threshold: bool = Field(description="score under the self-healing threshold (0.2)")


class ChannelScores(BaseModel):
    """``GET /api/auto/scores``: the channel, its router and weights, and the candidates best first."""

    channel: str
    router: str
    weights_source: str
    weights: dict[str, float]
    incident_mode: bool
    api_key_id: str | None
    excluded: list[str]
    candidates: list[ScoredCandidate]


class ExclusionsIn(BaseModel):
    """``PUT /api/auto/exclusions``: candidate keys (or connection ids) to exclude and to re-include
    for ``api_key`` (id or name; ``None`` = requests without a key) on ``channel``."""

    channel: str = Field(min_length=1)
    api_key: str | None = None
    exclude: list[str] = Field(default_factory=list)
    include: list[str] = Field(default_factory=list)


def _router_and_weights(gw: Gateway, channel: str) -> tuple[str, dict[str, float], str]:
    """The channel's router name and weights (persisted auto combo, else the auto variant)."""
    combo = gw.registry.combos.get(channel)
    if combo is not None and combo.strategy == "auto":
        options = auto_config(combo)
        weights, source = weights_for(None, options, None)
        return str(options.get("routerStrategy") or "rules"), weights, source
    variant = resolve_variant(gw, "auto" if channel == "auto" else f"auto/{channel}")
    weights, source = weights_for(None, {}, variant.pack)
    return "lkgp", weights, source


def _healing_text(entry: healing.HealEntry | None, now: float) -> str | None:
    if entry is None or entry.until <= now:
        return None
    return f"score {entry.score:.3f} below {healing.EXCLUSION_THRESHOLD}; excluded until {iso(entry.until)}"


async def channel_scores(gw: Gateway, channel: str, key_id: str | None) -> ChannelScores:
    """Score ``channel``'s pool now, without changing any routing state (AUTO-3)."""
    pool = channel_pool(gw, channel)
    now = gw.clock.time()
    excluded = await key_exclusions(gw, key_id, channel)
    reach = {r["key"]: r for r in await reachability(gw, pool, excluded)}
    router_name, weights, source = _router_and_weights(gw, channel)
    inputs = await measure(gw, pool, MeasureHints(), now)
    incident = healing.in_incident(inputs)
    if incident:
        weights, source = dict(packs.MODE_PACKS[packs.RELIABILITY_FIRST]), "reliability-first (incident mode)"
    wvec = sc.weight_vector(weights)
    sc.score_pool(inputs, wvec)
    heal = await healing.heal_entries(gw.state, (c.key for c in pool))
    rows: list[ScoredCandidate] = []
    for ci in sorted(inputs, key=lambda c: -c.score):
        r: dict[str, Any] = reach[ci.key]
        entry = heal.get(ci.key)
        rows.append(
            ScoredCandidate(
                key=ci.key,
                provider=r["provider"],
                model=r["model"],
                connection=r["connection"],
                score=ci.score,
                factors=[
                    Factor(name=n, value=v, weight=w, contribution=v * w)
                    for n, v, w in zip(sc.FACTORS, ci.factors, wvec, strict=True)
                ],
                cost_per_1m=ci.cost,
                p95_ms=ci.p95_ms,
                error_rate=ci.error_rate,
                measured=ci.measured,
                breaker=ci.breaker,
                reachable=r["reachable"],
                unreachable_reasons=r["unreachable_reasons"],
                excluded_for_key=r["excluded"],
                self_healing=_healing_text(entry, now),
                below_threshold=ci.score < healing.EXCLUSION_THRESHOLD,
            )
        )
    return ChannelScores(
        channel=channel,
        router=router_name,
        weights_source=source,
        weights=dict(zip(sc.FACTORS, wvec, strict=True)),
        incident_mode=incident,
        api_key_id=key_id,
        excluded=sorted(excluded),
        candidates=rows,
    )


@router.get("/api/auto/scores", response_model=ChannelScores)
async def auto_scores(
    gw: Admin,
    channel: Annotated[
        str, Query(description="'auto', an auto/ suffix such as 'coding', or an auto combo")
    ] = "auto",
    api_key: Annotated[str | None, Query(description="API key id or name whose exclusions to show")] = None,
) -> ChannelScores:
    """A channel's candidates with factor scores, weights, reachability and exclusions."""
    return await channel_scores(gw, channel, await api_key_id(gw, api_key, "api_key"))


@router.put("/api/auto/exclusions", response_model=ChannelScores)
async def auto_exclusions(body: ExclusionsIn, gw: Admin) -> ChannelScores:
    """Exclude and re-include candidates for one API key on one channel (AUTO-2)."""
    key_id = await api_key_id(gw, body.api_key, "api_key")
    await set_exclusion(gw, key_id, body.channel, resolve_keys(gw, body.channel, body.exclude), True)
    await set_exclusion(gw, key_id, body.channel, resolve_keys(gw, body.channel, body.include), False)
    return await channel_scores(gw, body.channel, key_id)
