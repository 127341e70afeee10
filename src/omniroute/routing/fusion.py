"""The fusion strategy (SPEC COMBO-5; seed 001 "Fusion Strategy"): a panel answers in parallel and a
judge synthesises one answer.

1. Tool bypass: a request with a non-empty ``tools`` array and ``tool_choice`` ≠ ``"none"`` goes to one
   model (the configured ``judgeModel``, else the first panel member) unchanged — no panel. A one-member
   panel is a direct call too.
2. Fan-out: every member at once, non-streaming, tools stripped (tool turns flattened to text), each
   through the normal attempt loop and resilience ladder; a combo-ref member is one recursive dispatch.
3. Quorum-grace collection: once ``minPanel`` (default 2, clamped to [2, panel size]) answers are in, the
   stragglers get ``stragglerGraceMs`` (8000) more; ``panelHardTimeoutMs`` (90000) caps the whole panel.
   Stragglers still running are cancelled before the judge starts.
4. Judge: the client's body (stream flag and tools kept) plus one user turn with the directive and the
   answers anonymised as ``Source 1…N``; ``judgeModel`` defaults to the first panel member (the first
   member that answered when that one failed).
5. Degradation: 0 answers → 503 listing every member's failure; 1 answer and no explicit judge → that
   answer, no judge call. More than ``maxPanel`` (40) members → 400.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from omniroute.clock import Clock, wait_any
from omniroute.errors import Diagnostics, ExhaustedError, GatewayError
from omniroute.routing.engine import Outcome, StreamOutcome
from omniroute.routing.member_calls import (
    MemberResult,
    MultiCall,
    Target,
    bad_config,
    model_target,
    step_failed,
    target_name,
)
from omniroute.routing.multicall_parts import has_tools, toolless

T = TypeVar("T")

FUSION_DEFAULTS: dict[str, int] = {
    "minPanel": 2,
    "stragglerGraceMs": 8000,
    "panelHardTimeoutMs": 90000,
    "maxPanel": 40,
}
CANCEL_WAIT_S = 1.0
"""How long cancelled stragglers get to unwind before the judge starts (s, real time: a bound on
closing their upstream sockets, not a routing timer)."""


@dataclass(frozen=True, slots=True)
class FusionTuning:
    """``config.fusionTuning`` resolved for one panel (times in seconds)."""

    min_panel: int
    grace_s: float
    hard_s: float
    max_panel: int

    @staticmethod
    def from_config(cfg: Mapping[str, Any], panel_size: int) -> FusionTuning:
        raw = dict(cfg.get("fusionTuning") or {})

        def num(key: str) -> float:
            v = raw.get(key)
            return (
                float(v) if isinstance(v, int | float) and not isinstance(v, bool) else FUSION_DEFAULTS[key]
            )

        return FusionTuning(
            min_panel=effective_min_panel(int(num("minPanel")), panel_size),
            grace_s=max(0.0, num("stragglerGraceMs")) / 1000,
            hard_s=max(0.001, num("panelHardTimeoutMs")) / 1000,
            max_panel=max(1, int(num("maxPanel"))),
        )


def effective_min_panel(requested: int, panel_size: int) -> int:
    """``minPanel`` clamped to [2, panel size] (a panel smaller than 2 needs all its members)."""
    return max(1, min(max(2, requested), panel_size))


@dataclass
class QuorumReport:
    """How collection ended: ``all_settled``, ``grace`` (grace expired after quorum) or ``hard_timeout``;
    ``dropped`` are the indexes of the tasks cancelled; ``quorum_s`` when quorum was reached (seconds
    after the start), ``None`` if never."""

    stop: str
    dropped: list[int] = field(default_factory=list)
    quorum_s: float | None = None


async def collect_quorum(
    tasks: Sequence[asyncio.Task[T]],
    ok: Callable[[T], bool],
    *,
    clock: Clock,
    min_ok: int,
    grace_s: float,
    hard_s: float,
) -> QuorumReport:
    """Wait for ``tasks`` until all settle, or ``grace_s`` after ``min_ok`` of them succeeded, or
    ``hard_s`` after the start (seconds on ``clock``), whichever is first; cancel the rest (and let
    them unwind briefly)."""
    start = clock.monotonic()
    hard_at = start + hard_s
    grace_at: float | None = None
    pending = set(tasks)
    stop = "all_settled"
    while pending:
        until = hard_at if grace_at is None else min(hard_at, grace_at)
        timeout = until - clock.monotonic()
        if timeout <= 0:
            stop = "grace" if grace_at is not None and grace_at < hard_at else "hard_timeout"
            break
        await wait_any(clock, pending, timeout)
        pending = {t for t in pending if not t.done()}
        if grace_at is None:
            good = sum(1 for t in tasks if t.done() and t.exception() is None and ok(t.result()))
            if good >= min_ok:
                grace_at = clock.monotonic() + grace_s
    for t in pending:
        t.cancel()
    if pending:
        await asyncio.wait(pending, timeout=CANCEL_WAIT_S)
    return QuorumReport(
        stop=stop,
        dropped=[i for i, t in enumerate(tasks) if t in pending],
        quorum_s=None if grace_at is None else grace_at - grace_s - start,
    )


def build_judge_prompt(answers: Sequence[str]) -> str:
    """The judge directive with the answers anonymised as ``Source 1…N`` (no provider or model names)."""
    n = len(answers)
    blocks = "\n\n".join(f"[Source {i}]\n{a.strip()}" for i, a in enumerate(answers, 1))
    return (
        f"You are the judge of a panel of {n} independent experts who each answered the conversation "
        "above. Their answers follow as anonymous sources.\n\n"
        "First analyse them privately:\n"
        "- Consensus: what most sources agree on (likely, but not automatically, correct).\n"
        "- Contradictions: where sources disagree, and which side the evidence supports.\n"
        "- Partial coverage: parts of the request only some sources addressed.\n"
        "- Unique insights: valuable points only one source raised.\n"
        "- Blind spots: what every source missed or got wrong.\n\n"
        "Then write ONE final answer to the user's original request that is better than any single "
        "source. You are not a vote counter: correct the panel with your own knowledge where needed; "
        "honesty is the only hard limit. Do not mention the panel, the sources, or that several answers "
        "exist, and add no filler.\n\n"
        f"=== PANEL ANSWERS ===\n{blocks}\n=== END PANEL ANSWERS ===\n\n"
        "Now write the final answer to the user's original request."
    )


def judge_body(body: dict[str, Any], answers: Sequence[str]) -> dict[str, Any]:
    """The client's body (stream flag and tools kept) plus one user turn with the judge directive."""
    messages = [*(body.get("messages") or []), {"role": "user", "content": build_judge_prompt(answers)}]
    return {**body, "messages": messages}


