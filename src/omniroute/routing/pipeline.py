"""The pipeline strategy (SPEC COMBO-6; seed 001 "pipeline" and "Agentic pipeline mode").

Steps are the combo's targets in order, each with an optional ``prompt`` (≤ 20,000 characters):

- step 1 gets the client's conversation with its prompt prepended as a system turn;
- step k+1 gets ``[system: its prompt, user: step k's answer]``;
- intermediate steps are non-streaming and tool-less (tool turns flattened to text); the final step
  keeps the client's stream flag and tools and is what the client sees;
- a failing step fails the request naming the step and its model, with the failure's status (502 for
  an empty answer).

With ``config.agenticOrchestration.enabled`` a two-step pipeline becomes planner + executor
(:mod:`omniroute.routing.agentic`).
"""

from __future__ import annotations

from typing import Any

from omniroute.core.combo import MAX_STEP_PROMPT_CHARS
from omniroute.errors import GatewayError
from omniroute.routing.agentic import MAX_TOOL_ROUNDS, MIN_TOOL_ROUNDS, agentic_settings, run_agentic
from omniroute.routing.engine import Outcome, StreamOutcome
from omniroute.routing.member_calls import (
    MultiCall,
    Target,
    bad_config,
    step_failed,
    target_name,
)
from omniroute.routing.multicall_parts import flatten_tool_turns, toolless


def step_prompt(t: Target) -> str:
    """The step's ``prompt`` (``""`` when none)."""
    return t.prompt or ""


def step_body(body: dict[str, Any], prompt: str, previous: str | None, *, final: bool) -> dict[str, Any]:
    """The body of one step: the conversation (step 1) or the previous step's answer (later steps),
    the step prompt as a leading system turn; tool-less and non-streaming unless ``final``."""
    if previous is None:
        messages = list(body.get("messages") or [])
        if not final:
            messages = flatten_tool_turns(messages)
    else:
        messages = [{"role": "user", "content": previous}]
    if prompt:
        messages.insert(0, {"role": "system", "content": prompt})
    out = {**body, "messages": messages}
    return out if final else toolless(out)


def check_steps(mc: MultiCall) -> list[Target]:
    """The steps, or 400 for an empty pipeline or an over-long step prompt."""
    steps = mc.targets
    if not steps:
        raise bad_config(mc.combo, "targets", "a pipeline combo needs at least one step")
    for i, t in enumerate(steps):
        if len(step_prompt(t)) > MAX_STEP_PROMPT_CHARS:
            raise bad_config(
                mc.combo,
                f"targets[{i}].prompt",
                f"step prompts are limited to {MAX_STEP_PROMPT_CHARS} characters; step {i + 1} has "
                f"{len(step_prompt(t))}",
            )
    return steps


async def run_pipeline(mc: MultiCall) -> Outcome | StreamOutcome:
    """Serve one pipeline request (module docstring)."""
    steps = check_steps(mc)
    settings = agentic_settings(mc.combo)
    if settings is not None:
        return await run_agentic(mc, steps[0], steps[1], settings)
    info: dict[str, Any] = {"steps": []}
    mc.decision.extra["pipeline"] = info
    previous: str | None = None
    for i, t in enumerate(steps, 1):
        name = target_name(t)
        final = i == len(steps)
        body = step_body(mc.req.body, step_prompt(t), previous, final=final)
        if final and previous is None and not step_prompt(t):
            body = mc.req.body  # a one-step pipeline without a prompt is the client's request
        if final:
            info["final_step"] = {"step": i, "model": name}
            try:
                out = await mc.call(t, mc.sub_request(body, stream=mc.req.stream))
            except GatewayError as err:
                raise step_failed(f"Pipeline step {i} ({name}) failed", err) from err
            return mc.finish(out)
        res = await mc.call_buffered(t, mc.sub_request(body, stream=False), f"step-{i}")
        info["steps"].append({"step": i, **res.summary()})
        if not res.ok:
            if res.error is not None:
                raise step_failed(f"Pipeline step {i} ({name}) failed", res.error)
            empty = GatewayError(res.reason, code="pipeline_step_empty", status=502)
            empty.type = "api_error"
            raise step_failed(f"Pipeline step {i} ({name}) failed", empty)
        previous = res.text
    raise AssertionError("unreachable: the last step returns")


def validate_pipeline(combo: dict[str, Any]) -> list[tuple[str, str]]:
    """``(param, message)`` per problem: no steps, a step prompt that is not a string of ≤ 20,000
    characters, a malformed ``agenticOrchestration`` (``maxToolRounds`` outside 1–32, not two steps)."""
    targets = list(combo.get("targets") or [])
    errors: list[tuple[str, str]] = []
    if not targets:
        errors.append(("targets", "a pipeline combo needs at least one step"))
    for i, t in enumerate(targets):
        p = t.get("prompt") if isinstance(t, dict) else None
        if p is not None and (not isinstance(p, str) or len(p) > MAX_STEP_PROMPT_CHARS):
            errors.append(
                (f"targets[{i}].prompt", f"must be a string of ≤ {MAX_STEP_PROMPT_CHARS} characters")
            )
    ag = (combo.get("config") or {}).get("agenticOrchestration")
    if ag is None:
        return errors
    if not isinstance(ag, dict):
        return [*errors, ("config.agenticOrchestration", "must be an object")]
    rounds = ag.get("maxToolRounds")
    if rounds is not None and (
        isinstance(rounds, bool)
        or not isinstance(rounds, int)
        or not MIN_TOOL_ROUNDS <= rounds <= MAX_TOOL_ROUNDS
    ):
        errors.append(
            (
                "config.agenticOrchestration.maxToolRounds",
                f"must be an integer {MIN_TOOL_ROUNDS}–{MAX_TOOL_ROUNDS}",
            )
        )
    if ag.get("enabled") and len(targets) != 2:
        errors.append(("targets", "agentic orchestration needs exactly two steps (planner, executor)"))
    return errors
