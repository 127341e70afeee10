"""Agentic orchestration of a two-step pipeline (SPEC COMBO-6; seed 001 "Agentic pipeline mode").

``config.agenticOrchestration = {enabled: true, maxToolRounds: 8}`` (1–32) turns a pipeline
``[planner, executor]`` into a loop the client drives with its own tools:

- Every turn starts with a buffered planner decision (non-streaming, tool-less; the conversation is
  given as a text transcript). The planner answers one JSON object (:data:`DECISION_PROTOCOL`):
  ``{"action": "tool", "instruction": …}`` or ``{"action": "final", "answer": …}``.
- ``tool``: the executor is the client-facing step — the client's body (tools, ``tool_choice`` and
  stream flag kept) plus the planner's instruction as a system turn — and emits client-native tool
  calls (several independent ones may share a round).
- ``final``: the planner's answer is returned (replayed as a stream when the client streams); a
  ``final`` without an answer makes a client-facing planner call that writes it.
- A tool-result continuation is a conversation with a ``tool`` message after its last assistant turn;
  every surface translates into the canonical body first, so OpenAI ``role: tool``, Anthropic
  ``tool_result`` blocks and Responses ``function_call_output`` items all arrive in that form. Rounds
  are the assistant turns with tool calls; once ``maxToolRounds`` is reached the planner must answer
  (client-facing, the client's streaming preference kept).
- An unparseable decision is read as the planner's prose: an instruction for the executor on a fresh
  request, the final answer on a continuation (it has reviewed the results).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from omniroute.core.combo import Combo
from omniroute.errors import GatewayError
from omniroute.routing.engine import Outcome, StreamOutcome
from omniroute.routing.member_calls import (
    MultiCall,
    Target,
    step_failed,
    target_name,
)
from omniroute.routing.multicall_parts import TOOL_KEYS, toolless
from omniroute.wire._common import text_of

log = logging.getLogger("omniroute.routing")

DEFAULT_MAX_TOOL_ROUNDS = 8
MIN_TOOL_ROUNDS, MAX_TOOL_ROUNDS = 1, 32
MAX_JSON_STARTS = 64  # "{" positions tried when digging the decision object out of prose

DECISION_PROTOCOL = (
    "Reply with exactly one JSON object and nothing else, either\n"
    '{"action": "tool", "instruction": "<which tool(s) the executor must call next, with which '
    'arguments, and why; independent calls may go together>"}\n'
    "when more tool results are needed, or\n"
    '{"action": "final", "answer": "<the complete final answer to the user>"}\n'
    "when the conversation and the tool results so far are enough to answer."
)

_TOOL_ACTIONS = frozenset(
    {"tool", "tools", "tool_call", "tool_calls", "call_tool", "call_tools", "continue", "execute", "executor"}
)
_FINAL_ACTIONS = frozenset(
    {"final", "final_answer", "answer", "done", "finish", "respond", "stop", "complete"}
)


@dataclass(frozen=True, slots=True)
class AgenticSettings:
    """``config.agenticOrchestration`` of an enabled two-step pipeline."""

    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS


def agentic_settings(combo: Combo) -> AgenticSettings | None:
    """The settings when agentic orchestration applies, else ``None`` (plain pipeline). Enabled on a
    pipeline without exactly two steps logs a warning and runs the plain pipeline."""
    raw = combo.config.get("agenticOrchestration")
    if not isinstance(raw, Mapping) or not raw.get("enabled"):
        return None
    if len(combo.targets) != 2:
        log.warning(
            "combo %r: agenticOrchestration needs exactly two steps (planner, executor); "
            "running it as a plain pipeline",
            combo.name,
        )
        return None
    return AgenticSettings(max_tool_rounds=clamp_rounds(raw.get("maxToolRounds")))


def clamp_rounds(value: Any) -> int:
    """``maxToolRounds`` clamped to 1–32 (default 8 when absent or not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DEFAULT_MAX_TOOL_ROUNDS
    return max(MIN_TOOL_ROUNDS, min(MAX_TOOL_ROUNDS, int(value)))


def count_tool_rounds(messages: list[dict[str, Any]]) -> int:
    """Tool rounds so far: assistant turns that carry tool calls."""
    return sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))


