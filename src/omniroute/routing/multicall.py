"""Dispatch of the strategies that call more than one model per request: fusion (COMBO-5),
pipeline and its agentic orchestration (COMBO-6); seed 001 "Fusion Strategy", "Agentic pipeline mode".

The gateway's ``execute`` hands a combo whose strategy is in :data:`MULTI_CALL_STRATEGIES` to
:func:`execute_multi_call` instead of planner + engine. Every member call (panel answer, judge,
pipeline step, planner decision) goes through the normal attempt loop and resilience ladder with its
own sub-:class:`Decision`, whose attempts, exclusions and candidates are folded into the request's
decision. A member that is a combo ref is one recursive dispatch (depth/cycle protection shared with
combos: :data:`MAX_COMBO_DEPTH`).

Accounting (OBS-1): the response ``usage`` and the request's main usage row (written by ``run_chat``)
hold the sum over every call with the cost computed per call (:class:`PricedUsage`); the calls that did
not face the client get their own ``member`` rows, kept out of the key's spend unless the request
failed (then no main row carries their cost).
"""

from __future__ import annotations

import logging
from typing import Any

from omniroute.core.combo import Combo
from omniroute.routing.decision import Decision
from omniroute.routing.engine import Outcome, StreamOutcome
from omniroute.routing.fusion import run_fusion, validate_fusion
from omniroute.routing.member_calls import (
    MULTI_CALL_STRATEGIES,
    CallServices,
    MemberResult,
    MultiCall,
    is_multi_call,
)
from omniroute.routing.pipeline import run_pipeline, validate_pipeline
from omniroute.routing.resolve import Plan
from omniroute.values import ChatRequest

log = logging.getLogger("omniroute.routing")


async def execute_multi_call(
    gw: CallServices, req: ChatRequest, plan: Plan, decision: Decision
) -> Outcome | StreamOutcome:
    """Serve a fusion or pipeline combo plan; raises a :class:`GatewayError` like ``Engine.run``."""
    combo = plan.combo
    assert combo is not None, "a multi-call plan carries its combo"
    decision.combo = combo.name
    decision.strategy = combo.strategy
    return await run_combo(gw, req, combo, decision, depth=0, seen=frozenset())


async def run_combo(
    gw: CallServices,
    req: ChatRequest,
    combo: Combo,
    decision: Decision,
    *,
    depth: int,
    seen: frozenset[str],
) -> Outcome | StreamOutcome:
    """Run one multi-call combo; ``depth`` > 0 for a combo reached through a combo ref (one black-box
    voice of the outer combo: its member rows are written only if it fails, labelled ``name/member``)."""
    mc = MultiCall(gw, req, combo, decision, nested=run_combo, depth=depth, seen=seen | {combo.name})
    try:
        if combo.strategy == "fusion":
            out = await run_fusion(mc)
        else:
            out = await run_pipeline(mc)
    except BaseException:
        mc.record_members(charge=True)
        raise
    mc.record_members(charge=False)
    return out


__all__ = [
    "MULTI_CALL_STRATEGIES",
    "MemberResult",
    "MultiCall",
    "execute_multi_call",
    "is_multi_call",
    "run_combo",
    "validate_multi_call_options",
    "warn_misplaced_options",
]


# -- validation (COMBO-1: called by the combos API and config loading) ------------------------------

FUSION_KEYS = ("judgeModel", "fusionTuning")
PIPELINE_KEYS = ("agenticOrchestration",)


def warn_misplaced_options(combo: dict[str, Any]) -> list[str]:
    """Warnings for fusion/pipeline options on a combo of another strategy (they are ignored there);
    each is also logged."""
    strategy = combo.get("strategy")
    cfg = combo.get("config") or {}
    out: list[str] = []
    if strategy != "fusion":
        out += [f"config.{k} only applies to the fusion strategy" for k in FUSION_KEYS if k in cfg]
    if strategy != "pipeline":
        out += [f"config.{k} only applies to the pipeline strategy" for k in PIPELINE_KEYS if k in cfg]
        if any(isinstance(t, dict) and t.get("prompt") for t in combo.get("targets") or []):
            out.append("targets[].prompt only applies to the pipeline strategy")
    for w in out:
        log.warning("combo %r (strategy %s): %s; ignored", combo.get("name"), strategy, w)
    return out


def validate_multi_call_options(combo: dict[str, Any]) -> list[tuple[str, str]]:
    """``(param, message)`` for each 400-worthy problem of a fusion or pipeline combo (COMBO-5,
    COMBO-6); empty for other strategies."""
    if combo.get("strategy") == "fusion":
        return validate_fusion(combo)
    if combo.get("strategy") == "pipeline":
        return validate_pipeline(combo)
    return []
