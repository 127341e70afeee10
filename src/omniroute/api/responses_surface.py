"""The OpenAI Responses surface: ``POST /v1/responses`` (API-4), text and function tools, streaming
events, and ``previous_response_id``.

The body is translated to the canonical request (:mod:`omniroute.wire.responses.inbound`), routed
through :func:`~omniroute.api.chat.run_chat` and rendered as a Responses object or event stream
(:mod:`omniroute.wire.responses.outbound`). Unless ``store`` is false, the conversation of each
successful response (input history + this turn's assistant message, without ``instructions``) is
saved under its ``resp_…`` id for :data:`RESPONSE_TTL_S` seconds, readable only by the same API key;
the save completes before the last byte reaches the client, so an immediate follow-up request finds
it. Errors use the OpenAI shape (API-6).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from omniroute.api.asgi import Message, Receive, Scope, Send, header_map, parse_json_object, read_body
from omniroute.api.chat import chat_request, run_chat, send_error
from omniroute.errors import GatewayError, InvalidRequest
from omniroute.gateway import Gateway
from omniroute.values import ChatRequest
from omniroute.wire.openai.outbound import SURFACE as OPENAI_SURFACE
from omniroute.wire.openai.outbound import openai_error
from omniroute.wire.responses import inbound as responses_in
from omniroute.wire.responses.outbound import ResponsesStreamEncoder, render_response

log = logging.getLogger("omniroute.api")

RESPONSE_TTL_S = 30 * 24 * 3600.0
"""How long a stored response stays readable by ``previous_response_id`` (OpenAI keeps 30 days)."""


class ResponsesSurface:
    """The Responses wire format for one request: knows its response id and what to store."""

    name = "responses"

    def __init__(
        self, gw: Gateway, body: dict[str, Any], conversation: list[dict[str, Any]], api_key_id: str | None
    ) -> None:
        self.gw = gw
        self.body = body
        self.conversation = conversation
        self.api_key_id = api_key_id
        self.id = "resp_" + uuid.uuid4().hex
        self.created_at = int(time.time())
        self.pending: dict[str, Any] | None = None

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return openai_error(err)

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]:
        obj, assistant = render_response(response, self.id, self.created_at, self.body)
        self._remember(assistant, obj["model"])
        return obj

    def encoder(self, req: ChatRequest) -> ResponsesStreamEncoder:
        enc = ResponsesStreamEncoder(self.id, self.created_at, self.body, req.model)
        enc.on_done = lambda assistant: self._remember(assistant, enc.model)
        return enc

    def _remember(self, assistant: dict[str, Any], model: str) -> None:
        if self.body.get("store", True) is not False:
            self.pending = {"messages": [*self.conversation, assistant], "model": model}

    async def flush(self) -> None:
        """Save the pending conversation (once); a store failure is logged, never sent to the client."""
        data, self.pending = self.pending, None
        if data is None or self.gw.store is None:
            return
        try:
            await self.gw.store.save_response(self.id, self.api_key_id, data, RESPONSE_TTL_S)
        except Exception:
            log.exception("could not store response %s", self.id)

    def wrap(self, send: Send) -> Send:
        """``send`` that saves the pending conversation before the final body message goes out."""

        async def send_after_save(msg: Message) -> None:
            if msg["type"] == "http.response.body" and not msg.get("more_body", False):
                await self.flush()
            await send(msg)

        return send_after_save


async def _history(gw: Gateway, body: dict[str, Any], api_key_id: str | None) -> list[dict[str, Any]] | None:
    prev = body.get("previous_response_id")
    if not prev:
        return None
    data = await gw.store.get_response(prev, api_key_id) if gw.store is not None else None
    if data is None:
        raise InvalidRequest(
            f"previous_response_id: no response '{prev}' was found for this API key (unknown or expired).",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    messages = data.get("messages")
    return list(messages) if isinstance(messages, list) else []


async def responses(gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/responses`` (API-4)."""
    t0 = time.perf_counter()
    headers = header_map(scope)
    req_id = gw.request_id_for(headers)
    try:
        key = gw.authenticate(headers)
        raw = await read_body(receive, gw.max_body_bytes, headers.get("content-length"), gw.body_deadlines)
        body = parse_json_object(raw, headers.get("content-type"))
        responses_in.validate(body, model_required="x-route-model" not in headers)
        key_id = key["id"] if key else None
        history = await _history(gw, body, key_id)
        canonical, conversation = responses_in.to_canonical(body, history)
        req = chat_request(
            canonical, headers, client_format="responses", request_id=req_id, api_key=key, raw=raw
        )
        gw.check_key_allows(key, req.model)
    except GatewayError as err:
        err.headers.setdefault("x-request-id", req_id)
        await send_error(send, OPENAI_SURFACE, err)
        return
    surface = ResponsesSurface(gw, body, conversation, key_id)
    await run_chat(gw, req, surface, surface.wrap(send), receive, t0)


ROUTES: dict[str, Callable[[Gateway, Scope, Receive, Send], Awaitable[None]]] = {
    "/v1/responses": responses,
    "/responses": responses,
}