def is_tool_continuation(messages: list[dict[str, Any]]) -> bool:
    """True when a ``tool`` message follows the last assistant turn (the client returns results)."""
    for m in reversed(messages):
        if m.get("role") == "tool":
            return True
        if m.get("role") == "assistant":
            return False
    return False


@dataclass(frozen=True, slots=True)
class PlannerDecision:
    """A parsed planner reply; ``action`` is ``None`` when no decision could be read."""

    action: Literal["tool", "final"] | None
    instruction: str = ""
    answer: str = ""


def parse_decision(text: str) -> PlannerDecision:
    """Read the planner's JSON decision from ``text`` robustly: the first JSON object anywhere (code
    fences and prose around it are ignored), keys case-insensitive, action synonyms accepted; an object
    with only an ``answer`` is final, with only an ``instruction`` is a tool round."""
    obj = first_json_object(text)
    if obj is None:
        return PlannerDecision(None)
    low = {str(k).lower(): v for k, v in obj.items()}
    action = str(low.get("action") or low.get("decision") or low.get("next") or "")
    action = action.strip().lower().replace("-", "_").replace(" ", "_")
    instruction = _first_str(low, "instruction", "instructions", "task", "plan")
    answer = _first_str(low, "answer", "final_answer", "response", "content")
    if action in _TOOL_ACTIONS:
        return PlannerDecision("tool", instruction, answer)
    if action in _FINAL_ACTIONS:
        return PlannerDecision("final", instruction, answer)
    if answer and not instruction:
        return PlannerDecision("final", answer=answer)
    if instruction and not answer:
        return PlannerDecision("tool", instruction)
    return PlannerDecision(None, instruction, answer)


def first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object embedded in ``text``, or ``None``."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    tried = 0
    while start != -1 and tried < MAX_JSON_STARTS:
        tried += 1
        try:
            obj, _ = decoder.raw_decode(text, start)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return obj
        start = text.find("{", start + 1)
    return None


def _first_str(d: dict[str, Any], *keys: str) -> str:
    for k in keys:
        v = d.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return ""


def transcript(messages: list[dict[str, Any]]) -> str:
    """The conversation as text for the planner (tool calls and results included)."""
    lines: list[str] = []
    for m in messages:
        role, text = m.get("role"), text_of(m.get("content"))
        if role == "tool":
            lines.append(f"Tool result [{m.get('tool_call_id') or ''}]: {text}")
        elif role == "assistant" and m.get("tool_calls"):
            calls = ", ".join(
                f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments') or ''})"
                f" [{c.get('id') or ''}]"
                for c in m["tool_calls"]
            )
            lines.append(f"Assistant{': ' + text if text else ''} (tool calls: {calls})")
        else:
            lines.append(f"{str(role or 'user').capitalize()}: {text}")
    return "\n".join(lines)


def _tool_list(body: dict[str, Any]) -> str:
    out = []
    for t in body.get("tools") or []:
        fn = (t or {}).get("function") or {}
        if fn.get("name"):
            out.append(f"- {fn['name']}: {fn.get('description') or ''}".rstrip(": "))
    return "\n".join(out) or "(the client declared no tools)"


