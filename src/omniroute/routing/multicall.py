"""Shared machinery of the strategies that call more than one model per request: fusion (COMBO-5),
pipeline and its agentic orchestration (COMBO-6); seed 001 "Fusion Strategy", "Agentic pipeline mode".

``Gateway.execute`` hands a combo whose strategy is in :data:`MULTI_CALL_STRATEGIES` to
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

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omniroute.core.combo import MAX_COMBO_DEPTH, Combo, ComboTarget
from omniroute.errors import ExhaustedError, GatewayError, InvalidRequest
from omniroute.routing.combos import expand_targets
from omniroute.routing.decision import Decision
from omniroute.routing.engine import Outcome, StreamOutcome
from omniroute.routing.multicall_parts import (
    SummedStream,
    add_usage,
    answer_text,
    priced,
    tool_calls,
)
from omniroute.routing.permissions import allowed_candidates
from omniroute.routing.resolve import Plan, PlanTarget, resolve
from omniroute.values import ChatRequest, Usage

if TYPE_CHECKING:
    from omniroute.gateway import Gateway

log = logging.getLogger("omniroute.routing")

MULTI_CALL_STRATEGIES = frozenset({"fusion", "pipeline"})

Target = ComboTarget


def is_multi_call(combo: Combo | None) -> bool:
    """True for a combo served by :func:`execute_multi_call` (fusion, pipeline)."""
    return combo is not None and combo.strategy in MULTI_CALL_STRATEGIES


async def execute_multi_call(
    gw: Gateway, req: ChatRequest, plan: Plan, decision: Decision
) -> Outcome | StreamOutcome:
    """Serve a fusion or pipeline combo plan; raises a :class:`GatewayError` like ``Engine.run``."""
    combo = plan.combo
    assert combo is not None, "a multi-call plan carries its combo"
    decision.combo = combo.name
    decision.strategy = combo.strategy
    return await run_combo(gw, req, combo, decision, depth=0, seen=frozenset())


async def run_combo(
    gw: Gateway,
    req: ChatRequest,
    combo: Combo,
    decision: Decision,
    *,
    depth: int,
    seen: frozenset[str],
) -> Outcome | StreamOutcome:
    """Run one multi-call combo; ``depth`` > 0 for a combo reached through a combo ref (one black-box
    voice of the outer combo: its member rows are written only if it fails, labelled ``name/member``)."""
    from omniroute.routing.fusion import run_fusion
    from omniroute.routing.pipeline import run_pipeline

    mc = MultiCall(gw, req, combo, decision, depth=depth, seen=seen | {combo.name})
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


def target_name(t: Target) -> str:
    """What a target routes to: its model string or combo-ref name."""
    return t.combo_ref or t.model or ""


def model_target(model: str, gw: Gateway) -> Target:
    """A target for a configured model string (e.g. ``judgeModel``): a combo name becomes a combo ref."""
    return ComboTarget(combo_ref=model) if model in gw.registry.combos else ComboTarget(model=model)


def bad_config(combo: Combo, param: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"combo '{combo.name}': {param}: {message}", param=param)


# -- member calls ----------------------------------------------------------------------------------


@dataclass
class MemberResult:
    """One finished non-client-facing call: ``status`` 200 with ``text``, or the failure."""

    label: str
    model: str
    decision: Decision
    latency_ms: float
    outcome: Outcome | None = None
    error: GatewayError | None = None
    status: int = 200
    reason: str = "ok"
    text: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome is not None and self.status == 200

    def summary(self) -> dict[str, Any]:
        """JSON for the decision's ``extra`` (OBS-2)."""
        out: dict[str, Any] = {
            "member": self.label,
            "model": self.model,
            "status": self.status,
            "reason": self.reason,
            "latency_ms": round(self.latency_ms, 2),
        }
        if self.outcome is not None:
            out["served"] = self.outcome.candidate.key
            if self.outcome.usage is not None:
                out["usage"] = self.outcome.usage.to_openai()
        return out


