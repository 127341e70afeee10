"""From a resolved :class:`~omniroute.routing.resolve.Plan` to the ordered candidate list the engine
attempts: targets expand into one candidate per active connection of their provider (priority order,
PROV-3), pinned connections stay pinned, disabled chain entries are recorded and skipped (RESIL-4).

Combos and auto plans delegate the ordering to their strategy (COMBO-3, AUTO-5); single-model plans
use definition order.
"""

from __future__ import annotations

from typing import Any

from omniroute.errors import ExclusionRecord
from omniroute.routing.auto import plan_auto
from omniroute.routing.combos import plan_combo
from omniroute.routing.decision import Decision
from omniroute.routing.resolve import MEMO_MAX_MODELS, Plan, PlanTarget
from omniroute.routing.services import RoutingServices, RunOptions
from omniroute.values import Candidate, ChatRequest

__all__ = ["Planner", "RunOptions"]

_NO_OPTIONS = RunOptions()  # read-only: the engine's defaults for single-model plans
_EXPAND_MEMO = "plan-expansion"
_Expansion = tuple[Plan, tuple[Candidate, ...], tuple[ExclusionRecord, ...], tuple[dict[str, Any], ...]]


class Planner:
    """Builds candidates for a plan from ``services`` (read on every call, so a new registry
    snapshot or config takes effect on the next request)."""

    def __init__(self, services: RoutingServices) -> None:
        self.gw = services

    async def candidates(
        self, plan: Plan, req: ChatRequest, decision: Decision
    ) -> tuple[list[Candidate], RunOptions]:
        """Ordered candidates for ``plan`` and the options for the attempt loop."""
        if plan.kind == "auto":
            return await plan_auto(self.gw, plan, req, decision)
        if plan.kind == "combo":
            return await plan_combo(self.gw, plan, req, decision)
        decision.strategy = "chain" if plan.kind == "chain" else "single"
        return self._expanded(plan, decision), _NO_OPTIONS

    def _expanded(self, plan: Plan, decision: Decision) -> list[Candidate]:
        """:meth:`expand` of a single-model plan, memoised on the registry snapshot by model string
        (the result depends only on the plan's targets and the snapshot's connections); the cached
        exclusions and candidate rows are appended to ``decision`` as :meth:`expand` would."""
        memo: dict[str, _Expansion] = self.gw.registry.memo.setdefault(_EXPAND_MEMO, {})
        hit = memo.get(plan.requested)
        if hit is None or hit[0] is not plan:
            scratch = Decision(request_id="", requested_model=plan.requested)
            cands = self.expand(plan.targets, scratch)
            hit = (plan, tuple(cands), tuple(scratch.exclusions), tuple(scratch.candidates))
            if len(memo) < MEMO_MAX_MODELS:
                memo[plan.requested] = hit
        if hit[2]:
            decision.exclusions.extend(hit[2])
        decision.candidates.extend(hit[3])
        return list(hit[1])

    def expand(
        self, targets: tuple[PlanTarget, ...] | list[PlanTarget], decision: Decision
    ) -> list[Candidate]:
        """One candidate per active connection of each target's provider, in target then connection
        priority order; disabled targets and inactive connections become exclusions."""
        reg = self.gw.registry
        out: list[Candidate] = []
        for t in targets:
            if not t.enabled:
                decision.exclusions.append(
                    ExclusionRecord(t.provider.id, t.model.id, "disabled in fallback chain")
                )
                continue
            conns = reg.connections.get(t.provider.id, [])
            if t.connection_id is not None:
                conns = [c for c in conns if c.id == t.connection_id]
            if not conns:
                decision.exclusions.append(ExclusionRecord(t.provider.id, t.model.id, "no connection"))
            for c in conns:
                if not c.is_active:
                    decision.exclusions.append(
                        ExclusionRecord(t.provider.id, t.model.id, "connection inactive", c.id)
                    )
                    continue
                out.append(
                    Candidate(t.provider, c, t.model, timeout_s=t.timeout_s, weight=t.weight, step=t.step)
                )
        decision.candidates.extend(
            {"provider": x.provider.id, "model": x.model.id, "connection": x.connection.id} for x in out
        )
        return out