async def run_fusion(mc: MultiCall) -> Outcome | StreamOutcome:
    """Serve one fusion request (module docstring)."""
    panel = mc.targets
    cfg = mc.config
    if not panel:
        raise bad_config(mc.combo, "targets", "a fusion combo needs at least one panel member")
    tuning = FusionTuning.from_config(cfg, len(panel))
    if len(panel) > tuning.max_panel:
        raise bad_config(
            mc.combo,
            "targets",
            f"the fusion panel has {len(panel)} members; at most {tuning.max_panel} (maxPanel) are allowed",
        )
    judge_model = cfg.get("judgeModel")
    explicit = model_target(str(judge_model), mc.gw) if judge_model else None
    info: dict[str, Any] = {"panel_size": len(panel), "min_panel": tuning.min_panel}
    mc.decision.extra["fusion"] = info
    if has_tools(mc.req.body) or len(panel) == 1:
        target = (explicit or panel[0]) if has_tools(mc.req.body) else panel[0]
        info.update(mode="tool_bypass" if has_tools(mc.req.body) else "single_member")
        info["judge"] = {"model": target_name(target)}
        return mc.finish(await _final_call(mc, target, mc.req.body, "fusion call"))
    results, report = await _run_panel(mc, panel, tuning)
    info.update(stop=report.stop, panel=[r.summary() for r in results])
    answers = [r for r in results if r.ok]
    if not answers:
        raise _panel_failed(mc, results)
    if len(answers) == 1 and explicit is None:
        info["mode"] = "single_answer"
        return mc.finish_buffered(answers[0])
    judge = explicit or (panel[0] if results[0].ok else panel[results.index(answers[0])])
    info.update(mode="judge", judge={"model": target_name(judge), "explicit": explicit is not None})
    body = judge_body(mc.req.body, [a.text for a in answers])
    return mc.finish(await _final_call(mc, judge, body, "fusion judge"))


