"""``GET /v1/models`` and ``GET /v1/models/{id}`` (API-2): every routable id, in the OpenAI shape, as a
plain ASGI handler."""

from __future__ import annotations

from omniroute.api.asgi import Receive, Scope, Send, header_map, send_json
from omniroute.api.chat import send_error
from omniroute.errors import GatewayError
from omniroute.gateway import Gateway
from omniroute.routing.model_list import model_list
from omniroute.routing.resolve import not_found
from omniroute.wire.openai.outbound import openai_error


async def list_models(gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    """``GET /v1/models`` and ``GET /v1/models/{id}`` (API-2)."""
    headers = header_map(scope)
    try:
        gw.authenticate(headers)
    except GatewayError as err:
        await send_error(send, openai_error, err)
        return
    data = model_list(gw)
    path: str = scope["path"]
    if path.rstrip("/") != "/v1/models":
        mid = path[len("/v1/models/") :]
        for m in data:
            if m["id"] == mid:
                await send_json(send, 200, m)
                return
        await send_error(send, openai_error, not_found(mid))
        return
    await send_json(send, 200, {"object": "list", "data": data})
