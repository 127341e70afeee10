"""Canonical response/stream → OpenAI Chat Completions (API-1, API-6, RESIL-9): the response is the
canonical object itself, the stream is ``data:`` SSE ending in ``[DONE]``, and errors are
``{"error": {"message", "type", "code", "param"}}``.
"""

from __future__ import annotations

from typing import Any

import orjson

from omniroute.errors import GatewayError
from omniroute.values import ChatRequest, Usage
from omniroute.wire._common import SSE_COMMENT, now_s

_DONE = b"data: [DONE]\n\n"


def openai_error(err: GatewayError) -> dict[str, Any]:
    """``{"error": {"message", "type", "code", "param"}}`` plus top-level extras (RESIL-7 diagnostics)."""
    return {
        "error": {"message": err.message, "type": err.type, "code": err.code, "param": err.param},
        **err.extra,
    }


class OpenAIStreamEncoder:
    """Canonical chunks → OpenAI SSE. Usage is moved into exactly one final ``choices: []`` chunk when
    the client set ``stream_options.include_usage`` and stripped otherwise (API-1)."""

    __slots__ = ("created", "id", "include_usage", "model")

    def __init__(self, include_usage: bool) -> None:
        self.include_usage = include_usage
        self.id = ""
        self.model = ""
        self.created = 0

    def keepalive(self) -> bytes:
        """Bytes that keep a stream alive before its first content: an SSE comment line."""
        return SSE_COMMENT

    def start(self) -> bytes:
        return b""

    def chunk(self, ch: dict[str, Any]) -> bytes:
        if not self.id:
            self.id = ch.get("id") or ""
            self.model = ch.get("model") or ""
            self.created = ch.get("created") or now_s()
        if "usage" in ch:
            if not ch.get("choices"):
                return b""
            ch = {k: v for k, v in ch.items() if k != "usage"}
        return b"data: " + orjson.dumps(ch) + b"\n\n"

    def end(self, usage: Usage | None) -> bytes:
        if not self.include_usage:
            return _DONE
        final = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": (usage or Usage()).to_openai(),
        }
        return b"data: " + orjson.dumps(final) + b"\n\n" + _DONE

    def error(self, err: GatewayError) -> bytes:
        """A non-``stop`` finish and an error event: a truncated answer is never complete (RESIL-9)."""
        finish = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}],
        }
        return (
            b"data: " + orjson.dumps(finish) + b"\n\n" + b"data: " + orjson.dumps(openai_error(err)) + b"\n\n"
        )


class OpenAISurface:
    """The OpenAI Chat Completions wire format as a client surface."""

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return openai_error(err)

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]:
        return response

    def encoder(self, req: ChatRequest) -> OpenAIStreamEncoder:
        return OpenAIStreamEncoder(req.include_usage)


SURFACE = OpenAISurface()
