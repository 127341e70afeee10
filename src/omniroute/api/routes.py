"""The ``/v1`` routes of every client wire format, derived from the registry
(:data:`omniroute.wire.FORMATS`), as plain ASGI handlers on the hot path.

One handler serves every format's routes: it authenticates the caller the ways the format's clients
send keys (API-8), reads and decodes the JSON body, lets the route's ``read`` hook validate and
translate it (a 400 naming the field, API-6), then runs the chat through
:func:`~omniroute.api.chat.run_chat` or answers the token count
(:func:`~omniroute.api.count_tokens.count_tokens`). Every error before the engine runs
uses the format's error shape.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable

from omniroute.api.asgi import (
    SSE_HEADERS,
    Message,
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
from omniroute.api.count_tokens import count_tokens
from omniroute.errors import GatewayError
from omniroute.gateway import Gateway
from omniroute.routing.resolve import resolve
from omniroute.wire.base import Call, Inbound, Route, TokenCount, WireFormat
from omniroute.wire.count_tokens import TOKEN_COUNT_HEADER

COUNT_HEADER = TOKEN_COUNT_HEADER.encode()

GwHandler = Callable[[Gateway, Scope, Receive, Send], Awaitable[None]]
"""A hot-path handler: the app calls it with its gateway and the ASGI triple."""


class FormatRoute:
    """The handler of one :class:`~omniroute.wire.base.Route` of a client format."""

    __slots__ = ("client", "name", "read")

    def __init__(self, fmt: WireFormat, route: Route) -> None:
        assert fmt.client is not None
        self.name = fmt.name
        self.client = fmt.client
        self.read = route.read

    async def __call__(self, gw: Gateway, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = gw.clock.monotonic()
        headers = header_map(scope)
        client = self.client
        query = query_map(scope)
        if client.key_query is not None:
            param, header = client.key_query
            value = query.get(param)
            if value and header not in headers:
                headers[header] = value
        req_id = gw.request_id_for(headers, claim=True)
        try:
            key = gw.authenticate(headers, allow_x_api_key=client.key_headers)
            raw = await read_body(
                receive,
                gw.max_body_bytes,
                headers.get("content-length"),
                gw.body_deadlines,
                headers.get("content-encoding"),
            )
            body = parse_json_object(raw, headers.get("content-type"))
            call = Call(scope["path"], headers, key["id"] if key else None, gw.store, gw.clock, query)
            got = await self.read(body, call)
            if isinstance(got, TokenCount):
                gw.check_key_allows(key, got.model)
                if got.resolve:
                    resolve(gw.registry, got.model)  # an unknown model is the same 404 as on a chat
                counted, source = await count_tokens(gw, got, self.name, headers)
                extra = [
                    (b"x-request-id", req_id.encode("latin-1", "replace")),
                    (COUNT_HEADER, source.encode()),
                ]
                await send_json(send, 200, counted, extra)
                return
            req = chat_request(
                got.body, headers, client_format=self.name, request_id=req_id, api_key=key, raw=raw
            )
            req.native = got.native
            gw.check_key_allows(key, req.model)
        except GatewayError as err:
            err.headers.setdefault("x-request-id", req_id)
            await send_error(send, client.error_body, err)
            return
        await run_chat(gw, req, got.surface, _send_for(got, send), receive, t0)


def _send_for(got: Inbound, send: Send) -> Send:
    """``send``, or one that awaits the format's ``before_end`` before the response's last body
    message goes out, or that gives a stream the format's own ``stream_content_type``."""
    before_end = got.before_end
    if got.stream_content_type is not None:
        send = _with_stream_content_type(send, got.stream_content_type)
    if before_end is None:
        return send

    async def send_after(msg: Message) -> None:
        if msg["type"] == "http.response.body" and not msg.get("more_body", False):
            await before_end()
        await send(msg)

    return send_after


def _with_stream_content_type(send: Send, content_type: bytes) -> Send:
    """``send`` with the ``Content-Type`` of a streamed (SSE) response replaced by
    ``content_type``; other responses (errors, JSON) pass unchanged."""

    async def send_typed(msg: Message) -> None:
        if msg["type"] == "http.response.start":
            headers = msg.get("headers") or []
            if (b"content-type", SSE_HEADERS[0][1]) in headers:
                msg["headers"] = [
                    (b"content-type", content_type) if k == b"content-type" else (k, v) for k, v in headers
                ]
        await send(msg)

    return send_typed


def route_table(
    formats: Iterable[WireFormat],
) -> tuple[dict[str, GwHandler], tuple[tuple[re.Pattern[str], GwHandler], ...]]:
    """Every client route of ``formats``: ``(exact path → handler, (path pattern, handler) pairs in
    registry order)``."""
    exact: dict[str, GwHandler] = {}
    patterns: list[tuple[re.Pattern[str], GwHandler]] = []
    for fmt in formats:
        for route in fmt.client.routes if fmt.client is not None else ():
            handler = FormatRoute(fmt, route)
            exact.update(dict.fromkeys(route.paths, handler))
            if route.pattern is not None:
                patterns.append((route.pattern, handler))
    return exact, tuple(patterns)
