"""The OpenAI surface: ``POST /v1/chat/completions`` (API-1), ``GET /v1/models`` (API-2) and the
OpenAI error shape (API-6), as plain ASGI handlers on the hot path.
"""

from __future__ import annotations

from typing import Any

import orjson

from omniroute.api.asgi import Receive, Scope, Send, header_map, parse_json_object, read_body, send_json
from omniroute.api.chat import chat_request, run_chat, send_error
from omniroute.api.validate import validate_chat_body
from omniroute.errors import GatewayError
from omniroute.gateway import Gateway
from omniroute.translate._common import SSE_COMMENT, now_s
from omniroute.values import ChatRequest, Usage

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

    name = "openai"

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return openai_error(err)

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]:
        return response

    def encoder(self, req: ChatRequest) -> OpenAIStreamEncoder:
        return OpenAIStreamEncoder(req.include_usage)


SURFACE = OpenAISurface()


async def chat_completions(gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/chat/completions`` (API-1)."""
    t0 = gw.clock.monotonic()
    headers = header_map(scope)
    req_id = gw.request_id_for(headers)
    req: ChatRequest | None = None
    try:
        key = gw.authenticate(headers)
        raw = await read_body(receive, gw.max_body_bytes, headers.get("content-length"), gw.body_deadlines)
        body = parse_json_object(raw, headers.get("content-type"))
        validate_chat_body(body, model_required="x-route-model" not in headers)
        req = chat_request(body, headers, client_format="openai", request_id=req_id, api_key=key, raw=raw)
        gw.check_key_allows(key, req.model)
    except GatewayError as err:
        err.headers.setdefault("x-request-id", req_id)
        await send_error(send, SURFACE, err)
        return
    await run_chat(gw, req, SURFACE, send, receive, t0)


def model_entry(
    mid: str, owned_by: str, context_length: int, max_output: int, **extra: Any
) -> dict[str, Any]:
    """One ``/v1/models`` item with ``context_length`` and ``max_output_tokens`` (API-2)."""
    return {
        "id": mid,
        "object": "model",
        "created": 0,
        "owned_by": owned_by,
        "context_length": context_length,
        "max_output_tokens": max_output,
        **extra,
    }


async def list_models(gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    """``GET /v1/models`` and ``GET /v1/models/{id}`` (API-2)."""
    headers = header_map(scope)
    try:
        gw.authenticate(headers)
    except GatewayError as err:
        await send_error(send, SURFACE, err)
        return
    data = gw.model_list()
    path: str = scope["path"]
    if path.rstrip("/") != "/v1/models":
        mid = path[len("/v1/models/") :]
        for m in data:
            if m["id"] == mid:
                await send_json(send, 200, m)
                return
        from omniroute.routing.resolve import not_found

        await send_error(send, SURFACE, not_found(mid))
        return
    await send_json(send, 200, {"object": "list", "data": data})