async def _final_call(
    mc: MultiCall, target: Target, body: dict[str, Any], what: str
) -> Outcome | StreamOutcome:
    try:
        return await mc.call(target, mc.sub_request(body, stream=mc.req.stream))
    except GatewayError as err:
        raise step_failed(f"{what} ({target_name(target)}) failed", err) from err


async def _run_panel(
    mc: MultiCall, panel: list[Target], tuning: FusionTuning
) -> tuple[list[MemberResult], QuorumReport]:
    req = mc.sub_request(toolless(mc.req.body), stream=False)
    subs = [mc.sub_decision(t) for t in panel]
    clock = mc.gw.clock
    t0 = clock.monotonic()
    tasks = [
        asyncio.create_task(mc.call_buffered(t, req, f"panel-{i}", subs[i - 1]), name=f"fusion-panel-{i}")
        for i, t in enumerate(panel, 1)
    ]
    try:
        report = await collect_quorum(
            tasks,
            lambda r: r.ok,
            clock=clock,
            min_ok=tuning.min_panel,
            grace_s=tuning.grace_s,
            hard_s=tuning.hard_s,
        )
    finally:
        for t in tasks:
            t.cancel()  # no-op for finished tasks; stops the panel if this request is cancelled
    results: list[MemberResult] = []
    for i, (task, target) in enumerate(zip(tasks, panel, strict=True)):
        if task.done() and not task.cancelled():
            results.append(task.result())
            continue
        reason = "straggler_dropped" if report.stop == "grace" else "timeout"
        label, ms = mc.member_label(f"panel-{i + 1}"), (clock.monotonic() - t0) * 1000
        res = MemberResult(label, target_name(target), subs[i], ms)
        res.status, res.reason = 499 if reason == "straggler_dropped" else 504, reason
        mc.add(res)
        results.append(res)
    return results, report


def _panel_failed(mc: MultiCall, results: list[MemberResult]) -> ExhaustedError:
    reasons = "; ".join(f"{r.model}={r.status} {r.reason}" for r in results)
    diag = Diagnostics(
        pool_size=len(results), attempted=list(mc.decision.attempts), excluded=list(mc.decision.exclusions)
    ).to_dict()
    diag["members"] = [r.summary() for r in results]
    return ExhaustedError(
        f"All {len(results)} fusion panel members failed: {reasons}",
        status=503,
        code="fallback_exhausted",
        extra={"diagnostics": diag},
    )


def validate_fusion(combo: dict[str, Any]) -> list[tuple[str, str]]:
    """``(param, message)`` per problem: empty panel, panel above ``maxPanel``, malformed
    ``fusionTuning`` values or ``judgeModel``."""
    cfg = combo.get("config") or {}
    targets = list(combo.get("targets") or [])
    tuning = cfg.get("fusionTuning") or {}
    if not isinstance(tuning, dict):
        return [("config.fusionTuning", "must be an object")]
    errors: list[tuple[str, str]] = []
    for key, low in (("minPanel", 1), ("stragglerGraceMs", 0), ("panelHardTimeoutMs", 1), ("maxPanel", 1)):
        v = tuning.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v < low):
            errors.append((f"config.fusionTuning.{key}", f"must be a number ≥ {low}"))
    limit = FusionTuning.from_config(cfg, len(targets)).max_panel
    if not targets:
        errors.append(("targets", "a fusion combo needs at least one panel member"))
    elif len(targets) > limit:
        errors.append(("targets", f"the fusion panel has {len(targets)} members; maxPanel is {limit}"))
    judge = cfg.get("judgeModel")
    if judge is not None and (not isinstance(judge, str) or not judge):
        errors.append(("config.judgeModel", "must be a non-empty model string"))
    return errors