class MultiCall:
    """One multi-call request in flight: the client request, the combo, the parent decision and the
    member calls made so far (their usage summed in ``usage``/``cost``)."""

    def __init__(
        self,
        gw: Gateway,
        req: ChatRequest,
        combo: Combo,
        decision: Decision,
        *,
        depth: int = 0,
        seen: frozenset[str] = frozenset(),
    ) -> None:
        self.gw = gw
        self.req = req
        self.combo = combo
        self.decision = decision
        self.depth = depth
        self.seen = seen
        self.members: list[MemberResult] = []
        self.usage = Usage()
        self.cost = 0.0
        max_retries = self.config.get("maxRetries")
        self.per_target = int(max_retries) if max_retries is not None else None

    @property
    def config(self) -> Mapping[str, Any]:
        """The combo's options (deep-frozen)."""
        return self.combo.config

    @property
    def targets(self) -> list[Target]:
        return list(self.combo.targets)

    def sub_request(self, body: dict[str, Any], *, stream: bool) -> ChatRequest:
        """The request of one member call; the client's own request when nothing changed (keeps the
        native body for same-format pass-through)."""
        if body is self.req.body and stream == self.req.stream:
            return self.req
        return dataclasses.replace(self.req, body=body, stream=stream, native=None, raw_body=None)

    def member_label(self, label: str) -> str:
        """``label`` for the usage log; prefixed with the combo name inside a nested combo."""
        return f"{self.combo.name}/{label}" if self.depth else label

    def sub_decision(self, target: Target) -> Decision:
        sub = Decision(request_id=self.req.request_id, requested_model=target_name(target))
        sub.strategy, sub.combo = self.decision.strategy, self.decision.combo
        return sub

    async def call(
        self, target: Target, req: ChatRequest, sub: Decision | None = None
    ) -> Outcome | StreamOutcome:
        """One member call through the attempt loop; its sub-decision is folded into the parent's.
        Raises the member's :class:`GatewayError`."""
        sub = sub or self.sub_decision(target)
        try:
            return await self._dispatch(target, req, sub)
        finally:
            self.decision.attempts.extend(sub.attempts)
            self.decision.exclusions.extend(sub.exclusions)
            self.decision.candidates.extend(sub.candidates)

    async def call_buffered(
        self, target: Target, req: ChatRequest, label: str, sub: Decision | None = None
    ) -> MemberResult:
        """A non-streaming member call that never raises a :class:`GatewayError`: the result records the
        answer text or the failure (``empty_content`` for a 200 without text) and is added to the
        ledger."""
        t0 = self.gw.clock.monotonic()
        res = MemberResult(
            self.member_label(label), target_name(target), sub or self.sub_decision(target), 0.0
        )
        try:
            out = await self.call(target, req, res.decision)
        except GatewayError as err:
            res.error, res.status, res.reason = err, err.status, err.message
        else:
            assert isinstance(out, Outcome), "member calls are non-streaming"
            res.outcome, res.text = out, answer_text(out.response)
            if not res.text and not tool_calls(out.response):
                res.status, res.reason = 502, "empty_content: the answer had no text"
        res.latency_ms = (self.gw.clock.monotonic() - t0) * 1000
        self.add(res)
        return res

    def add(self, res: MemberResult) -> None:
        """Count a member call (its usage and cost) in the request's totals."""
        self.members.append(res)
        self._recount()

    def _recount(self) -> None:
        self.usage, self.cost = Usage(), 0.0
        for m in self.members:
            if m.outcome is not None and m.outcome.usage is not None:
                self.usage = add_usage(self.usage, m.outcome.usage)
                self.cost += m.outcome.usage.cost_usd(m.outcome.candidate.model)

    def finish(self, out: Outcome | StreamOutcome) -> Outcome | StreamOutcome:
        """The client-facing result with the member calls' usage and cost added (and served set)."""
        self.decision.served = out.candidate.key
        if isinstance(out, StreamOutcome):
            return SummedStream.wrap(out, self.usage, self.cost)
        own = out.usage or Usage.from_openai(out.response.get("usage")) or Usage()
        total = priced(add_usage(own, self.usage), own.cost_usd(out.candidate.model) + self.cost)
        response = {**out.response, "usage": {**(out.response.get("usage") or {}), **total.to_openai()}}
        return dataclasses.replace(out, response=response, usage=total)

    def finish_buffered(self, res: MemberResult, content: str | None = None) -> Outcome | StreamOutcome:
        """Return an already-made buffered answer to the client (replayed as a stream if it streams),
        its text replaced by ``content`` when given; the answering call moves from the member ledger
        to the main row."""
        assert res.outcome is not None
        self.members.remove(res)
        self._recount()
        answer = res.outcome
        if content is not None:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
            answer = dataclasses.replace(answer, response={**answer.response, "choices": [choice]})
        out = self.finish(answer)
        assert isinstance(out, Outcome)
        return SummedStream.replay(out, self.gw.clock.time()) if self.req.stream else out

    def record_members(self, *, charge: bool) -> None:
        """Write one usage row per member call; ``charge`` when the request failed (no main row carries
        their cost). A nested combo that succeeded writes none: its total is in the outer member row."""
        if self.depth and not charge:
            return
        for m in self.members:
            cand = m.outcome.candidate if m.outcome is not None else None
            self.gw.record_usage(
                self.req,
                m.decision,
                status=m.status,
                cand=cand,
                usage=m.outcome.usage if m.outcome is not None else None,
                latency_ms=m.latency_ms,
                ttft_ms=None,
                error=None if m.status == 200 else m.reason,
                member=m.label,
                charge=charge,
            )
        self.members = []

    async def _dispatch(self, target: Target, req: ChatRequest, sub: Decision) -> Outcome | StreamOutcome:
        gw = self.gw
        if target.combo_ref:
            return await self._dispatch_combo(target.combo_ref, req, sub)
        model = target.model or ""
        targets: list[PlanTarget]
        if "/" in model:
            holder = self.combo.model_copy(update={"targets": (target,)})
            targets = expand_targets(gw, holder, sub, depth=self.depth, seen=self.seen)
        else:
            plan = resolve(gw.registry, model)
            if plan.combo is not None:
                return await self._dispatch_combo(plan.combo.name, req, sub)
            targets = list(plan.targets)
        candidates = gw.planner.expand(targets, sub)
        candidates = allowed_candidates(gw.allowed_models_for(req.api_key_id), candidates, sub, model)
        return await gw.engine.run(req, candidates, sub, per_target=self.per_target)

    async def _dispatch_combo(self, name: str, req: ChatRequest, sub: Decision) -> Outcome | StreamOutcome:
        """A combo ref as one black-box voice: a full recursive dispatch into that combo."""
        gw = self.gw
        combo = gw.registry.combos.get(name)
        why = (
            "unknown combo"
            if combo is None
            else "cycle"
            if name in self.seen
            else f"depth > {MAX_COMBO_DEPTH}"
            if self.depth + 1 > MAX_COMBO_DEPTH
            else ""
        )
        if combo is None or why:
            raise ExhaustedError(
                f"combo_ref '{name}' skipped: {why}", code="all_candidates_unavailable", status=503
            )
        sub.combo = name
        if is_multi_call(combo):
            return await run_combo(gw, req, combo, sub, depth=self.depth + 1, seen=self.seen)
        kind = "auto" if combo.strategy == "auto" else "combo"
        plan = Plan(kind=kind, requested=name, route="combo-ref", combo=combo)
        candidates, opts = await gw.planner.candidates(plan, req, sub)
        candidates = allowed_candidates(gw.allowed_models_for(req.api_key_id), candidates, sub, name)
        return await gw.engine.run(
            req,
            candidates,
            sub,
            max_attempts=opts.max_attempts,
            per_target=opts.per_target,
            on_success=opts.on_success,
        )


def step_failed(prefix: str, err: GatewayError) -> GatewayError:
    """``err`` re-raised with ``prefix`` naming the failing step; status, code, headers and
    diagnostics are kept."""
    out = GatewayError(
        f"{prefix}: {err.message}", code=err.code, status=err.status, headers=err.headers, extra=err.extra
    )
    out.type = err.type
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
    from omniroute.routing.fusion import validate_fusion
    from omniroute.routing.pipeline import validate_pipeline

    if combo.get("strategy") == "fusion":
        return validate_fusion(combo)
    if combo.get("strategy") == "pipeline":
        return validate_pipeline(combo)
    return []
