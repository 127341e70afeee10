"""Shared request driver for every chat-like wire format (OpenAI, Anthropic, Responses, Gemini).

A format parses its wire body into the canonical request and supplies a
:class:`~omniroute.wire.base.Surface` that renders the canonical outcome back into its format
(:mod:`omniroute.api.routes` wires the two together); this module does the rest once: execution,
routing headers (API-7), SSE writing with commit semantics (RESIL-9), client-disconnect handling and
the usage row (OBS-1).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from omniroute.api.asgi import SSE_HEADERS, Receive, Send, encode_headers, send_bytes
from omniroute.errors import GatewayError, InvalidRequest, UpstreamError
from omniroute.gateway import Gateway
from omniroute.observe.access import CANCELLED, note_cancelled
from omniroute.routing.auto.controls import check_steering_headers
from omniroute.routing.decision import Decision
from omniroute.routing.engine import Outcome, StreamOutcome
from omniroute.values import ChatRequest, Usage
from omniroute.wire.base import StreamEncoder, Surface

log = logging.getLogger("omniroute.api")


def routing_headers(
    req: ChatRequest, decision: Decision | None, overhead_ms: float, served: Any = None
) -> dict[str, str]:
    """The API-7 headers: ``X-Request-Id`` and the ``X-OmniRoute-*`` routing headers; plus the
    key's ``x-ratelimit-*`` headers when it has rate limits (API-8)."""
    h = {"x-request-id": req.request_id, **req.rate_limit_headers}
    if decision is not None:
        if served is not None:
            h["x-omniroute-provider"] = served.provider.id
            h["x-omniroute-model"] = served.model.id
            h["x-omniroute-connection"] = served.connection.id
        h["x-omniroute-strategy"] = decision.strategy
        h["x-omniroute-attempts"] = str(len(decision.attempts))
        h["x-omniroute-decision"] = decision.header()
    h["x-omniroute-overhead-ms"] = f"{max(overhead_ms, 0.0):.3f}"
    return h


async def send_error(
    send: Send,
    error_body: Callable[[GatewayError], dict[str, Any]],
    err: GatewayError,
    req: ChatRequest | None = None,
    decision: Decision | None = None,
    elapsed_ms: float = 0.0,
) -> None:
    """Send ``err`` in a format's ``error_body`` shape with its status and headers (API-6); with
    ``req``, the routing headers too (API-7), the overhead from ``elapsed_ms`` since the request
    arrived."""
    headers = dict(err.headers)
    if req is not None:
        overhead = elapsed_ms
        if decision is not None:
            overhead -= sum(a.latency_ms for a in decision.attempts)
        headers.update(routing_headers(req, decision, overhead))
    await send_bytes(send, err.status, orjson.dumps(error_body(err)), encode_headers(headers))


