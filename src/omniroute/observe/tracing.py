"""OpenTelemetry traces: a span per request with a child span per upstream attempt, carrying the GenAI
semantic-convention attributes (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/).

Off unless configured: :func:`build_tracing` returns ``None`` when neither ``server.otlp_endpoint`` nor
``$OTEL_EXPORTER_OTLP_ENDPOINT`` is set, and the request path then pays one ``None`` check. When on, the
spans are made once the response is complete, from the request's decision (each attempt's start and
duration on the gateway's clock), with the times they really had, and a batch processor exports them
over OTLP/HTTP from its own thread (the ``otlp`` extra: ``pip install 'omniroute[otlp]'``).

Spans: ``{operation} {requested model}`` (kind SERVER, the request) with ``gen_ai.operation.name``
(``chat`` or ``embeddings``), ``gen_ai.request.model`` (the model string the client sent),
``gen_ai.response.model`` and ``gen_ai.system`` (the provider that served it), ``gen_ai.usage.input_tokens``
/ ``gen_ai.usage.output_tokens``, ``http.route``, ``http.response.status_code``, ``omniroute.route``,
``omniroute.strategy``, ``omniroute.request_id``; and per attempt ``{operation} {model}`` (kind CLIENT) with
``gen_ai.system`` (the provider id), ``gen_ai.request.model`` (the upstream model id),
``omniroute.connection`` and ``http.response.status_code``. A failed request or attempt has status ERROR
and ``error.type`` (the HTTP status code as text, as the conventions ask when there is no exception
type). Text a client or an upstream supplied (model names, error messages) passes the secret redactor
first, as in the logs.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

from omniroute.resilience.redact import redact

if TYPE_CHECKING:
    from omniroute.clock import Clock
    from omniroute.routing.decision import Decision

log = logging.getLogger("omniroute.observe")

SERVICE_NAME = "omniroute"
"""``service.name`` of the spans unless ``$OTEL_SERVICE_NAME`` names another."""
OTLP_TRACES_PATH = "/v1/traces"
"""Appended to the configured endpoint, as the OTLP exporter specification does for the base URL."""


class Tracing:
    """Emits the spans of finished requests through ``provider`` (an SDK ``TracerProvider``; tests pass
    one with an in-memory exporter). ``clock`` is the gateway's: attempt starts are monotonic
    readings converted to epoch nanoseconds against it."""

    def __init__(self, provider: TracerProvider, clock: Clock) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("omniroute")
        self.clock = clock

    def record(self, path: str, row: dict[str, Any], decision: Decision) -> None:
        """The request span and its attempt spans, for a request whose usage ``row`` (the gateway's
        usage-log row: ``ts`` epoch s at completion, ``latency_ms``, tokens, status) and ``decision``
        are final."""
        operation = "embeddings" if path.endswith("/embeddings") else "chat"
        requested = redact(row["requested_model"])  # client text: a key pasted as a model name
        end_ns = int(row["ts"] * 1e9)
        start_ns = int(decision.ts * 1e9) if decision.ts else end_ns - int(row["latency_ms"] * 1e6)
        status = int(row["status"])
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.request.model": requested,
            "http.route": redact(path),
            "http.response.status_code": status,
            "omniroute.route": decision.route,
            "omniroute.strategy": decision.strategy,
            "omniroute.request_id": row["request_id"],
            "omniroute.attempts": len(decision.attempts),
        }
        if row["provider"]:
            attrs["gen_ai.system"] = row["provider"]
            attrs["gen_ai.response.model"] = redact(row["model"])
            attrs["gen_ai.usage.input_tokens"] = row["prompt_tokens"]
            attrs["gen_ai.usage.output_tokens"] = row["completion_tokens"]
        if decision.combo:
            attrs["omniroute.combo"] = decision.combo
        span = self.tracer.start_span(
            f"{operation} {row['requested_model']}",
            kind=SpanKind.SERVER,
            attributes=attrs,
            start_time=start_ns,
        )
        if status >= 400:
            span.set_attribute("error.type", str(status))
            span.set_status(Status(StatusCode.ERROR, redact(row["error"]) if row["error"] else None))
        self._attempts(span, operation, decision, row, end_ns)
        span.end(end_time=end_ns)

    def _attempts(
        self, parent: Any, operation: str, decision: Decision, row: dict[str, Any], end_ns: int
    ) -> None:
        ctx = set_span_in_context(parent)
        # a monotonic reading → epoch ns: both clocks read now, once per request
        offset_ns = int((self.clock.time() - self.clock.monotonic()) * 1e9)
        last = len(decision.attempts) - 1
        for i, a in enumerate(decision.attempts):
            model = redact(a.model)
            a_start = int(a.started_s * 1e9) + offset_ns if a.started_s is not None else end_ns
            a_end = a_start + int(a.latency_ms * 1e6)
            served = i == last and a.status < 400 and row["provider"] == a.provider
            if served and row["stream"]:
                a_end = max(a_end, end_ns)  # the committed stream ran until the response ended
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": operation,
                "gen_ai.system": a.provider,
                "gen_ai.request.model": model,
                "omniroute.connection": a.connection,
                "http.response.status_code": a.status,
            }
            if served:
                attrs["gen_ai.response.model"] = model
                attrs["gen_ai.usage.input_tokens"] = row["prompt_tokens"]
                attrs["gen_ai.usage.output_tokens"] = row["completion_tokens"]
            span = self.tracer.start_span(
                f"{operation} {a.model}",
                context=ctx,
                kind=SpanKind.CLIENT,
                attributes=attrs,
                start_time=a_start,
            )
            if a.status >= 400:
                span.set_attribute("error.type", str(a.status))
                span.set_status(Status(StatusCode.ERROR, redact(a.reason)))
            span.end(end_time=min(a_end, end_ns) if not served else a_end)

    def shutdown(self) -> None:
        """Export what is queued and stop the provider's processors (at gateway stop)."""
        self.provider.shutdown()


def build_tracing(endpoint: str | None, clock: Clock) -> Tracing | None:
    """Tracing for a gateway: ``endpoint`` (``server.otlp_endpoint``, an OTLP/HTTP base URL such as
    ``http://collector:4318``) or else ``$OTEL_EXPORTER_OTLP_ENDPOINT``; ``None`` (tracing off) when
    neither is set, or when the OTLP exporter is not installed (logged as an error naming the extra)."""
    env_endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint and not env_endpoint:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.error(
            "tracing is configured (%s) but the OTLP exporter is not installed: "
            "pip install 'omniroute[otlp]'; tracing is off",
            "server.otlp_endpoint" if endpoint else "OTEL_EXPORTER_OTLP_ENDPOINT",
        )
        return None
    exporter = (
        OTLPSpanExporter(endpoint=endpoint.rstrip("/") + OTLP_TRACES_PATH) if endpoint else OTLPSpanExporter()
    )
    attrs = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
    provider = TracerProvider(resource=Resource.create(attrs))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    log.info("tracing on: spans exported over OTLP/HTTP to %s", endpoint or env_endpoint)
    return Tracing(provider, clock)


__all__ = ["Tracing", "build_tracing"]
