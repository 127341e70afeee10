"""Anthropic content blocks ↔ canonical assistant messages, one conversion per direction, shared by the
client side (inbound requests, rendered responses) and the upstream adapter (requests, responses).

Blocks follow Anthropic's Messages API reference (https://docs.anthropic.com/en/api/messages):
``text``, ``thinking`` (with its ``signature``), ``redacted_thinking`` and ``tool_use`` (``id``,
``name``, ``input`` object). The canonical assistant message carries the text in ``content``, tool
calls in ``tool_calls`` (arguments as JSON text), the reasoning text in ``reasoning_content`` and the
thinking blocks themselves in ``thinking_blocks`` (signatures kept, so a conversation can be replayed
to Anthropic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from omniroute.wire._common import dumps, loads_object, new_id


def assistant_message(blocks: Iterable[Any]) -> dict[str, Any]:
    """Anthropic assistant content blocks → a canonical assistant message: text blocks → ``content``
    (``None`` when there are only tool calls), ``tool_use`` → ``tool_calls``, ``thinking`` →
    ``reasoning_content`` + ``thinking_blocks``, ``redacted_thinking`` → ``thinking_blocks``; other
    block types have no canonical form and are dropped."""
    texts: list[str] = []
    reasoning: list[str] = []
    thinking: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for b in blocks:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text":
            texts.append(str(b.get("text") or ""))
        elif kind == "thinking":
            reasoning.append(str(b.get("thinking") or ""))
            thinking.append(
                {
                    "type": "thinking",
                    "thinking": b.get("thinking") or "",
                    "signature": b.get("signature") or "",
                }
            )
        elif kind == "redacted_thinking":
            thinking.append(dict(b))
        elif kind == "tool_use":
            calls.append(
                {
                    "id": b.get("id") or new_id("toolu_"),
                    "type": "function",
                    "function": {"name": b.get("name") or "", "arguments": dumps(b.get("input") or {})},
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if thinking:
        message["thinking_blocks"] = thinking
    return message


def tool_use_block(tool_call: Mapping[str, Any]) -> dict[str, Any]:
    """A canonical tool call → a ``tool_use`` block (``input`` parsed from the JSON arguments)."""
    fn = tool_call.get("function") or {}
    return {
        "type": "tool_use",
        "id": tool_call.get("id") or new_id("toolu_"),
        "name": fn.get("name") or "",
        "input": loads_object(fn.get("arguments")),
    }