class _EarlyStart:
    """Response headers and keep-alives for a stream whose first content is slow.

    Until the first content-bearing event the gateway holds the response back, so a failing target
    can still fall back invisibly (RESIL-9). Clients give up on a response whose headers take too long
    (Gemini CLI aborts after 60 s) and proxies drop idle connections, so once ``interval_s`` passes
    without a commit the ``200`` headers (``X-Request-Id`` and the key's ``x-ratelimit-*`` only: the
    routing headers are not known yet, the decision endpoint has them) and the format's keep-alive
    (Anthropic ``ping``, else an SSE comment) go out, and a keep-alive follows every ``interval_s``.
    Fallback goes on unseen behind them; a request that then fails ends with the format's error event
    instead of an error status.
    Costs one timer per streaming request; a task only when the timer fires. The timer runs on the
    event loop's real time, whatever the gateway's clock: it keeps a real client socket alive."""

    __slots__ = ("_enc", "_interval", "_req", "_send", "_task", "_timer", "started")

    def __init__(self, send: Send, enc: StreamEncoder, req: ChatRequest, interval_s: float) -> None:
        self._send = send
        self._enc = enc
        self._req = req  # the headers are built only if the timer fires
        self._interval = interval_s
        self._task: asyncio.Task[None] | None = None
        self.started = False
        self._timer = asyncio.get_running_loop().call_later(interval_s, self._begin)

    def _begin(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        self.started = True
        req = self._req  # admitted by now: its key's x-ratelimit-* headers go out too (API-8)
        headers = [*SSE_HEADERS, *encode_headers({"x-request-id": req.request_id, **req.rate_limit_headers})]
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        while True:
            await self._send({"type": "http.response.body", "body": self._enc.keepalive(), "more_body": True})
            await asyncio.sleep(self._interval)  # noqa: TID251 - client socket keep-alive: real time

    async def stop(self) -> bool:
        """Stop the timer and the keep-alives (idempotent); ``True`` when the headers went out."""
        self._timer.cancel()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # a client that went away: the disconnect watcher reports it
        return self.started


async def run_chat(
    gw: Gateway, req: ChatRequest, surface: Surface, send: Send, receive: Receive, t0: float
) -> None:
    """Execute ``req`` and write the response or stream to the client in ``surface``'s format;
    ``t0`` is when it arrived (``gw.clock.monotonic()``, for the latency and overhead figures).

    Every request, streaming or not, watches for the client's disconnect from the start (one small
    task that waits on ``receive``): a disconnect cancels the upstream attempt (before or after a
    stream's commit) at once, no later attempt is made, and the usage row is recorded with status
    499 (RESIL-9). A stream whose first content is slow gets its headers and keep-alives early
    (:class:`_EarlyStart`, ``server.stream_keepalive_s``)."""
    decision = Decision(req.request_id, req.model, ts=gw.clock.time())
    task = asyncio.current_task()
    assert task is not None
    watcher = asyncio.get_running_loop().create_task(_watch_disconnect(receive, task))
    committed: list[StreamOutcome] = []
    enc = surface.encoder(req) if req.stream else None
    try:
        await _run(gw, req, surface, send, t0, decision, committed if req.stream else None, enc)
    except asyncio.CancelledError:
        if not (watcher.done() and not watcher.cancelled() and watcher.result()):
            if not gw.draining:
                raise
            task.uncancel()
            await _cut_by_shutdown(gw, req, surface, send, t0, decision, committed, enc)
            return
        task.uncancel()
        so = committed[0] if committed else None
        if so is not None:
            await so.finalize(None, abandoned=True)
            await gw.resilience.release_probe(so.candidate)
        gw.record_usage(
            req,
            decision,
            status=499,
            cand=so.candidate if so else None,
            usage=_usage(so, req) if so else None,  # what was forwarded is charged (estimated if unreported)
            latency_ms=(gw.clock.monotonic() - t0) * 1000,
            ttft_ms=so.ttft_ms if so else None,
            error="client disconnected",
        )
    finally:
        watcher.cancel()
        gw.release_unsettled(req)


async def _cut_by_shutdown(
    gw: Gateway,
    req: ChatRequest,
    surface: Surface,
    send: Send,
    t0: float,
    decision: Decision,
    committed: list[StreamOutcome],
    enc: StreamEncoder | None,
) -> None:
    """The server's shutdown cancelled this request after ``server.drain_timeout_s``: its usage row
    is written at once (status 503, charging what was forwarded, estimated if unreported: the
    application's shutdown flushes the writers next), the client gets the format's error event (a
    committed stream) or a 503 in its format, and the access line is a WARNING — no traceback."""
    note_cancelled()
    so = committed[0] if committed else None
    gw.record_usage(
        req,
        decision,
        status=503,
        cand=so.candidate if so else None,
        usage=_usage(so, req) if so else None,
        latency_ms=(gw.clock.monotonic() - t0) * 1000,
        ttft_ms=so.ttft_ms if so else None,
        error=CANCELLED,
    )
    err = GatewayError(
        "The gateway shut down before this request finished (server.drain_timeout_s).",
        status=503,
        code="server_shutting_down",
    )
    with contextlib.suppress(Exception):
        if so is not None and enc is not None:
            await send({"type": "http.response.body", "body": enc.error(err), "more_body": False})
        else:
            await send_error(send, surface.error_body, err, req, decision, (gw.clock.monotonic() - t0) * 1000)
    if so is not None:
        await so.finalize(None, abandoned=True)
        await gw.resilience.release_probe(so.candidate)


async def _run(
    gw: Gateway,
    req: ChatRequest,
    surface: Surface,
    send: Send,
    t0: float,
    decision: Decision,
    committed: list[StreamOutcome] | None = None,
    enc: StreamEncoder | None = None,
) -> None:
    interval = gw.config.server.stream_keepalive_s
    early = _EarlyStart(send, enc, req, interval) if enc is not None and interval > 0 else None
    error: GatewayError | None = None
    try:
        outcome, _ = await gw.execute(req, decision)
    except GatewayError as err:
        error = err
    finally:
        headers_sent = early is not None and await early.stop()
    if error is not None:
        gw.record_usage(
            req,
            decision,
            status=error.status,
            cand=None,
            usage=None,
            latency_ms=(gw.clock.monotonic() - t0) * 1000,
            ttft_ms=None,
            error=error.message,
        )
        if headers_sent and enc is not None:  # fallback ran out behind early headers: the error event
            await send({"type": "http.response.body", "body": enc.error(error), "more_body": False})
        else:
            await send_error(
                send, surface.error_body, error, req, decision, (gw.clock.monotonic() - t0) * 1000
            )
        return
    if isinstance(outcome, Outcome):
        await _send_full(gw, req, surface, send, outcome, decision, t0)
    else:
        if committed is not None:
            committed.append(outcome)
        await _send_stream(gw, req, surface, send, outcome, decision, t0, enc, headers_sent)


async def _send_full(
    gw: Gateway, req: ChatRequest, surface: Surface, send: Send, out: Outcome, decision: Decision, t0: float
) -> None:
    body = orjson.dumps(surface.render(out.response, req))
    total_ms = (gw.clock.monotonic() - t0) * 1000
    upstream_ms = sum(a.latency_ms for a in decision.attempts)
    headers = routing_headers(req, decision, total_ms - upstream_ms, out.candidate)
    await send_bytes(send, 200, body, encode_headers(headers))
    gw.record_usage(
        req, decision, status=200, cand=out.candidate, usage=out.usage, latency_ms=total_ms, ttft_ms=None
    )


async def _send_stream(
    gw: Gateway,
    req: ChatRequest,
    surface: Surface,
    send: Send,
    so: StreamOutcome,
    decision: Decision,
    t0: float,
    enc: StreamEncoder | None = None,
    headers_sent: bool = False,
) -> None:
    """Write a committed stream chunk by chunk; an upstream failure after commit ends it with the
    surface's error event and a non-``stop`` finish, never as complete (RESIL-9). ``headers_sent``:
    :class:`_EarlyStart` already sent the response headers."""
    enc = enc or surface.encoder(req)
    error: UpstreamError | None = None
    # One client write per upstream read: the chunks of a read go out together, at once (PERF-4:
    # never held for later network data); once the upstream is finished they go out with the end.
    pending: list[bytes] = []
    try:
        if not headers_sent:
            upstream_ms = sum(a.latency_ms for a in decision.attempts)
            overhead = (gw.clock.monotonic() - t0) * 1000 - upstream_ms
            headers = [*SSE_HEADERS, *encode_headers(routing_headers(req, decision, overhead, so.candidate))]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
        start = enc.start()
        if start:
            pending.append(start)
        encode = enc.chunk
        async for batch in so.batches():
            for ch in batch:
                data = encode(ch)
                if data:
                    pending.append(data)
            if pending and not so.finished:
                body = pending[0] if len(pending) == 1 else b"".join(pending)
                pending.clear()
                await send({"type": "http.response.body", "body": body, "more_body": True})
        pending.append(enc.end(_usage(so, req)))
        await send({"type": "http.response.body", "body": b"".join(pending), "more_body": False})
    except UpstreamError as err:
        error = err
        with contextlib.suppress(Exception):
            pending.append(enc.error(err))
            await send({"type": "http.response.body", "body": b"".join(pending), "more_body": False})
    await so.finalize(error)
    if error is not None or "stream_rescues" in decision.extra:  # changed after commit: store again
        gw.remember(decision)
    _finish_usage(gw, req, decision, so, 502 if error else 200, t0, error.message if error else None)


def _usage(so: StreamOutcome, req: ChatRequest) -> Usage:
    """The stream's usage; the prompt estimate is only computed when the upstream sent none."""
    return so.usage if so.usage is not None else so.final_usage(req.prompt_estimate)


def _finish_usage(
    gw: Gateway,
    req: ChatRequest,
    decision: Decision,
    so: StreamOutcome,
    status: int,
    t0: float,
    error: str | None,
) -> None:
    gw.record_usage(
        req,
        decision,
        status=status,
        cand=so.candidate,
        usage=_usage(so, req),
        latency_ms=(gw.clock.monotonic() - t0) * 1000,
        ttft_ms=so.ttft_ms,
        error=error,
    )


async def _watch_disconnect(receive: Receive, task: asyncio.Task[Any]) -> bool:
    """Cancel the request's task when the client disconnects; returns True if it did."""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            task.cancel()
            return True


MAX_MODEL_ID_CHARS = 256  # longer ids are rejected: they are echoed in routing headers (API-7)


def check_model_id(model: Any) -> None:
    """A routable model id is a string of at most 256 printable characters (API-6: 400 naming
    ``model``); control characters would otherwise reach response headers and upstream URLs."""
    if not isinstance(model, str):
        raise InvalidRequest("'model' must be a string.", param="model")
    if len(model) > MAX_MODEL_ID_CHARS:
        raise InvalidRequest(
            f"'model' is too long ({len(model)} > {MAX_MODEL_ID_CHARS} characters).", param="model"
        )
    if not model.isprintable():
        raise InvalidRequest("'model' contains control characters.", param="model")


def chat_request(
    body: dict[str, Any],
    headers: Mapping[str, str],
    *,
    client_format: str,
    request_id: str,
    api_key: dict[str, Any] | None,
    raw: bytes | None = None,
) -> ChatRequest:
    """Build the canonical request: ``X-Route-Model`` overrides ``body.model`` (SPEC §4); tags from
    ``X-OmniRoute-Tags`` (COMBO-4); session from ``X-Session-Id``/``X-OmniRoute-Session`` (AUTO-5a).
    Raises :class:`InvalidRequest` (400) for a bad model id or steering header value
    (:func:`~omniroute.routing.auto.controls.check_steering_headers`)."""
    model = headers.get("x-route-model") or body.get("model") or ""
    check_model_id(model)
    check_steering_headers(headers)
    so = body.get("stream_options") or {}
    tags = tuple(t.strip() for t in headers.get("x-omniroute-tags", "").split(",") if t.strip())
    return ChatRequest(
        body=body,
        model=str(model),
        stream=bool(body.get("stream")),
        include_usage=bool(so.get("include_usage")) if isinstance(so, dict) else False,
        client_format=client_format,
        request_id=request_id,
        api_key_id=api_key["id"] if api_key else None,
        headers=dict(headers),
        tags=tags,
        session_id=headers.get("x-session-id") or headers.get("x-omniroute-session"),
        raw_body=raw,
    )
