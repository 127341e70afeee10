"""The per-request access line and trace (one of each per ``/v1`` inference request), off the hot path.

:class:`Observer` wraps one request: :meth:`Observer.begin` starts an :class:`AccessEntry` (the arrival
time, and a ``send`` that notes the response status and ``X-Request-Id``) and makes it the current
entry; the gateway's usage recorder hands the request's usage row and decision to :func:`note` (a
context-variable read and two attribute writes); :meth:`Observer.end` emits one ``INFO`` record on the
``omniroute.access`` logger with the fields below and, when tracing is configured, the request's spans
(:mod:`omniroute.observe.tracing`). The record is rendered by the log writer thread
(:mod:`omniroute.observe.logs`), not on the event loop.

Fields (JSON keys; the text line shows the same as ``key=value``): ``request_id``, ``method``, ``path``,
``status``, ``latency_ms``, and once the request was routed: ``route`` (how the model string resolved:
``combo``, ``auto``, ``provider/model``, …), ``key`` (the API key's name), ``requested_model``,
``model`` (the served ``provider/model``), ``provider``, ``connection``, ``strategy``, ``attempts``,
``ttft_ms``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd`` (USD, catalog prices) and
``error`` (the redacted failure message) — the usage row's names.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

from omniroute.observe.logs import FIELDS_ATTR, SUMMARY_ATTR, fields_text, redact_fields
from omniroute.resilience.redact import redact

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from omniroute.clock import Clock
    from omniroute.observe.metrics import Metrics
    from omniroute.observe.tracing import Tracing
    from omniroute.routing.decision import Decision

Scope = MutableMapping[str, Any]  # the ASGI shapes (as in omniroute.api.asgi, a layer above this one)
Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

access_log = logging.getLogger("omniroute.access")

IN_SUMMARY = frozenset({"method", "path", "status"})
"""Fields the access line's summary (``POST /v1/chat/completions 200``) already shows."""
CANCELLED = "cancelled unfinished: the server shut down after server.drain_timeout_s"
"""The access line's ``error`` (at WARNING) for a request still running when the drain time ran out."""

_CURRENT: ContextVar[AccessEntry | None] = ContextVar("omniroute_access", default=None)


