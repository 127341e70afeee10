"""What a strict real provider refuses, for the fake's ``strict`` directive (pure: no I/O).

`violation` returns the first rule a request body breaks as the message of a 400
``invalid_request_error`` (``None`` when it breaks none). The rules are the ones real providers enforce
on the multi-turn, tool-using conversations coding agents replay:

| format | rule | source and wording |
|---|---|---|
| OpenAI | a message has only the documented keys | strict OpenAI-compatible servers (vLLM, pydantic ``extra="forbid"``): ``messages[I].KEY: Extra inputs are not permitted`` |
| OpenAI | a tool-call id (``tool_calls[].id``, ``tool_call_id``) is at most 40 characters | OpenAI: ``Invalid 'messages[I].tool_calls[J].id': string too long. Expected a string with maximum length 40, but got a string with length N instead.`` |
| Anthropic | ``tool_use.id`` / ``tool_use_id`` match ``^[a-zA-Z0-9_-]+$`` | Anthropic: ``messages.I.content.J.id: String should match pattern '^[a-zA-Z0-9_-]+$'`` |
| Anthropic | a ``thinking`` block's ``signature`` is the one issued for its text | Anthropic: ``messages.I.content.J: Invalid `signature` in `thinking` block`` |
| Anthropic | with thinking on, the final assistant message that calls tools starts with a thinking block | Anthropic's extended-thinking rule: ``messages.I.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block …`` |
| Gemini | in the current turn, each model step's first ``functionCall`` carries its ``thoughtSignature`` (the one issued for that call, or one of the documented stand-ins for calls from another model) | Gemini 3 thought signatures: ``Function call is missing a thought_signature in functionCall parts. …`` / ``Corrupted thought signature.`` |

The fake issues the signatures these rules check (`omniroute.testing.faults.signature_for`).
"""  # noqa: E501

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from omniroute.testing._gemini import call_signature
from omniroute.testing.faults import signature_for

OPENAI_TOOL_ID_MAX = 40  # OpenAI's documented limit on tool_calls[].id
OPENAI_MESSAGE_KEYS = frozenset(
    {"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio", "function_call"}
)
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_THINKING_BLOCKS = ("thinking", "redacted_thinking")
GEMINI_DUMMY_SIGNATURES = frozenset(
    {"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"}
)
"""The stand-in ``thoughtSignature`` values Gemini documents for function calls from other models."""


def violation(fmt: str, body: Mapping[str, Any]) -> str | None:
    """The message of the first strict rule ``body`` (a request of wire format ``fmt``) breaks."""
    check: Callable[[Mapping[str, Any]], str | None] = {
        "openai": _openai,
        "anthropic": _anthropic,
        "gemini": _gemini,
    }[fmt]
    return check(body)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _openai(body: Mapping[str, Any]) -> str | None:
    for i, message in enumerate(_list(body.get("messages"))):
        if not isinstance(message, dict):
            continue
        for key in message:
            if key not in OPENAI_MESSAGE_KEYS:
                return f"messages[{i}].{key}: Extra inputs are not permitted"
        ids = [(f"messages[{i}].tool_call_id", message.get("tool_call_id"))]
        ids += [
            (f"messages[{i}].tool_calls[{j}].id", call.get("id"))
            for j, call in enumerate(_list(message.get("tool_calls")))
            if isinstance(call, dict)
        ]
        for where, value in ids:
            if isinstance(value, str) and len(value) > OPENAI_TOOL_ID_MAX:
                return (
                    f"Invalid '{where}': string too long. Expected a string with maximum length "
                    f"{OPENAI_TOOL_ID_MAX}, but got a string with length {len(value)} instead."
                )
    return None


def _anthropic(body: Mapping[str, Any]) -> str | None:
    messages = _list(body.get("messages"))
    for i, message in enumerate(messages):
        for j, block in enumerate(_list(message.get("content") if isinstance(message, dict) else None)):
            if not isinstance(block, dict):
                continue
            for key in ("id", "tool_use_id"):
                value = block.get(key) if block.get("type") in ("tool_use", "tool_result") else None
                if isinstance(value, str) and not _ANTHROPIC_ID.match(value):
                    return f"messages.{i}.content.{j}.{key}: String should match pattern '^[a-zA-Z0-9_-]+$'"
            if block.get("type") == "thinking" and block.get("signature") != signature_for(
                str(block.get("thinking", ""))
            ):
                return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
    thinking = body.get("thinking")
    if not (isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")):
        return None
    last = max((i for i, m in enumerate(messages) if _role(m) == "assistant"), default=None)
    if last is None:
        return None
    blocks = [b for b in _list(messages[last].get("content")) if isinstance(b, dict)]
    if any(b.get("type") == "tool_use" for b in blocks) and (
        not blocks or blocks[0].get("type") not in _THINKING_BLOCKS
    ):
        found = blocks[0].get("type") if blocks else "text"
        return (
            f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            f"`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
            "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
            "recommend you include thinking blocks from previous turns. To avoid this requirement, "
            "disable `thinking`."
        )
    return None


def _role(message: object) -> object:
    return message.get("role") if isinstance(message, dict) else None


def _gemini(body: Mapping[str, Any]) -> str | None:
    contents = _list(body.get("contents"))
    # The current turn starts after the last user content that is not only function responses.
    start = 0
    for i, content in enumerate(contents):
        parts = _list(content.get("parts") if isinstance(content, dict) else None)
        if _role(content) in ("user", None) and any(
            isinstance(p, dict) and "functionResponse" not in p for p in parts
        ):
            start = i
    for content in contents[start:]:
        if _role(content) != "model":
            continue
        calls = [p for p in _list(content.get("parts")) if isinstance(p, dict) and "functionCall" in p]
        if not calls:
            continue
        first = calls[0]
        call = first["functionCall"] if isinstance(first["functionCall"], dict) else {}
        signature = first.get("thoughtSignature")
        if signature is None:
            return (
                "Function call is missing a thought_signature in functionCall parts. This is required "
                "for tools to work correctly, and missing thought_signature may lead to degraded model "
                f"performance. Additional data, function call `default_api:{call.get('name')}` , "
                "position 1. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures "
                "for more details."
            )
        if signature != call_signature(call) and signature not in GEMINI_DUMMY_SIGNATURES:
            return "Corrupted thought signature."
    return None
