"""The OpenAI surface: ``POST /v1/chat/completions`` (API-1), ``GET /v1/models`` (API-2) and the
OpenAI error shape (API-6), as plain ASGI handlers on the hot path.
"""

from __future__ import annotations

import time
from typing import Any

from omniroute.api.asgi import Receive, Scope, Send, header_map, parse_json_object, read_body, send_json
from omniroute.api.chat import chat_request, run_chat, send_error
from omniroute.errors import GatewayError
from omniroute.gateway import Gateway
from omniroute.values import ChatRequest
from omniroute.wire.openai.inbound import validate_chat_body
from omniroute.wire.openai.outbound import SURFACE


async def chat_completions(gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/chat/completions`` (API-1)."""
    t0 = time.perf_counter()
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