def planner_body(body: dict[str, Any], rounds: int, max_rounds: int, *, must_answer: bool) -> dict[str, Any]:
    """The planner's request: a system directive (decision protocol, or "write the final answer") and
    the conversation as a transcript. Tool-less; the caller sets streaming."""
    head = (
        "You are the PLANNER of a planner/executor team serving the user. The executor is another model "
        "that calls the user's tools; you cannot call tools yourself. "
        f"Tool rounds used so far: {rounds} of at most {max_rounds}.\n\n"
        f"Tools the executor can call:\n{_tool_list(body)}\n\n"
    )
    if must_answer:
        directive = head + (
            "No more tool rounds are possible. Write the best final answer to the user's request from "
            "the conversation and every tool result so far. Answer the user directly: no JSON, no tool calls."
        )
    else:
        directive = (
            head
            + "Review the conversation and every tool result, then decide the next step.\n"
            + (DECISION_PROTOCOL)
        )
    messages = [
        {"role": "system", "content": directive},
        {"role": "user", "content": "Conversation so far:\n" + transcript(list(body.get("messages") or []))},
    ]
    return {**{k: v for k, v in body.items() if k not in TOOL_KEYS}, "messages": messages}


def executor_body(body: dict[str, Any], instruction: str) -> dict[str, Any]:
    """The client's body (tools, ``tool_choice``, stream kept) plus the planner's instruction as a
    system turn after the leading system messages."""
    messages = list(body.get("messages") or [])
    at = next(
        (i for i, m in enumerate(messages) if m.get("role") not in ("system", "developer")), len(messages)
    )
    messages.insert(
        at,
        {
            "role": "system",
            "content": "You are the EXECUTOR of a planner/executor team. Carry out the planner's instruction "
            "by calling the available tools; independent calls may go together in one response. Answer in "
            f"text only if no tool call is needed.\n\nPlanner's instruction: {instruction}",
        },
    )
    return {**body, "messages": messages}


async def run_agentic(
    mc: MultiCall, planner: Target, executor: Target, settings: AgenticSettings
) -> Outcome | StreamOutcome:
    """Serve one turn of an agentic pipeline (module docstring)."""
    body = mc.req.body
    messages = list(body.get("messages") or [])
    rounds, cont = count_tool_rounds(messages), is_tool_continuation(messages)
    info: dict[str, Any] = {
        "tool_rounds": rounds,
        "max_tool_rounds": settings.max_tool_rounds,
        "continuation": cont,
    }
    mc.decision.extra["agentic"] = info
    p_name, e_name = target_name(planner), target_name(executor)
    if cont and rounds >= settings.max_tool_rounds:
        info.update(planner="limit reached", client_facing="planner")
        return await _planner_answer(mc, planner, rounds, settings)
    decision_body = toolless(planner_body(body, rounds, settings.max_tool_rounds, must_answer=False))
    res = await mc.call_buffered(planner, mc.sub_request(decision_body, stream=False), "planner")
    if not res.ok:
        err = res.error or GatewayError(res.reason, code="pipeline_step_empty", status=502)
        raise step_failed(f"Pipeline step 1 ({p_name}, planner) failed", err)
    d = parse_decision(res.text)
    info["planner"] = d.action or "unparseable"
    if (d.action == "final" and d.answer) or (d.action is None and cont):
        info["client_facing"] = "planner"
        return mc.finish_buffered(res, content=d.answer or res.text)
    if d.action == "final":
        info["client_facing"] = "planner"
        return await _planner_answer(mc, planner, rounds, settings)
    info["client_facing"] = "executor"
    instruction = (
        d.instruction
        or (res.text if d.action is None else "")
        or ("Call the tools needed to make progress on the user's request.")
    )
    try:
        out = await mc.call(executor, mc.sub_request(executor_body(body, instruction), stream=mc.req.stream))
    except GatewayError as err:
        raise step_failed(f"Pipeline step 2 ({e_name}, executor) failed", err) from err
    return mc.finish(out)


async def _planner_answer(
    mc: MultiCall, planner: Target, rounds: int, settings: AgenticSettings
) -> Outcome | StreamOutcome:
    body = planner_body(mc.req.body, rounds, settings.max_tool_rounds, must_answer=True)
    try:
        out = await mc.call(planner, mc.sub_request(body, stream=mc.req.stream))
    except GatewayError as err:
        raise step_failed(f"Pipeline step 1 ({target_name(planner)}, planner) failed", err) from err
    return mc.finish(out)
