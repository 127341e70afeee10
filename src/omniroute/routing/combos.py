"""Combo plans: a persisted combo → ordered candidates for the attempt loop (COMBO-1, COMBO-3,
COMBO-4, SPEC §4).

Steps, in order, for one request:

1. expand the combo's targets (:mod:`omniroute.routing.combo_expand`: refs inline, depth ≤ 3,
   cycles skipped; memoised per registry snapshot);
2. tag routing (COMBO-4): request tags (``X-OmniRoute-Tags``) keep only targets with a connection
   (or target) tag that matches; none match → all kept; removed ones are recorded;
3. per-connection expansion when the strategy ranks accounts or ``connectionAwareExpansion`` is on;
4. the strategy orders the targets (:mod:`omniroute.routing.strategies`);
5. prompt-cache affinity (``promptCacheAffinityEnabled``, default on) reorders accounts;
6. targets become candidates (one per connection, duplicates dropped); the ladder filters them in
   the engine (RESIL-1…3, 8) and the exclusions land in the decision (RESIL-7 diagnostics).

``maxRetries`` becomes the per-target transient retry budget (RESIL-6), ``maxAttempts`` the attempt
cap; per-target ``timeout_s``/``timeout_ms`` (default ``targetTimeoutMs``) bound each attempt.

The combo is the typed :class:`~omniroute.core.combo.Combo` of the registry snapshot; its strategy name
was checked against the strategy registry when it was written. A stored combo whose strategy is no
longer registered (its plugin is gone) is served by ``priority``, with a logged warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from omniroute.core.combo import Combo, ComboSettings
from omniroute.resilience.filters import BreakerFilter, CooldownFilter, LadderContext, LockoutFilter
from omniroute.routing.combo_expand import (
    apply_tags,
    combo_targets,
    expand_targets,
    per_connection,
)
from omniroute.routing.decision import Decision
from omniroute.routing.quota import StateQuotaProvider, parse_limits
from omniroute.routing.registry import Registry
from omniroute.routing.resolve import MEMO_MAX_MODELS, Plan
from omniroute.routing.services import RoutingServices, RunOptions
from omniroute.routing.strategies import (
    Availability,
    ComboTarget,
    StrategyContext,
    StrategyState,
)
from omniroute.routing.strategies.affinity import apply_cache_affinity
from omniroute.values import Candidate, ChatRequest

__all__ = [
    "combo_limits",
    "combo_targets",
    "expand_targets",
    "global_combo_defaults",
    "log_shadowing",
    "plan_combo",
    "shadowed_model",
    "shadowing_combos",
]

log = logging.getLogger("omniroute")


def global_combo_defaults(gw: RoutingServices) -> Mapping[str, Any]:
    """Gateway-wide combo option defaults (the middle level of the COMBO-4 cascade): the config's
    ``combo_defaults`` map when the config has one, else empty."""
    return gw.config.combo_defaults


def _availability(filters: tuple[BreakerFilter, CooldownFilter, LockoutFilter], now: float) -> Availability:
    """Tiers 1–3 of the ladder, read-only (no probe claims): which targets the engine would filter
    entirely right now, with the first reason (weighted, round-robin, context-relay read it)."""

    async def unavailable(targets: Sequence[ComboTarget]) -> dict[int, str]:
        survivors = [c for t in targets for c in t.candidates()]
        reasons: dict[str, str] = {}
        ctx = LadderContext(now=now)
        for flt in filters:
            if not survivors:
                break
            result = await flt(survivors, ctx)
            survivors = result.survivors
            for e in result.exclusions:
                reasons.setdefault(f"{e.provider}/{e.model}@{e.connection}", e.reason)
        alive = {c.key for c in survivors}
        out: dict[int, str] = {}
        for t in targets:
            keys = [c.key for c in t.candidates()]
            if keys and not any(k in alive for k in keys):
                out[t.index] = reasons.get(keys[0], "unavailable")
        return out

    return unavailable


def _flatten(
    ordered: Sequence[ComboTarget], decision: Decision
) -> tuple[list[Candidate], dict[str, ComboTarget]]:
    out: list[Candidate] = []
    rows: list[dict[str, Any]] = []
    owner: dict[str, ComboTarget] = {}
    for t in ordered:
        for c, key, row in zip(t.candidates(), t.candidate_keys, t.candidate_rows, strict=True):
            if key in owner:
                continue
            owner[key] = t
            out.append(c)
            rows.append(row)
    decision.candidates.extend(rows)
    return out, owner


class _ComboStatic:
    """What :func:`plan_combo` derives from a combo definition alone (name, strategy, option
    cascade, budgets, the per-connection expansion of untagged targets), memoised on the registry
    snapshot next to the target expansion: a management edit builds a new snapshot."""

    __slots__ = (
        "affinity",
        "combo",
        "defaults",
        "expand",
        "filters",
        "gw_state",
        "max_attempts",
        "name",
        "per_connection",
        "per_target",
        "resilience",
        "settings",
        "state",
        "strategy",
        "strategy_name",
        "tag_mode",
    )

    def __init__(self, gw: RoutingServices, combo: Combo, defaults: Mapping[str, Any]) -> None:
        registry = gw.strategies
        self.combo, self.defaults = combo, defaults
        self.name = name = combo.name
        self.settings = settings = ComboSettings(combo.config, defaults)
        self.tag_mode = str(settings.get("tagMatchMode", "any"))
        strategy_name = combo.strategy
        try:
            strategy = registry.get(strategy_name)
        except KeyError:
            log.warning("combo %r: strategy %r is not registered; using priority", name, strategy_name)
            strategy_name, strategy = "priority", registry.get("priority")
        self.strategy, self.strategy_name = strategy, strategy_name
        self.expand = strategy.expands_connections or settings.bool_("connectionAwareExpansion")
        self.affinity = strategy_name != "cache-optimized" and settings.bool_(
            "promptCacheAffinityEnabled", True
        )
        quota = StateQuotaProvider(gw.state, parse_limits(settings.get("connectionLimits")))
        self.gw_state = gw.state
        self.state = StrategyState(gw.state, name, quota)
        self.resilience = res = gw.resilience
        self.filters = (BreakerFilter(res.breaker), CooldownFilter(res.cooldown), LockoutFilter(res.lockout))
        self.per_connection: list[ComboTarget] | None = None
        max_retries = settings.get("maxRetries")
        max_attempts = settings.get("maxAttempts")
        self.per_target = int(max_retries) if isinstance(max_retries, int | float) else None
        self.max_attempts = (
            int(max_attempts) if isinstance(max_attempts, int | float) and max_attempts >= 1 else None
        )


def _static(gw: RoutingServices, plan: Plan, combo: Combo) -> _ComboStatic:
    defaults = global_combo_defaults(gw)
    memo: dict[str, _ComboStatic] = gw.registry.memo.setdefault("combo-static", {})
    key = plan.requested
    hit = memo.get(key)
    if (
        hit is None
        or hit.combo is not combo
        or hit.defaults is not defaults
        or hit.resilience is not gw.resilience
        or hit.gw_state is not gw.state
    ):
        hit = _ComboStatic(gw, combo, defaults)
        if gw.registry.combos.get(hit.name) is combo and len(memo) < MEMO_MAX_MODELS:
            memo[key] = hit
    return hit


async def plan_combo(
    gw: RoutingServices, plan: Plan, req: ChatRequest, decision: Decision
) -> tuple[list[Candidate], RunOptions]:
    """Candidates for a combo plan in its strategy's order, and the attempt-loop options (COMBO-3,
    COMBO-4; see the module docstring). A context-relay handoff rewrites ``req.body`` in place."""
    assert plan.combo is not None, "a combo plan carries its combo"
    st = _static(gw, plan, plan.combo)
    name, strategy_name, settings, strategy = st.name, st.strategy_name, st.settings, st.strategy
    decision.combo = name
    decision.strategy = strategy_name
    notes: list[str] = []
    targets = combo_targets(gw, st.combo, decision)
    if req.tags:
        targets, tag_note = apply_tags(targets, req.tags, st.tag_mode, decision)
        if tag_note:
            notes.append(tag_note)
        if st.expand:
            targets = per_connection(targets)
    elif st.expand:  # untagged: the expansion of the memoised targets is itself reusable
        if st.per_connection is None:
            st.per_connection = per_connection(targets)
        targets = st.per_connection
    now = gw.clock.time()
    state = st.state
    ctx = StrategyContext(
        combo=name,
        strategy=strategy_name,
        settings=settings,
        targets=tuple(targets),
        request=req,
        state=state,
        now=now,
        availability=_availability(st.filters, now),
    )
    ordering = await strategy.order(ctx)
    if ordering.body is not None:
        req.body, req.native, req.raw_body = ordering.body, None, None
    ordered = ordering.targets
    if st.affinity:
        ordered, moved = apply_cache_affinity(ordered, req, protect_first=strategy.protects_first)
        if moved:
            notes.append("prompt-cache affinity reordered accounts")
    candidates, owner = _flatten(ordered, decision)
    decision.reason = "; ".join([ordering.reason, *notes]) if ordering.reason else "; ".join(notes)
    hook = ordering.on_success
    clock = gw.clock

    async def on_success(cand: Candidate) -> None:
        await state.note_served(cand.connection.id, clock.time())
        target = owner.get(cand.key)
        if hook is not None and target is not None:
            await hook(target, cand)

    return candidates, RunOptions(
        per_target=st.per_target, max_attempts=st.max_attempts, on_success=on_success
    )


def combo_limits(gw: RoutingServices, combo: Combo) -> tuple[int, int]:
    """``(context_length, max_output_tokens)`` = MAX over the combo's expanded targets (API-2); a combo
    whose targets have no catalog data reports the largest window among connected models, never 0."""
    targets = combo_targets(gw, combo, Decision(request_id="", requested_model=combo.name))
    ctx = max((t.model.context_window for t in targets), default=0)
    mo = max((t.model.max_output_tokens for t in targets), default=0)
    if not ctx or not mo:
        known = [m for _, m in gw.registry.routable_models()]
        ctx = ctx or max((m.context_window for m in known), default=0) or 4096
        mo = mo or max((m.max_output_tokens for m in known), default=0) or 4096
    return ctx, mo


def shadowed_model(reg: Registry, name: str) -> tuple[str, str] | None:
    """``(model_id, provider_id)`` of the catalog model whose id (bare or ``provider/model``) equals
    the combo ``name`` (SPEC §4 shadowing), preferring a connected provider; else ``None``."""
    cat = reg.catalog
    if "/" in name:
        prefix, rest = name.split("/", 1)
        p = cat.provider(prefix)
        m = p.model(rest) if p is not None else None
        if p is not None and m is not None:
            return m.id, p.id
    serving = cat.providers_serving(name)
    if not serving:
        return None
    best = next((p for p in serving if reg.is_connected(p.id)), serving[0])
    m = best.model(name)
    return (m.id if m is not None else name), best.id


def shadowing_combos(reg: Registry) -> list[dict[str, str]]:
    """Every enabled combo whose name shadows a catalog model: ``[{combo, modelId, providerId}]``."""
    out: list[dict[str, str]] = []
    for name in reg.combos:
        hit = shadowed_model(reg, name)
        if hit is not None:
            out.append({"combo": name, "modelId": hit[0], "providerId": hit[1]})
    return out


def log_shadowing(reg: Registry) -> None:
    """The start-up log line listing every shadowing combo of ``reg`` (SPEC §4); silent when there is
    none."""
    hits = shadowing_combos(reg)
    if hits:
        log.warning(
            "COMBO_NAME_SHADOWS_MODEL: %d combo(s) shadow a model id on purpose: %s",
            len(hits),
            ", ".join(f"{h['combo']} (shadows {h['providerId']}/{h['modelId']})" for h in hits),
        )
