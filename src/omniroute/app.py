"""``create_app(config)`` → the ASGI application (one :class:`~omniroute.gateway.Gateway`, no globals).

The ``/v1`` hot path is a dict of plain ASGI handlers that write to ``send`` themselves — the routes of
every client wire format come from the registry (:data:`omniroute.wire.FORMATS`); everything
else (management API, health, metrics, OpenAPI at ``/openapi.json``) is a FastAPI app mounted behind
them (DESIGN "Built on"). The app owns its lifespan: the gateway starts on ``lifespan.startup`` and
flushes and closes on ``lifespan.shutdown``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import socket
from typing import TYPE_CHECKING

from omniroute import dashboard
from omniroute.api import embeddings
from omniroute.api.admin import build_admin_app
from omniroute.api.asgi import Message, Receive, Scope, Send, header_map, send_json
from omniroute.api.models import list_models
from omniroute.api.routes import FormatRoute, GwHandler, route_table
from omniroute.clock import Clock
from omniroute.config import Config, ConfigError
from omniroute.errors import GatewayError, PayloadTooLarge
from omniroute.extensions import Extensions
from omniroute.gateway import Gateway
from omniroute.observe.access import Observer, tracing_for
from omniroute.observe.lifecycle import Drain, ready_message
from omniroute.wire.openai.outbound import openai_error

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("omniroute")


class OmniRouteApp:
    """The ASGI callable. ``gateway`` is available for tests and the CLI."""

    def __init__(
        self,
        config: Config,
        *,
        tune_gc: bool = False,
        clock: Clock | None = None,
        reload_on_sighup: bool = False,
        extensions: Extensions | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.gateway = Gateway(config, clock=clock, extensions=extensions)
        gw = self.gateway
        self.observer = Observer(
            gw.clock,
            lambda key_id: (gw.keys_by_id.get(key_id) or {}).get("name"),
            gw.metrics,
            tracing_for(config.server.otlp_endpoint, gw.clock, tracer_provider),
        )
        self.drain = Drain()
        self.tune_gc = tune_gc
        self.reload_on_sighup = reload_on_sighup
        self.reloads: set[asyncio.Task[None]] = set()  # SIGHUP reloads under way (kept referenced)
        self.admin = build_admin_app(self.gateway)
        dashboard.install(self.admin)  # the console, /docs and / (OPS-3)
        exact, self.pattern_routes = route_table(self.gateway.formats)
        self.post_routes: dict[str, GwHandler] = {**exact, "/v1/embeddings": embeddings.embeddings}
        self.started = False
        self.waiting: asyncio.Task[None] | None = None  # retrying a start-up whose database was unreachable

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if self.waiting is not None and kind == "http" and scope["path"] not in _WHILE_WAITING:
            await _database_unavailable(send, self.gateway.request_id_for(header_map(scope)))
            return
        if kind == "http":
            path: str = scope["path"]
            method: str = scope["method"]
            handler = self.post_routes.get(path)
            if handler is None:
                handler = next((h for p, h in self.pattern_routes if p.match(path)), None)
            if handler is not None and method == "POST":
                await self._guarded(handler, scope, receive, send)  # sets its own X-Request-Id
                return
            send = _with_request_id(send, self.gateway.request_id_for(header_map(scope)))
            if handler is not None:
                await _method_not_allowed(scope, send, handler)
                return
            if path == "/v1/models" or path.startswith("/v1/models/"):
                if method == "GET":
                    await list_models(self.gateway, scope, receive, send)
                else:
                    await _method_not_allowed(scope, send, None, allow="GET")
                return
            declared = dict(scope["headers"]).get(b"content-length", b"")
            if declared.isdigit() and int(declared) > self.gateway.max_body_bytes:
                err = PayloadTooLarge(
                    f"Request body exceeds the limit of {self.gateway.config.server.max_body_mb:g} "
                    "MB (server.max_body_mb)."
                )
                await send_json(send, 413, openai_error(err))
                return
            await self.admin(scope, _capped(receive, self.gateway.max_body_bytes), send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        else:  # websocket: not served
            await send({"type": "websocket.close", "code": 1003})

    async def _guarded(self, handler: GwHandler, scope: Scope, receive: Receive, send: Send) -> None:
        """Run a hot-path handler; an unexpected exception becomes a 500 in the OpenAI error shape
        (logged with its traceback) instead of a dropped connection or a plain-text page. When the
        response had already started, the server refuses the second start and the connection is
        closed unfinished, so the client never sees a truncated answer as complete. Each request
        gets one access line (and spans when tracing is on; :mod:`omniroute.observe.access`)."""
        entry = self.observer.begin(scope)
        send = entry.wrap(send)
        try:
            await handler(self.gateway, scope, receive, send)
        except asyncio.CancelledError:  # the server's shutdown ran out of drain time
            entry.cancelled = True
            raise
        except Exception:
            log.exception("unexpected error on %s %s", scope["method"], scope["path"])
            err = GatewayError("Internal gateway error; the request id is in the logs.")
            with contextlib.suppress(Exception):
                await send_json(send, 500, openai_error(err))
        finally:
            self.observer.end(entry)

    async def start(self) -> None:
        """Start the gateway (idempotent); used by the lifespan and by in-process tests."""
        if not self.started:
            await self.gateway.start()
            self.started = True
            if self.reload_on_sighup:
                asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self._on_sighup)
                self.drain.install(asyncio.get_running_loop(), self.begin_drain)
            log.info("%s", self._ready_line())
            if self.tune_gc:
                # A long-running server: move everything loaded at start-up out of the collector's
                # view and collect less often (full collections took ~140 ms each under load and were
                # the main source of p99 latency; docs/BENCHMARKS.md).
                gc.collect()
                gc.freeze()
                gc.set_threshold(50_000, 20, 100)

    def _ready_line(self) -> str:
        gw = self.gateway
        server = gw.config.server
        providers = [p for p, conns in gw.registry.connections.items() if conns]
        return ready_message(
            server.host, server.port, providers, gw.registry.combos, simulated=gw.simulated is not None
        )

    def begin_drain(self) -> None:
        """SIGTERM (``omniroute serve``): readiness answers 503 from now on; the server stops accepting
        and waits for the requests in flight (:mod:`omniroute.observe.lifecycle`)."""
        self.gateway.draining = True
        log.info(
            "SIGTERM: draining; %d request(s) in flight get up to %gs to finish (server.drain_timeout_s)",
            self.gateway.metrics.in_flight,
            self.gateway.config.server.drain_timeout_s,
        )

    def _on_sighup(self) -> None:
        task = asyncio.create_task(self._reload(), name="config-reload")
        self.reloads.add(task)
        task.add_done_callback(self.reloads.discard)

    async def _reload(self) -> None:
        """SIGHUP: re-read and apply the config file (:meth:`Gateway.reload`); an invalid file is logged
        and the running configuration kept."""
        try:
            await self.gateway.reload()
        except (ConfigError, FileNotFoundError, ValueError) as exc:
            log.error("configuration not reloaded, keeping the running one: %s", exc)

    def _wait_for_database(self, exc: Exception) -> None:
        """The database did not answer at start-up (connection refused, unknown host, timeout): serve
        anyway, with ``/health/ready`` answering 503 and every other route 503, and try to start again
        every :data:`DATABASE_RETRY_S` seconds on the gateway's clock."""
        log.error(
            "database unreachable at start-up (%s: %s); retrying every %gs, 503 until it answers",
            type(exc).__name__,
            exc,
            DATABASE_RETRY_S,
        )
        self.waiting = asyncio.create_task(self._start_when_reachable(), name="wait-for-database")

    async def _start_when_reachable(self) -> None:
        while True:
            await self.gateway.clock.sleep(DATABASE_RETRY_S)
            try:
                await self.start()
            except UNREACHABLE as exc:
                if self.gateway.store is None:
                    log.debug("database still unreachable: %s", exc)
                    continue
                log.error("start-up failed: %s: %s", type(exc).__name__, exc)
            except Exception as exc:  # a problem a retry cannot fix: stay unready, say why
                log.error("start-up failed: %s: %s", type(exc).__name__, exc)
            else:
                log.info("database reachable: started")
                self.waiting = None
            return

    async def stop(self) -> None:
        """Stop the gateway: flush the usage and decision writers, export queued spans, close."""
        if self.waiting is not None:
            self.waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.waiting
        if self.reload_on_sighup:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            self.drain.uninstall()
        if self.started:
            await self.gateway.stop()
            self.started = False
            if self.gateway.draining:
                log.info("drained: usage and decisions written; exiting")
        if self.observer.tracing is not None:
            self.observer.tracing.shutdown()
        self.gateway.metrics.close()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                try:
                    await self.start()
                except ConfigError as exc:
                    log.error("invalid configuration:\n%s", exc)
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                except UNREACHABLE as exc:
                    if self.gateway.store is not None:  # the database answered: something else failed
                        log.error("start-up failed: %s: %s", type(exc).__name__, exc)
                        await send({"type": "lifespan.startup.failed", "message": str(exc)})
                        return
                    self._wait_for_database(exc)
                except Exception as exc:
                    log.error("start-up failed: %s: %s", type(exc).__name__, exc)
                    log.debug("start-up failure details", exc_info=True)
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return