class AccessEntry:
    """What is known about one request so far: ``t0`` (arrival, monotonic seconds on the gateway's
    clock), ``status`` and ``request_id`` from the response start, and the usage ``row`` and
    ``decision`` once the request was routed (``None`` before: a 400 or 401 is answered earlier)."""

    __slots__ = ("cancelled", "decision", "method", "path", "request_id", "row", "status", "t0", "token")

    def __init__(self, method: str, path: str, t0: float) -> None:
        self.method, self.path, self.t0 = method, path, t0
        self.status = 0
        self.request_id: str | None = None
        self.row: dict[str, Any] | None = None
        self.decision: Decision | None = None
        self.token: Token[AccessEntry | None] | None = None
        self.cancelled = False  # the server cancelled it (shutdown past server.drain_timeout_s)

    def wrap(self, send: Send) -> Send:
        """``send`` that notes the status and ``X-Request-Id`` of the response start."""

        async def noting(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                self.status = msg["status"]
                for name, value in msg.get("headers") or ():
                    if name.lower() == b"x-request-id":
                        self.request_id = value.decode("latin-1")
                        break
            await send(msg)

        return noting


def note(row: dict[str, Any], decision: Decision) -> None:
    """Attach a request's usage row (the gateway's ``record_usage`` row) and its decision to the current
    entry; nothing when no request is being observed (a gateway driven without the ASGI app)."""
    entry = _CURRENT.get()
    if entry is not None:
        entry.row, entry.decision = row, decision


def note_cancelled() -> None:
    """Mark the current request as cut by the server's shutdown past ``server.drain_timeout_s`` (its
    access line is then a WARNING with :data:`CANCELLED`); nothing when no request is observed."""
    entry = _CURRENT.get()
    if entry is not None:
        entry.cancelled = True


class Observer:
    """Emits the access line and the trace of each observed request.

    ``clock``: the gateway's clock (latency of requests answered before routing);
    ``key_name(api_key_id) -> name | None`` names the request's API key; ``metrics`` counts the
    requests in flight; ``tracing``: the trace emitter, ``None`` when tracing is off (the only cost is
    that check)."""

    def __init__(
        self,
        clock: Clock,
        key_name: Callable[[str], str | None],
        metrics: Metrics,
        tracing: Tracing | None = None,
    ) -> None:
        self.clock = clock
        self.key_name = key_name
        self.metrics = metrics
        self.tracing = tracing

    def begin(self, scope: Scope) -> AccessEntry:
        """Start observing the request of ``scope`` (it becomes the current entry)."""
        entry = AccessEntry(scope["method"], scope["path"], self.clock.monotonic())
        entry.token = _CURRENT.set(entry)
        self.metrics.request_started()
        return entry

    def end(self, entry: AccessEntry) -> None:
        """Emit the access line (and spans) of ``entry``; the request's response is complete. The entry
        lets go of the request's decision and usage row afterwards (PERF-5)."""
        self.metrics.request_finished()
        if entry.token is not None:
            _CURRENT.reset(entry.token)
            entry.token = None
        if self.tracing is not None and entry.decision is not None and entry.row is not None:
            self.tracing.record(entry.path, entry.row, entry.decision)
        level = logging.WARNING if entry.cancelled else logging.INFO
        if access_log.isEnabledFor(level):
            fields = self.fields(entry)
            if entry.cancelled:
                fields["error"] = CANCELLED
            summary = f"{entry.method} {entry.path} {fields['status']}"
            message = _AccessMessage(summary, fields)
            access_log.log(level, message, extra={FIELDS_ATTR: fields, SUMMARY_ATTR: summary})
        # a timer or task started during the request keeps the context it started in, and with it this
        # entry: let go of the request's decision (an auto one holds its scoring records) and row now
        entry.decision = entry.row = None

    def fields(self, entry: AccessEntry) -> dict[str, Any]:
        """The access-line fields of ``entry`` (see the module docstring)."""
        row = entry.row
        if row is None:
            latency = (self.clock.monotonic() - entry.t0) * 1000
            return {
                "request_id": entry.request_id,
                "method": entry.method,
                "path": entry.path,
                "status": entry.status,
                "latency_ms": round(latency, 1),
            }
        decision = entry.decision
        key_id = row["api_key_id"]
        return {
            "request_id": row["request_id"],
            "method": entry.method,
            "path": entry.path,
            "status": row["status"],
            "latency_ms": round(row["latency_ms"], 1),
            "route": decision.route if decision is not None else None,
            "key": self.key_name(key_id) if key_id else None,
            "requested_model": row["requested_model"],
            "model": f"{row['provider']}/{row['model']}" if row["provider"] else None,
            "provider": row["provider"],
            "connection": row["connection_id"],
            "strategy": row["strategy"],
            "attempts": row["attempts"],
            "ttft_ms": None if row["ttft_ms"] is None else round(row["ttft_ms"], 1),
            "prompt_tokens": row["prompt_tokens"],
            "completion_tokens": row["completion_tokens"],
            "cost_usd": row["cost_usd"],
            "error": row["error"],
        }


def tracing_for(endpoint: str | None, clock: Clock, provider: TracerProvider | None = None) -> Tracing | None:
    """The trace emitter for a gateway: into ``provider`` when given (tests), else over OTLP when
    ``endpoint`` (``server.otlp_endpoint``) or ``$OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else ``None``
    — and then the OpenTelemetry SDK is not even imported."""
    if provider is None and not endpoint and not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return None
    from omniroute.observe.tracing import Tracing, build_tracing

    return Tracing(provider, clock) if provider is not None else build_tracing(endpoint, clock)


class _AccessMessage:
    """The text of an access line for handlers other than the gateway's own formatters (which read the
    fields): ``POST /v1/chat/completions 200 request_id=… key=… …``, redacted, built only when a
    handler formats the record."""

    __slots__ = ("fields", "summary")

    def __init__(self, summary: str, fields: dict[str, Any]) -> None:
        self.summary, self.fields = summary, fields

    def __str__(self) -> str:
        return fields_text(redact(self.summary), redact_fields(self.fields), IN_SUMMARY)


__all__ = ["AccessEntry", "Observer", "access_log", "note", "tracing_for"]
