"""Gemini-style inbound routes (PROV-1): ``POST /v1beta/models/{model}:generateContent``,
``:streamGenerateContent`` (SSE, as with ``?alt=sse``) and ``:countTokens`` — also under
``/v1/models/...``, since the google-genai SDK defaults to API version ``v1``.

``{model}`` is any routable model string (``local-o/model-o``, a combo, ``auto``); the key comes from
``x-goog-api-key``, ``?key=`` or ``Authorization: Bearer`` (API-8). The body is translated to the
canonical request (:mod:`omniroute.wire.gemini.inbound`), routed through
:func:`~omniroute.api.chat.run_chat`, and rendered back as Gemini responses
(:mod:`omniroute.wire.gemini.outbound`). Errors use Gemini's shape
``{"error": {"code", "message", "status"}}`` (API-6).
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

from omniroute.api.asgi import (
    Receive,
    Scope,
    Send,
    header_map,
    parse_json_object,
    query_map,
    read_body,
    send_json,
)
from omniroute.api.chat import chat_request, run_chat, send_error
from omniroute.errors import GatewayError, InvalidRequest
from omniroute.gateway import Gateway
from omniroute.values import ChatRequest
from omniroute.wire.gemini import inbound as gemini_in
from omniroute.wire.gemini.outbound import GeminiStreamEncoder, error_body, render_response
from omniroute.wire.openai.inbound import validate_chat_body

_PATH = re.compile(
    r"^/(?:v1|v1beta|v1alpha)/models/(.+):(generateContent|streamGenerateContent|countTokens)$"
)

MEDIA_TOKENS = 258
"""``countTokens`` estimate per inline/file media part (Gemini's token guide: 258 per small image)."""


class GeminiSurface:
    """The Gemini ``generateContent`` wire format as a client surface."""

    name = "gemini"

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return error_body(err)

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]:
        return render_response(response)

    def encoder(self, req: ChatRequest) -> GeminiStreamEncoder:
        return GeminiStreamEncoder(req.model)


SURFACE = GeminiSurface()


def matches(path: str) -> bool:
    """True for the Gemini model-method paths this surface serves."""
    return _PATH.match(path) is not None


def _count(value: Any) -> tuple[int, int]:
    if isinstance(value, str):
        return len(value), 0
    if isinstance(value, list):
        parts = [_count(v) for v in value]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    if isinstance(value, dict):
        if any(k in value for k in ("inlineData", "inline_data", "fileData", "file_data")):
            return 0, 1
        parts = [_count(v) for k, v in value.items() if k not in ("role", "mimeType", "thoughtSignature")]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    return 0, 0


def estimate_tokens(body: dict[str, Any]) -> int:
    """Local ``countTokens`` estimate: ~characters/4 plus :data:`MEDIA_TOKENS` per media part."""
    inner = body.get("generateContentRequest") or body
    chars, media = _count([inner.get("systemInstruction"), inner.get("contents"), inner.get("tools")])
    return max(1, math.ceil(chars / 4) + media * MEDIA_TOKENS)


_GEMINI_NAMES = {
    "temperature": "generationConfig.temperature",
    "top_p": "generationConfig.topP",
    "max_tokens": "generationConfig.maxOutputTokens",
    "n": "generationConfig.candidateCount",
    "presence_penalty": "generationConfig.presencePenalty",
    "frequency_penalty": "generationConfig.frequencyPenalty",
    "stop": "generationConfig.stopSequences",
    "seed": "generationConfig.seed",
    "reasoning_effort": "generationConfig.thinkingConfig.thinkingLevel",
}


def _validate_canonical(canonical: dict[str, Any]) -> None:
    """The translated request passes the same checks as an OpenAI one; errors name the Gemini field."""
    try:
        validate_chat_body(canonical, model_required=False)
    except InvalidRequest as err:
        name = _GEMINI_NAMES.get(err.param or "")
        if name is None:
            raise
        raise InvalidRequest(err.message.replace(f"'{err.param}'", f"'{name}'"), param=name) from None


async def handle(gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one Gemini-style request (see the module docstring)."""
    t0 = time.perf_counter()
    m = _PATH.match(scope["path"])
    model, method = (m.group(1), m.group(2)) if m else ("", "")
    headers = header_map(scope)
    key_param = query_map(scope).get("key")
    if key_param and "x-goog-api-key" not in headers:
        headers["x-goog-api-key"] = key_param
    req_id = gw.request_id_for(headers)
    try:
        key = gw.authenticate(headers, allow_x_api_key=True)
        raw = await read_body(receive, gw.max_body_bytes, headers.get("content-length"), gw.body_deadlines)
        body = parse_json_object(raw, headers.get("content-type"))
        if not model:
            raise InvalidRequest("The model is missing from the URL.", param="model")
        if method == "countTokens":
            gw.check_key_allows(key, headers.get("x-route-model") or model)
            await send_json(
                send,
                200,
                {"totalTokens": estimate_tokens(body)},
                [(b"x-request-id", req_id.encode("latin-1", "replace"))],
            )
            return
        canonical = gemini_in.to_canonical(body, model, stream=method == "streamGenerateContent")
        _validate_canonical(canonical)
        req = chat_request(
            canonical, headers, client_format="gemini", request_id=req_id, api_key=key, raw=raw
        )
        req.native = body
        gw.check_key_allows(key, req.model)
    except GatewayError as err:
        err.headers.setdefault("x-request-id", req_id)
        await send_error(send, SURFACE, err)
        return
    await run_chat(gw, req, SURFACE, send, receive, t0)
