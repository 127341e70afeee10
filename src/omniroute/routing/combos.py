"""Combo plans: a persisted combo's targets → ordered candidates (COMBO-1, COMBO-3).

Nested ``combo_ref`` targets expand inline (depth ≤ 3, cycles skipped). The strategy registry orders
the expanded targets; until a strategy is registered for a name, definition order is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omniroute.errors import ExclusionRecord
from omniroute.routing.decision import Decision
from omniroute.routing.resolve import Plan, PlanTarget
from omniroute.values import Candidate, ChatRequest

if TYPE_CHECKING:
    from omniroute.gateway import Gateway
    from omniroute.routing.plan import RunOptions

MAX_COMBO_DEPTH = 3  # COMBO-1


def expand_targets(
    gw: Gateway,
    combo: dict[str, Any],
    decision: Decision,
    *,
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
) -> list[PlanTarget]:
    """Flatten a combo's targets into concrete provider/model targets (combo refs inline)."""
    reg = gw.registry
    out: list[PlanTarget] = []
    seen = seen | {combo["name"]}
    for i, t in enumerate(combo.get("targets") or []):
        ref = t.get("combo_ref")
        if ref:
            sub = reg.combos.get(ref)
            if sub is None or ref in seen or depth + 1 > MAX_COMBO_DEPTH:
                why = "unknown combo" if sub is None else ("cycle" if ref in seen else "depth > 3")
                decision.exclusions.append(ExclusionRecord("combo", ref, f"combo_ref skipped: {why}"))
                continue
            out.extend(expand_targets(gw, sub, decision, depth=depth + 1, seen=seen))
            continue
        model = str(t.get("model") or "")
        if "/" not in model:
            decision.exclusions.append(ExclusionRecord("?", model, "target is not provider/model"))
            continue
        prefix, rest = model.split("/", 1)
        provider = reg.catalog.provider(prefix)
        if provider is None:
            decision.exclusions.append(ExclusionRecord(prefix, rest, "unknown provider"))
            continue
        timeout_s = t.get("timeout_s")
        if timeout_s is None and t.get("timeout_ms") is not None:
            timeout_s = float(t["timeout_ms"]) / 1000
        out.append(
            PlanTarget(
                provider,
                reg.model_info(provider, rest),
                connection_id=t.get("connection_id"),
                weight=float(t.get("weight") or 0),
                timeout_s=timeout_s,
                step=i,
            )
        )
    return out


async def plan_combo(
    gw: Gateway, plan: Plan, req: ChatRequest, decision: Decision
) -> tuple[list[Candidate], RunOptions]:
    """Candidates for a combo plan in the combo strategy's order (COMBO-3)."""
    from omniroute.routing.plan import RunOptions

    combo = plan.combo or {}
    decision.combo = combo.get("name")
    decision.strategy = str(combo.get("strategy") or "priority")
    targets = expand_targets(gw, combo, decision)
    cfg = combo.get("config") or {}
    max_retries = cfg.get("maxRetries")
    return gw.planner.expand(targets, decision), RunOptions(
        per_target=int(max_retries) if max_retries is not None else None
    )


def combo_limits(gw: Gateway, combo: dict[str, Any]) -> tuple[int, int]:
    """``(context_length, max_output_tokens)`` = MAX over the combo's expanded targets (API-2); a combo
    whose targets have no catalog data reports the largest window among connected models, never 0."""
    targets = expand_targets(gw, combo, Decision(request_id="", requested_model=combo.get("name", "")))
    ctx = max((t.model.context_window for t in targets), default=0)
    mo = max((t.model.max_output_tokens for t in targets), default=0)
    if not ctx or not mo:
        known = [m for _, m in gw.registry.routable_models()]
        ctx = ctx or max((m.context_window for m in known), default=0) or 4096
        mo = mo or max((m.max_output_tokens for m in known), default=0) or 4096
    return ctx, mo
