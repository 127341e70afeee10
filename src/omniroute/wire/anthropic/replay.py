"""An Anthropic client's own body made safe for an Anthropic upstream (same-format pass-through).

Agents replay whole conversations, and after a model switch those hold what another family produced:
thinking blocks whose signature Anthropic did not issue (reasoning shown from a Gemini or
OpenAI-format upstream, see :mod:`omniroute.wire.reasoning`) and tool-call ids carrying a Gemini
thought signature. Anthropic refuses both ("Invalid `signature` in `thinking` block"; ids must match
``^[a-zA-Z0-9_-]+$``), and with thinking on it refuses a final tool-using assistant turn that does not
start with its signed thinking. :func:`native_for_upstream` drops the unverifiable blocks, maps the
ids (:func:`~omniroute.wire.tool_ids.upstream_tool_id`) and turns thinking off for that request
when the last tool-using turn has no signed thinking left (Anthropic extended-thinking guide: "To
avoid this requirement, disable thinking").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omniroute.wire.reasoning import ANTHROPIC, THINKING_TYPES, block_family
from omniroute.wire.tool_ids import upstream_tool_id


def unsigned_tool_turn(messages: Any) -> bool:
    """True when the last assistant turn calls a tool but does not start with a thinking block:
    with thinking on, Anthropic requires that turn to start with its signed thinking ("Expected
    `thinking` or `redacted_thinking`, but found `tool_use`"; extended-thinking guide, tool use)."""
    last = next(
        (m for m in reversed(messages or ()) if isinstance(m, dict) and m.get("role") == "assistant"), None
    )
    blocks = last.get("content") if last is not None else None
    if not isinstance(blocks, list) or not any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks
    ):
        return False
    first = blocks[0]
    return not (isinstance(first, dict) and first.get("type") in THINKING_TYPES)


def _block(block: Any) -> Any:
    """One content block as Anthropic accepts it: ``None`` to drop it, else the block (a copy when an
    id had to be mapped)."""
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind in THINKING_TYPES:
        return block if block_family(block) == ANTHROPIC else None
    key = "id" if kind == "tool_use" else "tool_use_id" if kind == "tool_result" else None
    if key is None or not isinstance(block.get(key), str):
        return block
    mapped = upstream_tool_id(block[key], ANTHROPIC)
    return block if mapped == block[key] else {**block, key: mapped}


def _message(m: Any) -> Any:
    content = m.get("content") if isinstance(m, dict) else None
    if not isinstance(content, list):
        return m
    blocks = [b for b in (_block(b) for b in content) if b is not None]
    if len(blocks) == len(content) and all(a is b for a, b in zip(blocks, content, strict=True)):
        return m
    return {**m, "content": blocks}


def native_for_upstream(body: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of the client's Messages ``body`` Anthropic will accept (see the module doc);
    the messages are copied only where something changed."""
    out = dict(body)
    messages = body.get("messages")
    if isinstance(messages, list):
        out["messages"] = [_message(m) for m in messages]
    thinking = out.get("thinking")
    if (
        isinstance(thinking, dict)
        and thinking.get("type") in ("enabled", "adaptive")
        and unsigned_tool_turn(out.get("messages"))
    ):
        del out["thinking"]
    return out
