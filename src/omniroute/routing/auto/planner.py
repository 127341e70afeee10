"""``plan_auto``: an auto plan → the ordered candidates the attempt loop tries (AUTO-1 … AUTO-8).

Steps for one request: parse the id (400 for an invalid one) or read the persisted combo's options →
build the pool (virtual factory or combo targets) → variant filter → this API key's exclusions →
context/capability pre-call check (RESIL-8, fail-open) → per-request controls → budget cap →
self-healing exclusions and probe claim → measure and score (pool-relative) → exclude scores below
0.2 → router pick (LKGP for zero-config channels, the combo's ``routerStrategy`` otherwise) → bandit
exploration → order = [probe] + [pick] + the rest by score. The pick falls through to the next-best
candidate on failure because the engine's attempt loop walks the order (the ladder re-checks every
candidate). The decision gets every candidate's factors, the router, reasons and flags (OBS-2); the
success hook writes the LKGP record and settles a probe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from omniroute.errors import ExclusionRecord
from omniroute.resilience._fmt import until_text
from omniroute.resilience.filters import LadderContext, PreCallFilter
from omniroute.resilience.precall import estimate_prompt_tokens
from omniroute.routing.auto import controls as ctl
from omniroute.routing.auto import healing, packs
from omniroute.routing.auto import scoring as sc
from omniroute.routing.auto.explain import fill_decision
from omniroute.routing.auto.factory import (
    auto_config,
    combo_pool,
    filter_variant,
    key_exclusions,
    virtual_pool,
    virtual_pool_exclusions,
)
from omniroute.routing.auto.fitness import detect_task
from omniroute.routing.auto.inputs import MeasureHints, measure, specificity_of
from omniroute.routing.auto.lkgp import conversation_hash, lkgp_state_key, read_lkgp, session_key, write_lkgp
from omniroute.routing.auto.options import positive, resolve_variant, sla_policy, weights_for
from omniroute.routing.auto.routers import RouterContext, RouterDecision
from omniroute.routing.auto.variants import AutoVariant
from omniroute.routing.decision import Decision
from omniroute.routing.resolve import Plan
from omniroute.routing.services import RoutingServices, RunOptions
from omniroute.values import Candidate, ChatRequest

__all__ = ["plan_auto"]


def _excl(c: Candidate, reason: str) -> ExclusionRecord:
    return ExclusionRecord(c.provider.id, c.model.id, reason, c.connection.id)


def _fail_open(pool: list[Candidate], drop: dict[str, str], decision: Decision) -> list[Candidate]:
    """Drop candidates named in ``drop`` (key → reason) unless that empties the pool."""
    if not drop:
        return pool
    kept = [c for c in pool if c.key not in drop]
    if not kept:
        return pool
    decision.exclusions.extend(_excl(c, drop[c.key]) for c in pool if c.key in drop)
    return kept


@dataclass
class _Channel:
    """What the plan resolved to: the variant (or a persisted combo as a pseudo-variant), its
    options, the router name and the raw pool."""

    variant: AutoVariant
    options: Mapping[str, Any]
    router: str
    pool: list[Candidate]


def _channel(gw: RoutingServices, plan: Plan, decision: Decision, now: float) -> _Channel:
    if plan.combo is not None:
        options = auto_config(plan.combo)
        name = plan.combo.name
        router = (
            options.get("routerStrategy") or options.get("routingStrategy") or options.get("strategyName")
        )
        return _Channel(
            AutoVariant(id=name, channel=name),
            options,
            str(router or "rules"),
            combo_pool(gw, plan.combo, decision, now),
        )
    pool = virtual_pool(gw.registry, now)
    if not pool:  # say which connections were left out and why (the request fails with it)
        decision.exclusions.extend(virtual_pool_exclusions(gw.registry, now))
    return _Channel(resolve_variant(gw, plan.requested), {}, "lkgp", pool)


def _budget(
    pool: list[Candidate],
    est: Mapping[str, float | None],
    cap: float | None,
    fallback: str,
    decision: Decision,
    info: dict[str, Any],
) -> tuple[list[Candidate], bool]:
    """Drop candidates over the cap (AUTO-7). Returns the pool and whether the "cheapest anyway"
    fallback applies; raises 402 for ``strict`` when nothing fits."""
    if cap is None or not pool:
        return pool, False
    over = {k: v for k, v in est.items() if v is None or v > cap}
    cheapest = False
    if len(over) < len(pool):
        reasons = {k: f"estimated cost {_usd(v)} over budget cap ${cap:.6f}" for k, v in over.items()}
        pool = _fail_open(pool, reasons, decision)
    elif fallback == ctl.BUDGET_STRICT:
        raise ctl.budget_error(cap, min((v for v in est.values() if v is not None), default=None))
    else:
        cheapest = True
    info["budget"] = {"cap_usd": cap, "fallback": fallback, "cheapest_used": cheapest}
    return pool, cheapest


async def _heal(
    gw: RoutingServices, pool: list[Candidate], now: float, may_probe: bool, decision: Decision
) -> tuple[list[Candidate], Candidate | None]:
    """Drop candidates in a self-healing cooldown; claim at most one re-admission probe (AUTO-8)."""
    probe: Candidate | None = None
    entries = await healing.heal_entries(gw.state, (c.key for c in pool))  # lazy: usually unread
    if not entries:
        return pool, None
    drop: dict[str, str] = {}
    for c in pool:
        e = entries.get(c.key)
        if e is None:
            continue
        if e.until > now:
            drop[c.key] = _below(e.score, e.until, now)
        elif probe is None and may_probe and await healing.claim_probe(gw.state, c.key, e):
            timeout = min(c.timeout_s or healing.PROBE_TIMEOUT_S, healing.PROBE_TIMEOUT_S)
            probe = dataclasses.replace(c, timeout_s=timeout)
        else:
            drop[c.key] = "self-healing: re-admission probe in flight"
    return _fail_open(pool, drop, decision), probe


def _below(score: float, until: float, now: float) -> str:
    return (
        f"self-healing: score {score:.3f} below threshold {healing.EXCLUSION_THRESHOLD}; "
        f"excluded until {until_text(until, now)}"
    )


async def _threshold(
    gw: RoutingServices,
    inputs: list[sc.CandidateInputs],
    probe: Candidate | None,
    now: float,
    decision: Decision,
) -> dict[str, str]:
    """Exclude candidates scoring below 0.2 (not OPEN ones, not the probe), unless all would go."""
    low = [
        ci
        for ci in inputs
        if ci.score < healing.EXCLUSION_THRESHOLD
        and ci.breaker != "OPEN"
        and (probe is None or ci.key != probe.key)
    ]
    dropped: dict[str, str] = {}
    if not low or len(low) == len(inputs):
        return dropped
    for ci in low:
        e = await healing.exclude(gw.state, ci.key, ci.score, now)
        dropped[ci.key] = _below(ci.score, e.until, now)
        decision.exclusions.append(_excl(ci.cand, dropped[ci.key]))
    return dropped


async def plan_auto(
    gw: RoutingServices, plan: Plan, req: ChatRequest, decision: Decision
) -> tuple[list[Candidate], RunOptions]:
    """Ordered candidates for an auto plan and the run options (success hook) (AUTO-1 … AUTO-8).

    Raises :class:`~omniroute.errors.InvalidRequest` (400) for an unknown auto id and
    :class:`~omniroute.errors.BudgetExceeded` (402) for a strict budget no candidate fits."""
    now = gw.clock.time()
    ch = _channel(gw, plan, decision, now)
    variant, options, body = ch.variant, ch.options, req.body
    decision.combo = variant.id
    info: dict[str, Any] = {"variant": variant.id, "channel": variant.channel, "router": ch.router}
    pool, note = filter_variant(ch.pool, variant)
    if note:
        info["filter"] = note
    excluded = await key_exclusions(gw, req.api_key_id, variant.channel)
    pool = _fail_open(pool, dict.fromkeys(excluded, "excluded for this API key"), decision)
    # RESIL-8 before scoring, so the router picks among candidates that fit (fail-open inside).
    fit = await PreCallFilter()(pool, LadderContext.for_request(body, now))
    pool = fit.survivors
    decision.exclusions.extend(fit.exclusions)

    controls = ctl.parse_controls(req.headers)
    cap = controls.budget_usd if controls.budget_usd is not None else positive(options.get("budgetCap"))
    est: dict[str, float | None] = {}
    if cap is not None:
        prompt_tokens, out_tokens = estimate_prompt_tokens(body), ctl.output_tokens(body)
        est = {c.key: ctl.estimated_cost_usd(c.model, prompt_tokens, out_tokens) for c in pool}
    fallback = (
        controls.budget_fallback
        or ctl.parse_budget_fallback(options.get("budgetFallback"))
        or ctl.BUDGET_CHEAPEST
    )
    pool, cheapest_mode = _budget(pool, est, cap, fallback, decision, info)

    conversation = conversation_hash(req.api_key_id, body)
    session = session_key(req, conversation)
    lkgp_key = lkgp_state_key(variant.id, session, gw.config.auto.lkgp_scope)
    record = await read_lkgp(gw.state, lkgp_key)
    sticky = record is not None and ch.router == "lkgp" and options.get("lkgpEnabled") is not False
    pool, probe = await _heal(gw, pool, now, not sticky, decision)

    hints = MeasureHints(
        task=detect_task(body),
        session_connection=record.key.rsplit("@", 1)[-1] if record is not None and record.key else None,
        tier_hint=variant.tier_hint,
        specificity=specificity_of(body) if options.get("complexityAwareRouting") else None,
        cache_key=str(body.get("prompt_cache_key") or "") or conversation,
    )
    inputs = await measure(gw, pool, hints, now)
    incident = healing.in_incident(inputs)
    if incident:
        weights, source = dict(packs.MODE_PACKS[packs.RELIABILITY_FIRST]), "reliability-first (incident mode)"
    else:
        weights, source = weights_for(controls.mode, options, variant.pack)
    wvec = _vector(weights, source)
    sc.score_pool(inputs, wvec)
    info.update(task_type=hints.task, weights=source, incident_mode=incident, session=session)
    dropped = await _threshold(gw, inputs, probe, now, decision)
    ranked = [ci for ci in inputs if ci.key not in dropped] if dropped else inputs

    rd: RouterDecision | None = None
    explored = False
    order: list[int] = []
    if ranked and cheapest_mode:
        order = sorted(range(len(ranked)), key=lambda i: _cost_key(est[ranked[i].key]))
        first = ranked[order[0]]
        rd = RouterDecision(
            order[0],
            "budget-cheapest",
            f"budget: no candidate within ${cap or 0:.6f}; serving the cheapest "
            f"({_usd(est[first.key])} estimated)",
            len(ranked),
            first.score,
            order,
        )
    elif ranked:
        rctx = RouterContext(
            weights=wvec,
            task_type=hints.task,
            lkgp_enabled=options.get("lkgpEnabled"),
            last_known_good=record.provider if record is not None else None,
            last_known_good_key=record.key if record is not None else None,
            sla=sla_policy(options),
        )
        rd = gw.routers.select(ranked, rctx, ch.router)
        pick = rd.index
        if rd.strategy in ("rules", "score"):
            rate = variant.exploration
            if rate is None:
                rate = float(options.get("explorationRate", gw.config.auto.exploration_rate))
            rng = healing.request_rng(controls.seed, req.request_id)
            alt = healing.explore(rng, rate, ranked, pick, incident)
            if alt is not None:
                explored = True
                rd.reason = (
                    f"exploration: random healthy candidate instead of {ranked[pick].cand.key}; {rd.reason}"
                )
                rd.final_score = ranked[alt].score
                pick = alt
        by_score = sc.rank(ranked)
        if rd.order is None:  # score order with the pick first
            order = by_score
            order.remove(pick)
            order.insert(0, pick)
        else:  # the router's own order, which may leave candidates out: score order after
            order = [pick] + [i for i in rd.order if i != pick]
            placed = set(order)
            order += [i for i in by_score if i not in placed]
    ordered = [ranked[i].cand for i in order]
    if probe is not None:
        ordered = [probe] + [c for c in ordered if c.key != probe.key]
        info["probe"] = probe.key

    prepare = _effort(req, controls, ordered, info)
    fill_decision(decision, ranked, order, inputs, dropped, rd, wvec, info, explored, probe)
    return ordered, RunOptions(on_success=_on_success(gw, lkgp_key, probe, decision), prepare=prepare)


_PACK_VECTORS: dict[str, tuple[float, ...]] = {}
"""Weight vectors of the named (immutable) packs and defaults, by weights source name."""


def _vector(weights: Mapping[str, float], source: str) -> tuple[float, ...]:
    """``sc.weight_vector(weights)``, built once per named source (``custom`` weights every time)."""
    if source == "custom":
        return sc.weight_vector(weights)
    vec = _PACK_VECTORS.get(source)
    if vec is None:
        vec = _PACK_VECTORS[source] = sc.weight_vector(weights)
    return vec


def _cost_key(v: float | None) -> tuple[bool, float]:
    return (v is None, v or 0.0)


def _usd(v: float | None) -> str:
    return "unknown" if v is None else f"${v:.6f}"


def _effort(
    req: ChatRequest, controls: ctl.RequestControls, ordered: list[Candidate], info: dict[str, Any]
) -> Callable[[Candidate, ChatRequest], ChatRequest] | None:
    """``X-OmniRoute-Effort: auto`` → a per-candidate hook that adds ``reasoning_effort`` only for
    OpenAI-format upstreams (AUTO-7), so a fallback to Anthropic or Gemini gets the request unchanged."""
    if controls.effort != "auto" or not ordered:
        return None
    level = ctl.resolve_effort(req.body)
    if level is None:
        return None
    info["effort"] = level

    def prepare(cand: Candidate, r: ChatRequest) -> ChatRequest:
        if cand.provider.format != "openai":
            return r
        return dataclasses.replace(r, body={**r.body, "reasoning_effort": level}, native=None)

    return prepare


def _on_success(gw: RoutingServices, lkgp_key: str, probe: Candidate | None, decision: Decision) -> Any:
    async def hook(cand: Candidate) -> None:
        now = gw.clock.time()
        await write_lkgp(gw.state, lkgp_key, cand, now)
        if probe is None:
            return
        if cand.key == probe.key:
            await healing.readmit(gw.state, probe.key)
        elif any(
            a.provider == probe.provider.id
            and a.model == probe.model.id
            and a.connection == probe.connection.id
            for a in decision.attempts
        ):
            await healing.exclude(gw.state, probe.key, 0.0, now)

    return hook
