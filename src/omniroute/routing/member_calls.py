"""Member calls of the strategies that call more than one model per request (fusion, COMBO-5;
pipeline and its agentic orchestration, COMBO-6): :class:`MultiCall` holds one such request in flight
and makes each member call through the planner and the normal attempt loop, with its own
sub-:class:`Decision` folded into the request's. The strategies import this module;
:mod:`omniroute.routing.multicall` dispatches to them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from omniroute.core.combo import MAX_COMBO_DEPTH, Combo, ComboTarget
from omniroute.errors import ExhaustedError, GatewayError, InvalidRequest
from omniroute.routing.combo_expand import expand_targets
from omniroute.routing.decision import Decision
from omniroute.routing.engine import Engine, Outcome, StreamOutcome
from omniroute.routing.multicall_parts import (
    SummedStream,
    add_usage,
    answer_text,
    priced,
    tool_calls,
)
from omniroute.routing.permissions import allowed_candidates
from omniroute.routing.plan import Planner
from omniroute.routing.resolve import Plan, PlanTarget, resolve
from omniroute.routing.services import RoutingServices
from omniroute.values import Candidate, ChatRequest, Usage

__all__ = [
    "MULTI_CALL_STRATEGIES",
    "CallServices",
    "MemberResult",
    "MultiCall",
    "RunCombo",
    "Target",
    "bad_config",
    "is_multi_call",
    "model_target",
    "step_failed",
    "target_name",
]

MULTI_CALL_STRATEGIES = frozenset({"fusion", "pipeline"})

Target = ComboTarget


class CallServices(RoutingServices, Protocol):
    """:class:`RoutingServices` plus what member calls need: the ``planner`` (candidates for a member),
    the ``engine`` (its attempt loop) and ``record_usage`` (one usage row per member call, with the
    gateway's ``record_usage`` signature)."""

    @property
    def planner(self) -> Planner: ...

    @property
    def engine(self) -> Engine: ...

    def record_usage(
        self,
        req: ChatRequest,
        decision: Decision,
        *,
        status: int,
        cand: Candidate | None,
        usage: Usage | None,
        latency_ms: float,
        ttft_ms: float | None,
        error: str | None = None,
        member: str | None = None,
        charge: bool = True,
    ) -> None: ...

    def allowed_models_for(self, api_key_id: str | None) -> list[str] | None: ...


class RunCombo(Protocol):
    """Runs one multi-call combo (``depth`` > 0 when reached through a combo ref)."""

    async def __call__(
        self,
        gw: CallServices,
        req: ChatRequest,
        combo: Combo,
        decision: Decision,
        *,
        depth: int,
        seen: frozenset[str],
    ) -> Outcome | StreamOutcome: ...


def is_multi_call(combo: Combo | None) -> bool:
    """True for a combo served by :func:`omniroute.routing.multicall.execute_multi_call` (fusion,
    pipeline)."""
    return combo is not None and combo.strategy in MULTI_CALL_STRATEGIES


def target_name(t: Target) -> str:
    """What a target routes to: its model string or combo-ref name."""
    return t.combo_ref or t.model or ""


def model_target(model: str, gw: RoutingServices) -> Target:
    """A target for a configured model string (e.g. ``judgeModel``): a combo name becomes a combo ref."""
    return ComboTarget(combo_ref=model) if model in gw.registry.combos else ComboTarget(model=model)


def bad_config(combo: Combo, param: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"combo '{combo.name}': {param}: {message}", param=param)


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
    member calls made so far (their usage summed in ``usage``/``cost``). ``nested`` runs a member
    that is itself a multi-call combo (:func:`omniroute.routing.multicall.run_combo`, passed in so
    this module needs none of the strategies built on it)."""

    def __init__(
        self,
        gw: CallServices,
        req: ChatRequest,
        combo: Combo,
        decision: Decision,
        *,
        nested: RunCombo,
        depth: int = 0,
        seen: frozenset[str] = frozenset(),
    ) -> None:
        self.gw = gw
        self.nested = nested
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
            return await self.nested(gw, req, combo, sub, depth=self.depth + 1, seen=self.seen)
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
