"""Canonical response/stream → Anthropic Messages (API-3, API-6, RESIL-9): the ``message`` object, the
SSE event sequence and the error shape.

Stream order (https://docs.anthropic.com/en/api/messages-streaming): ``message_start``, then per
content block ``content_block_start`` → ``content_block_delta``… → ``content_block_stop`` (blocks in
order, indexes from 0, no empty leading text block), then ``message_delta`` (``stop_reason`` +
usage) and ``message_stop``. A failure after commit ends the stream with ``event: error`` and no
``message_stop``, so a truncated answer is never presented as complete. Pass-through chunks
(carrying :data:`~omniroute.wire._common.NATIVE`) are forwarded byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from omniroute.errors import GatewayError
from omniroute.values import ChatRequest, Usage
from omniroute.wire._common import NATIVE, new_id, reasoning_text, sse, text_of
from omniroute.wire.anthropic.blocks import tool_use_block
from omniroute.wire.reasoning import anthropic_block

STOP_REASONS: dict[str, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
"""Canonical ``finish_reason`` → Anthropic ``stop_reason``."""

ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""HTTP status → Anthropic ``error.type`` (https://docs.anthropic.com/en/api/errors); other 5xx →
``api_error``, other 4xx → ``invalid_request_error``."""


def error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def error_body(err: GatewayError) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}`` (+ top-level extras such as RESIL-7
    ``diagnostics``)."""
    return {"type": "error", "error": {"type": error_type(err.status), "message": err.message}, **err.extra}


def message_id(cid: Any) -> str:
    """A ``msg_…`` id derived from a canonical id."""
    if isinstance(cid, str) and cid.startswith("msg_"):
        return cid
    if isinstance(cid, str) and cid:
        return "msg_" + cid.removeprefix("chatcmpl-")
    return new_id("msg_")


def anthropic_usage(u: Usage) -> dict[str, Any]:
    """Canonical usage → Anthropic ``usage``: ``input_tokens`` excludes cache reads
    (``cache_read_input_tokens``) and writes (``cache_creation_input_tokens``, split by lifetime in
    ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens`` when there are
    any; Anthropic prompt-caching docs)."""
    written = u.cache_write_tokens
    out: dict[str, Any] = {
        "input_tokens": max(u.prompt_tokens - u.cached_tokens - written, 0),
        "output_tokens": u.completion_tokens,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": u.cached_tokens,
    }
    if written:
        out["cache_creation"] = {
            "ephemeral_5m_input_tokens": max(written - u.cache_write_1h_tokens, 0),
            "ephemeral_1h_input_tokens": u.cache_write_1h_tokens,
        }
    return out


def stop_reason(finish: Any, had_tools: bool) -> str:
    reason = STOP_REASONS.get(str(finish), "end_turn") if finish else "end_turn"
    return "tool_use" if reason == "end_turn" and had_tools else reason


def render_message(resp: dict[str, Any]) -> dict[str, Any]:
    """Canonical ``chat.completion`` → Anthropic ``message`` (first choice).

    ``thinking_blocks`` (or ``reasoning_content``) → thinking blocks, text → one text block (none when
    empty), ``tool_calls`` → ``tool_use`` blocks with parsed ``input``."""
    choices = resp.get("choices") or [{}]
    choice = choices[0]
    msg = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    reasoning = reasoning_text(msg)
    if msg.get("thinking_blocks"):
        content += [anthropic_block(b) for b in msg["thinking_blocks"] if isinstance(b, dict)]
    elif reasoning:
        content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    text = text_of(msg.get("content"))
    if text:
        content.append({"type": "text", "text": text})
    calls = msg.get("tool_calls") or []
    content += [tool_use_block(tc) for tc in calls]
    return {
        "id": message_id(resp.get("id")),
        "type": "message",
        "role": "assistant",
        "model": resp.get("model") or "",
        "content": content,
        "stop_reason": stop_reason(choice.get("finish_reason"), bool(calls)),
        "stop_sequence": None,
        "usage": anthropic_usage(Usage.from_openai(resp.get("usage")) or Usage()),
    }


class AnthropicStreamEncoder:
    """Canonical chunks → Anthropic SSE events (stateful; one per response).

    ``message_start.usage`` carries the upstream's numbers when its first chunk has them (an
    Anthropic-format upstream); otherwise (OpenAI- and Gemini-format upstreams report usage only at
    the end) ``input_tokens`` is the gateway's estimate from ``prompt_estimate`` (≈ characters / 4),
    and ``message_delta.usage`` at the end carries the upstream's true numbers, cache reads and writes
    included (docs/CLIENTS.md).

    Blocks open lazily on the first non-empty delta of their kind (thinking, text, or one tool_use per
    tool-call index, opened with its ``id`` and ``name``; argument fragments become
    ``input_json_delta``s), so no empty block is ever sent. Within one chunk reasoning, then text,
    then tool calls are emitted, so a chunk carrying text and a tool-call start yields both blocks.
    """

    __slots__ = (
        "block",
        "estimate",
        "finish",
        "id",
        "kind",
        "model",
        "native",
        "nblocks",
        "started",
        "stopped",
        "tools",
        "usage",
    )

    def __init__(self, model: str = "", prompt_estimate: Callable[[], int] | None = None) -> None:
        self.estimate = prompt_estimate
        self.id = ""
        self.model = model
        self.started = False
        self.native = False
        self.stopped = False
        self.block = -1
        self.kind = ""
        self.nblocks = 0
        self.tools: dict[int, int] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None

    def keepalive(self) -> bytes:
        """Bytes that keep a stream alive before its first content: Anthropic's ``ping`` event."""
        return sse("ping", {"type": "ping"})

    def start(self) -> bytes:
        return b""

    def _message_start(self, ch: dict[str, Any]) -> bytes:
        self.started = True
        self.id = message_id(ch.get("id"))
        self.model = ch.get("model") or self.model
        start = Usage.from_openai(ch.get("usage"))
        if start is None:
            start = Usage(prompt_tokens=self.estimate() if self.estimate is not None else 0)
        usage = anthropic_usage(replace(start, completion_tokens=0))
        return sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": self.id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )

    def _close(self) -> bytes:
        if self.block < 0:
            return b""
        idx, self.block, self.kind = self.block, -1, ""
        return sse("content_block_stop", {"type": "content_block_stop", "index": idx})

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self.block, self.kind = self.nblocks, kind
        self.nblocks += 1
        return out + sse(
            "content_block_start",
            {"type": "content_block_start", "index": self.block, "content_block": block},
        )

    def _delta(self, idx: int, delta: dict[str, Any]) -> bytes:
        return sse("content_block_delta", {"type": "content_block_delta", "index": idx, "delta": delta})

    def chunk(self, ch: dict[str, Any]) -> bytes:
        native = ch.get(NATIVE)
        if native is not None:
            self.native = self.started = True
            if native.startswith(b"event: message_stop"):
                self.stopped = True
            return bytes(native)
        out = b"" if self.started else self._message_start(ch)
        if ch.get("usage"):
            self.usage = ch["usage"]
        for c in ch.get("choices") or ():
            if c.get("index", 0) != 0:
                continue
            out += self._choice(c)
        return out

    def _thinking_blocks(self, blocks: Any) -> bytes:
        """Complete thinking blocks (``delta.thinking_blocks``): the open thinking block gets its
        ``signature_delta`` and closes; a block that was not streamed as text is sent whole."""
        out = b""
        for b in blocks if isinstance(blocks, list) else ():
            if not isinstance(b, dict):
                continue
            block = anthropic_block(b)
            if block["type"] == "redacted_thinking":
                out += self._open("redacted_thinking", block) + self._close()
                continue
            if self.kind != "thinking":
                out += self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
                if block["thinking"]:
                    out += self._delta(self.block, {"type": "thinking_delta", "thinking": block["thinking"]})
            if block.get("signature"):
                out += self._delta(self.block, {"type": "signature_delta", "signature": block["signature"]})
            out += self._close()
        return out

    def _choice(self, c: dict[str, Any]) -> bytes:
        out = b""
        d = c.get("delta") or {}
        reasoning = reasoning_text(d)
        if reasoning:
            if self.kind != "thinking":
                out += self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            out += self._delta(self.block, {"type": "thinking_delta", "thinking": reasoning})
        if d.get("thinking_blocks"):
            out += self._thinking_blocks(d["thinking_blocks"])
        if d.get("content"):
            if self.kind != "text":
                out += self._open("text", {"type": "text", "text": ""})
            out += self._delta(self.block, {"type": "text_delta", "text": d["content"]})
        for pos, tc in enumerate(d.get("tool_calls") or ()):
            ti = tc.get("index", pos)
            fn = tc.get("function") or {}
            if ti not in self.tools:
                out += self._open(
                    "tool_use",
                    {
                        "type": "tool_use",
                        "id": tc.get("id") or new_id("toolu_"),
                        "name": fn.get("name") or "",
                        "input": {},
                    },
                )
                self.tools[ti] = self.block
            if fn.get("arguments"):
                out += self._delta(
                    self.tools[ti], {"type": "input_json_delta", "partial_json": fn["arguments"]}
                )
        if c.get("finish_reason"):
            self.finish = c["finish_reason"]
        return out

    def end(self, usage: Usage | None) -> bytes:
        if self.native:
            return b"" if self.stopped else sse("message_stop", {"type": "message_stop"})
        out = b"" if self.started else self._message_start({})
        out += self._close()
        final = usage if usage is not None else Usage.from_openai(self.usage) or Usage()
        out += sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(self.finish, bool(self.tools)), "stop_sequence": None},
                "usage": anthropic_usage(final),
            },
        )
        return out + sse("message_stop", {"type": "message_stop"})

    def error(self, err: GatewayError) -> bytes:
        out = b"" if self.started else self._message_start({})
        return out + sse(
            "error", {"type": "error", "error": {"type": error_type(err.status), "message": err.message}}
        )


class AnthropicSurface:
    """The Anthropic Messages wire format as a client surface."""

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return error_body(err)

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]:
        return render_message(response)

    def encoder(self, req: ChatRequest) -> AnthropicStreamEncoder:
        return AnthropicStreamEncoder(req.model, lambda: req.prompt_estimate)


SURFACE = AnthropicSurface()