DATABASE_RETRY_S = 2.0
"""Seconds between start-up attempts while the database is unreachable at start."""
UNREACHABLE = (ConnectionError, TimeoutError, socket.gaierror)
"""Start-up failures that mean "the database server did not answer" (refused, reset, unknown host,
timeout): retried. Any other failure (a file that cannot be written, bad credentials, a wrong secret
key) stops the start with its message."""
_WHILE_WAITING = frozenset({"/health", "/health/ready", "/metrics"})


async def _database_unavailable(send: Send, request_id: str) -> None:
    err = GatewayError(
        "The gateway is waiting for its database (unreachable at start-up); try again shortly.",
        status=503,
        code="database_unavailable",
    )
    retry_after = str(int(DATABASE_RETRY_S)).encode()
    headers = [(b"retry-after", retry_after), (b"x-request-id", request_id.encode("latin-1"))]
    await send_json(send, 503, openai_error(err), headers)


def _with_request_id(send: Send, request_id: str) -> Send:
    """``send`` that adds ``X-Request-Id`` to a response that does not carry one (the model list, the
    management API, health, 404s and 405s), so every response names its request (API-7)."""
    header = (b"x-request-id", request_id.encode("latin-1"))

    async def wrapped(msg: Message) -> None:
        if msg["type"] == "http.response.start":
            headers = list(msg.get("headers") or ())
            if not any(name.lower() == b"x-request-id" for name, _ in headers):
                msg = {**msg, "headers": [*headers, header]}
        await send(msg)

    return wrapped


