"""The Anthropic surface: ``POST /v1/messages`` (API-3; ``?beta=true`` is the same path) and
``POST /v1/messages/count_tokens``, as plain ASGI handlers on the hot path.

Auth takes ``x-api-key`` or ``Authorization: Bearer`` (API-8); ``anthropic-version`` and
``anthropic-beta`` are accepted (and forwarded to Anthropic upstreams on pass-through). The body is
validated and translated to the canonical request (:mod:`omniroute.wire.anthropic.inbound`), routed
by the shared engine through :func:`~omniroute.api.chat.run_chat`, and rendered back as an Anthropic
``message`` or event stream (:mod:`omniroute.wire.anthropic.outbound`). Every error uses Anthropic's
shape ``{"type": "error", "error": {"type", "message"}}`` with the HTTP status (API-6).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from omniroute.api.asgi import Receive, Scope, Send, header_map, parse_json_object, read_body, send_json
from omniroute.api.chat import chat_request, run_chat, send_error
from omniroute.errors import GatewayError
from omniroute.gateway import Gateway
from omniroute.routing.resolve import resolve
from omniroute.values import ChatRequest
from omniroute.wire.anthropic import inbound as anthropic_in
from omniroute.wire.anthropic.outbound import AnthropicStreamEncoder, error_body, render_message

IMAGE_TOKENS = 1600
"""Token estimate per image/document block for ``count_tokens`` (Anthropic's vision guide: about
(width × height) / 750, ~1,600 for a 1.15-megapixel image)."""

CHARS_PER_TOKEN = 4
"""The local estimate's ratio for ``count_tokens`` when the upstream cannot count."""

_SKIP_KEYS = frozenset({"type", "id", "tool_use_id", "signature", "cache_control", "media_type"})


class AnthropicSurface:
    """The Anthropic Messages wire format as a client surface."""

    name = "anthropic"

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return error_body(err)

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]:
        return render_message(response)

    def encoder(self, req: ChatRequest) -> AnthropicStreamEncoder:
        return AnthropicStreamEncoder(req.model)


SURFACE = AnthropicSurface()


async def _read(
    gw: Gateway, headers: dict[str, str], receive: Receive
) -> tuple[dict[str, Any] | None, bytes]:
    """Authenticate (``x-api-key`` or bearer, API-8) and read the body; raises GatewayError."""
    key = gw.authenticate(headers, allow_x_api_key=True)
    return key, await read_body(receive, gw.max_body_bytes, headers.get("content-length"), gw.body_deadlines)


async def messages(gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/messages`` (API-3)."""
    t0 = time.perf_counter()
    headers = header_map(scope)
    req_id = gw.request_id_for(headers)
    try:
        key, raw = await _read(gw, headers, receive)
        body = parse_json_object(raw, headers.get("content-type"))
        anthropic_in.validate(body, model_required="x-route-model" not in headers)
        canonical = anthropic_in.to_canonical(body)
        req = chat_request(
            canonical, headers, client_format="anthropic", request_id=req_id, api_key=key, raw=raw
        )
        req.native = body
        gw.check_key_allows(key, req.model)
    except GatewayError as err:
        err.headers.setdefault("x-request-id", req_id)
        await send_error(send, SURFACE, err)
        return
    await run_chat(gw, req, SURFACE, send, receive, t0)


def _chars(value: Any) -> tuple[int, int]:
    """``(characters of text, number of image/document blocks)`` in a Messages body fragment."""
    if isinstance(value, str):
        return len(value), 0
    if isinstance(value, list):
        totals = [_chars(v) for v in value]
        return sum(t[0] for t in totals), sum(t[1] for t in totals)
    if isinstance(value, dict):
        if value.get("type") in ("image", "document"):
            return 0, 1
        chars = media = 0
        for k, v in value.items():
            if k not in _SKIP_KEYS:
                c, m = _chars(v)
                chars, media = chars + c, media + m
        return chars, media
    return (len(str(value)), 0) if isinstance(value, int | float) else (0, 0)


def estimate_input_tokens(body: dict[str, Any]) -> int:
    """Local ``count_tokens`` estimate: ~characters/4 over system, messages and tools, plus
    :data:`IMAGE_TOKENS` per image or document block (at least 1)."""
    chars, media = _chars([body.get("system"), body.get("messages"), body.get("tools")])
    return max(1, math.ceil(chars / CHARS_PER_TOKEN) + media * IMAGE_TOKENS)


async def count_tokens(gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/messages/count_tokens`` → ``{"input_tokens": N}`` from the local estimate; the body
    is validated as for ``/v1/messages`` and an unknown model is a 404 naming ``model``."""
    headers = header_map(scope)
    req_id = gw.request_id_for(headers)
    try:
        key, raw = await _read(gw, headers, receive)
        body = parse_json_object(raw, headers.get("content-type"))
        anthropic_in.validate({"max_tokens": 1, **body}, model_required="x-route-model" not in headers)
        model = str(headers.get("x-route-model") or body.get("model") or "")
        gw.check_key_allows(key, model)
        resolve(gw.registry, model)  # an unknown model is the same 404 as on /v1/messages
    except GatewayError as err:
        err.headers.setdefault("x-request-id", req_id)
        await send_error(send, SURFACE, err)
        return
    await send_json(
        send,
        200,
        {"input_tokens": estimate_input_tokens(body)},
        [(b"x-request-id", req_id.encode("latin-1", "replace"))],
    )


ROUTES: dict[str, Callable[[Gateway, Scope, Receive, Send], Awaitable[None]]] = {
    "/v1/messages": messages,
    "/v1/messages/count_tokens": count_tokens,
    "/messages": messages,
    "/messages/count_tokens": count_tokens,
}
