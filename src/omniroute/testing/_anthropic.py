"""Anthropic Messages shapes for the fake provider (pure: no I/O).

Shapes follow Anthropic's Messages API reference: the ``message`` object, the streaming sequence
``message_start`` → per block ``content_block_start`` / ``content_block_delta``… / ``content_block_stop``
(a ``ping`` after the first block start) → ``message_delta`` (``stop_reason``, ``usage.output_tokens``)
→ ``message_stop``; thinking blocks stream ``thinking_delta`` then ``signature_delta``; tool_use blocks
start with ``input: {}`` and stream ``input_json_delta`` pieces; errors are
``{"type": "error", "error": {type, message}}`` with the documented per-status types.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from omniroute.testing.faults import (
    Event,
    Finish,
    Prompt,
    Reply,
    count_words,
    positive_int,
    signature_for,
    text_of,
    tool_result_after,
    turn_texts,
)

_STOP: dict[Finish, str] = {"stop": "end_turn", "length": "max_tokens", "tool": "tool_use"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


class AnthropicRenderer:
    """Reads and writes the Anthropic Messages wire format."""

    def read(self, body: Mapping[str, Any], model: str, stream: bool) -> Prompt:
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        texts = [text_of(body.get("system"))]
        texts += [text_of(message.get("content")) for message in messages if isinstance(message, dict)]
        last_user = next(
            (
                text_of(message.get("content"))
                for message in reversed(messages)
                if isinstance(message, dict) and message.get("role") == "user"
            ),
            "",
        )
        thinking = body.get("thinking")
        tools = body.get("tools")
        names = tuple(
            tool["name"]
            for tool in (tools if isinstance(tools, list) else [])
            if isinstance(tool, dict) and isinstance(tool.get("name"), str)
        )
        return Prompt(
            model=model,
            words=max(1, sum(count_words(text) for text in texts)),
            last_user_text=last_user,
            tool_names=names,
            stream=body.get("stream") is True,
            max_tokens=positive_int(body.get("max_tokens")),
            tool_result=tool_result_after(messages, "assistant", _tool_results),
            thinking=isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"),
            prefill=_turns(messages)[0],
            cut_text=_turns(messages)[1],
        )

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": kind, "message": message}}

    def context_error(self, limit: int, tokens: int) -> dict[str, Any]:
        return self.error_body(400, f"prompt is too long: {tokens} tokens > {limit} maximum")

    def error_event(self, message: str) -> Event:
        return Event(
            {"type": "error", "error": {"type": "overloaded_error", "message": message}}, name="error"
        )

    def completion(self, reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            signature = signature_for(reply.reasoning)
            content.append({"type": "thinking", "thinking": reply.reasoning, "signature": signature})
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        content += [
            {
                "type": "tool_use",
                "id": f"toolu_{call.id}",
                "name": call.name,
                "input": json.loads(call.arguments),
            }
            for call in reply.tool_calls
        ]
        body: dict[str, Any] = {
            "id": f"msg_{reply.id}",
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": content,
            "stop_reason": _STOP[reply.finish],
            "stop_sequence": None,
        }
        if reply.usage != "missing":
            body["usage"] = _usage(reply, reply.completion_tokens)
        return body

    def stream(self, reply: Reply) -> list[Event]:
        message: dict[str, Any] = {
            "id": f"msg_{reply.id}",
            "type": "message",
            "role": "assistant",
            "model": reply.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
        }
        if reply.usage != "missing":
            early = reply.usage == "early"
            message["usage"] = _usage(reply, reply.completion_tokens if early else 1)
        events = [Event({"type": "message_start", "message": message}, name="message_start")]
        blocks: list[tuple[dict[str, Any], list[tuple[dict[str, Any], bool]]]] = []
        if reply.reasoning:
            thinking = [({"type": "thinking_delta", "thinking": reply.reasoning}, True)]
            thinking.append(({"type": "signature_delta", "signature": signature_for(reply.reasoning)}, False))
            blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, thinking))
        if reply.text:
            texts = [({"type": "text_delta", "text": piece}, True) for piece in reply.text_chunks()]
            blocks.append(({"type": "text", "text": ""}, texts))
        for call in reply.tool_calls:
            start = {"type": "tool_use", "id": f"toolu_{call.id}", "name": call.name, "input": {}}
            pieces = [
                ({"type": "input_json_delta", "partial_json": piece}, True)
                for piece in reply.argument_chunks(call)
            ]
            blocks.append((start, pieces))
        for index, (start, deltas) in enumerate(blocks):
            # A tool_use start already names the call, so it is content (RESIL-9); an empty text or
            # thinking block start is not.
            events.append(
                Event(
                    {"type": "content_block_start", "index": index, "content_block": start},
                    name="content_block_start",
                    content=start["type"] == "tool_use",
                )
            )
            if index == 0:
                events.append(Event({"type": "ping"}, name="ping"))
            events += [
                Event(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    name="content_block_delta",
                    content=is_content,
                )
                for delta, is_content in deltas
            ]
            events.append(Event({"type": "content_block_stop", "index": index}, name="content_block_stop"))
        final: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": _STOP[reply.finish], "stop_sequence": None},
        }
        if reply.usage != "missing":
            final["usage"] = {"output_tokens": reply.completion_tokens}
        events.append(Event(final, name="message_delta"))
        events.append(Event({"type": "message_stop"}, name="message_stop", terminal=True))
        return events


def _tool_results(message: object) -> str | None:
    """The text of a user message's ``tool_result`` blocks, ``None`` when it has none."""
    content = message.get("content") if isinstance(message, dict) else None
    blocks = (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(content, list)
        else []
    )
    return " ".join(text_of(block.get("content")) for block in blocks) if blocks else None


def _usage(reply: Reply, output_tokens: int) -> dict[str, Any]:
    # Anthropic's input_tokens leaves out cache reads and writes (prompt-caching docs).
    written = reply.cache_write + reply.cache_write_1h
    usage: dict[str, Any] = {
        "input_tokens": reply.prompt_tokens - reply.cache_read - written,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": reply.cache_read,
    }
    if written:
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": reply.cache_write,
            "ephemeral_1h_input_tokens": reply.cache_write_1h,
        }
    return usage


def _turns(messages: list[Any]) -> tuple[str | None, str | None]:
    """``prefill`` and ``cut_text`` of the conversation (`omniroute.testing.faults.turn_texts`)."""
    return turn_texts(
        messages,
        lambda m: m.get("role") if isinstance(m, dict) else None,
        lambda m: text_of(m.get("content")) if isinstance(m, dict) else "",
    )