def _capped(receive: Receive, limit: int) -> Receive:
    """``receive`` that raises :class:`PayloadTooLarge` once more than ``limit`` body bytes arrived
    (chunked uploads have no Content-Length to check up front; OPS-2 max_body_mb)."""
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        msg = await receive()
        seen += len(msg.get("body", b""))
        if seen > limit:
            raise PayloadTooLarge(
                f"Request body exceeds the limit of {limit / (1024 * 1024):g} MB (server.max_body_mb)."
            )
        return msg

    return wrapped


async def _method_not_allowed(
    scope: Scope, send: Send, handler: GwHandler | None, allow: str = "POST"
) -> None:
    """A 405 with an ``Allow`` header (RFC 9110 §15.5.6), in the error shape of the route's own
    wire format (Anthropic on ``/v1/messages``, Gemini on ``/v1beta``; OpenAI otherwise)."""
    err = GatewayError(
        f"Method {scope['method']} not allowed on {scope['path']}; use {allow}.",
        status=405,
        code="method_not_allowed",
    )
    err.type = "invalid_request_error"
    shape = handler.client.error_body if isinstance(handler, FormatRoute) else openai_error
    await send_json(send, 405, shape(err), [(b"allow", allow.encode())])


def create_app(
    config: Config | None = None,
    *,
    tune_gc: bool = False,
    clock: Clock | None = None,
    reload_on_sighup: bool = False,
    extensions: Extensions | None = None,
    tracer_provider: TracerProvider | None = None,
) -> OmniRouteApp:
    """Build the ASGI app for ``config`` (defaults when ``None``); ``tune_gc`` for a dedicated server
    process (``omniroute serve``), not for apps embedded in a test process; ``clock`` is the time
    the gateway runs on (default the process clock; a :class:`~omniroute.clock.FakeClock` in tests);
    ``reload_on_sighup`` makes SIGHUP re-read the config file (the process's main event loop only:
    ``omniroute serve``); ``extensions`` adds combo strategies, auto routers and wire formats
    (:class:`~omniroute.extensions.Extensions`); ``tracer_provider``: an OpenTelemetry SDK
    ``TracerProvider`` to trace into (tests pass one with an in-memory exporter), else tracing follows
    the configuration (:func:`omniroute.observe.access.tracing_for`)."""
    return OmniRouteApp(
        config or Config(),
        tune_gc=tune_gc,
        clock=clock,
        reload_on_sighup=reload_on_sighup,
        extensions=extensions,
        tracer_provider=tracer_provider,
    )
