"""OpenAI Chat Completions / Embeddings shapes for the fake provider (pure: no I/O).

Shapes follow the OpenAI API reference: ``chat.completion``, ``chat.completion.chunk`` (a role chunk
first, tool-call deltas carrying ``id``/``type``/``function.name`` once and then only ``index`` and
argument fragments, a final usage chunk with ``choices: []`` when ``stream_options.include_usage``
is set, then ``data: [DONE]``), the ``{"error": {message, type, param, code}}`` error body, and the
``list`` of ``embedding`` objects (float arrays, or base64 little-endian float32 — the SDK's default).
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from collections.abc import Mapping
from typing import Any

from omniroute.testing.faults import (
    Event,
    Finish,
    Prompt,
    Reply,
    count_words,
    positive_int,
    text_of,
    tool_result_after,
    turn_texts,
)

EMBEDDING_DIMENSIONS = 8
_FINISH: dict[Finish, str] = {"stop": "stop", "length": "length", "tool": "tool_calls"}
_ERRORS: dict[int, tuple[str, str | None]] = {
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


class OpenAIRenderer:
    """Reads and writes the OpenAI Chat Completions wire format."""

    def read(self, body: Mapping[str, Any], model: str, stream: bool) -> Prompt:
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        texts = [text_of(message.get("content")) for message in messages if isinstance(message, dict)]
        last_user = next(
            (
                text_of(message.get("content"))
                for message in reversed(messages)
                if isinstance(message, dict) and message.get("role") == "user"
            ),
            "",
        )
        tools = body.get("tools")
        names = tuple(
            str(tool["function"]["name"])
            for tool in (tools if isinstance(tools, list) else [])
            if isinstance(tool, dict)
            and isinstance(tool.get("function"), dict)
            and isinstance(tool["function"].get("name"), str)
        )
        options = body.get("stream_options")
        return Prompt(
            model=model,
            words=max(1, sum(count_words(text) for text in texts)),
            last_user_text=last_user,
            tool_names=names,
            stream=body.get("stream") is True,
            include_usage=isinstance(options, dict) and options.get("include_usage") is True,
            max_tokens=positive_int(body.get("max_completion_tokens"))
            or positive_int(body.get("max_tokens")),
            tool_result=tool_result_after(messages, "assistant", _tool_message_text),
            prefill=_turns(messages)[0],
            cut_text=_turns(messages)[1],
        )

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = _ERRORS.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def context_error(self, limit: int, tokens: int) -> dict[str, Any]:
        message = (
            f"This model's maximum context length is {limit} tokens. However, your messages resulted "
            f"in {tokens} tokens. Please reduce the length of the messages."
        )
        return {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }

    def error_event(self, message: str) -> Event:
        return Event({"error": {"message": message, "type": "server_error", "param": None, "code": None}})

    def completion(self, reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{call.id}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in reply.tool_calls
            ]
        body: dict[str, Any] = {
            "id": f"chatcmpl-{reply.id}",
            "object": "chat.completion",
            "created": reply.created,
            "model": reply.model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": _FINISH[reply.finish]}
            ],
        }
        if reply.usage != "missing":
            body["usage"] = _usage(reply)
        return body

    def stream(self, reply: Reply) -> list[Event]:
        include_usage = reply.include_usage and reply.usage == "late"
        early_usage = _usage(reply) if reply.usage == "early" else None

        def chunk(delta: dict[str, Any], *, finish: str | None = None, usage: Any = None) -> dict[str, Any]:
            body: dict[str, Any] = {
                "id": f"chatcmpl-{reply.id}",
                "object": "chat.completion.chunk",
                "created": reply.created,
                "model": reply.model,
                "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if include_usage or usage is not None:
                body["usage"] = usage
            return body

        events = [Event(chunk({"role": "assistant", "content": ""}, usage=early_usage))]
        if reply.reasoning:
            events.append(Event(chunk({"reasoning_content": reply.reasoning}), content=True))
        starts = [
            {
                "index": index,
                "id": f"call_{call.id}",
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            for index, call in enumerate(reply.tool_calls)
        ]
        pieces = reply.text_chunks()
        for number, piece in enumerate(pieces, start=1):
            delta: dict[str, Any] = {"content": piece}
            if number == len(pieces) and starts:  # text-and-tool: the tool call starts in the same delta
                delta["tool_calls"] = [starts.pop(0)]
            events.append(Event(chunk(delta), content=True))
        for index, call in enumerate(reply.tool_calls):
            if starts and starts[0]["index"] == index:
                events.append(Event(chunk({"tool_calls": [starts.pop(0)]}), content=True))
            for fragment in reply.argument_chunks(call):
                delta = {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
                events.append(Event(chunk(delta), content=True))
        events.append(Event(chunk({}, finish=_FINISH[reply.finish])))
        if include_usage:
            final = chunk({}, usage=_usage(reply))
            final["choices"] = []
            events.append(Event(final))
        events.append(Event("[DONE]", terminal=True))
        return events

    def embeddings(self, body: Mapping[str, Any], model: str) -> dict[str, Any]:
        """Deterministic unit vectors (``dimensions`` long, default 8) derived from each input's hash."""
        inputs = _embedding_inputs(body.get("input"))
        dimensions = positive_int(body.get("dimensions")) or EMBEDDING_DIMENSIONS
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(inputs):
            vector = _vector(text, dimensions)
            encoded: Any = (
                base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode() if as_base64 else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = max(1, sum(count_words(text) for text in inputs))
        return {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _tool_message_text(message: object) -> str | None:
    """The content of a ``role: tool`` message, ``None`` for other messages."""
    if isinstance(message, dict) and message.get("role") == "tool":
        return text_of(message.get("content"))
    return None


def _usage(reply: Reply) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.total_tokens,
    }
    if reply.reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": count_words(reply.reasoning)}
    written = reply.cache_write + reply.cache_write_1h
    details = {"cached_tokens": reply.cache_read, "cache_write_tokens": written}
    if any(details.values()):
        usage["prompt_tokens_details"] = details
    return usage


def _embedding_inputs(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        if value and all(isinstance(item, int) for item in value):
            return [" ".join(str(item) for item in value)]
        return [
            item
            if isinstance(item, str)
            else " ".join(map(str, item))
            if isinstance(item, list)
            else str(item)
            for item in value
        ]
    return [""]


def _vector(text: str, dimensions: int) -> list[float]:
    digest = hashlib.shake_256(text.encode()).digest(4 * dimensions)
    raw = [int.from_bytes(digest[i : i + 4], "little") / 2**31 - 1.0 for i in range(0, len(digest), 4)]
    norm = math.sqrt(sum(value * value for value in raw)) or 1.0
    return [value / norm for value in raw]


def _turns(messages: list[Any]) -> tuple[str | None, str | None]:
    """``prefill`` and ``cut_text`` of the conversation (`omniroute.testing.faults.turn_texts`)."""
    return turn_texts(
        messages,
        lambda m: m.get("role") if isinstance(m, dict) else None,
        lambda m: text_of(m.get("content")) if isinstance(m, dict) else "",
    )
