"""Traces: a span per request and a child span per upstream attempt with the GenAI semantic-convention
attributes, read from an in-memory exporter; and over OTLP/HTTP to a collector when configured."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import openai
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conftest import base_config, merge
from omniroute.config import config_from_dict
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

COMBO = {
    "combos": [{"name": "duo", "strategy": "priority", "targets": ["local-o/model-o", "local-c/model-c"]}]
}
NO_RETRIES = {"resilience": {"retries": {"per_target": 0}}}


@pytest.fixture
def traced(
    tmp_path: Path, fakes: dict[str, FakeProviderThread]
) -> Iterator[tuple[GatewayThread, InMemorySpanExporter]]:
    for f in fakes.values():
        f.reset()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = config_from_dict(merge(merge(base_config(fakes, tmp_path), COMBO), NO_RETRIES), env={})
    gw = GatewayThread(config, tracer_provider=provider).start()
    yield gw, exporter
    gw.stop()
    fakes["o"].set_behaviour("model-o", "")


def by_kind(spans: tuple[ReadableSpan, ...], kind: SpanKind) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_time or 0)


def test_a_request_span_with_one_child_span_per_attempt(
    traced: tuple[GatewayThread, InMemorySpanExporter], fakes: dict[str, FakeProviderThread]
) -> None:
    gw, exporter = traced
    fakes["o"].set_behaviour("model-o", "fail-500")
    client = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="duo", messages=[{"role": "user", "content": "one two three"}]
    )
    gw.wait_idle()  # the spans are made once the response is complete
    spans = exporter.get_finished_spans()
    (request,) = by_kind(spans, SpanKind.SERVER)
    failed, served = by_kind(spans, SpanKind.CLIENT)
    assert request.name == "chat duo"
    attrs = dict(request.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "duo"
    assert attrs["gen_ai.system"] == "local-c" and attrs["gen_ai.response.model"] == "model-c"
    usage = raw.parse().usage
    assert usage is not None
    assert attrs["gen_ai.usage.input_tokens"] == usage.prompt_tokens == 3
    assert attrs["gen_ai.usage.output_tokens"] == usage.completion_tokens
    assert attrs["omniroute.request_id"] == raw.headers["x-request-id"]
    assert attrs["omniroute.combo"] == "duo" and attrs["http.response.status_code"] == 200
    assert request.status.status_code != StatusCode.ERROR and "error.type" not in attrs

    for child in (failed, served):
        assert child.parent is not None and child.parent.span_id == request.context.span_id
        assert child.context.trace_id == request.context.trace_id
        assert request.start_time is not None and request.end_time is not None
        assert child.start_time is not None and child.end_time is not None
        assert request.start_time <= child.start_time <= child.end_time <= request.end_time
    assert failed.end_time is not None and served.start_time is not None
    assert failed.end_time <= served.start_time, "the attempts ran one after the other"
    f_attrs, s_attrs = dict(failed.attributes or {}), dict(served.attributes or {})
    assert failed.name == "chat model-o" and f_attrs["gen_ai.system"] == "local-o"
    assert f_attrs["gen_ai.request.model"] == "model-o" and f_attrs["error.type"] == "500"
    assert failed.status.status_code == StatusCode.ERROR and "gen_ai.usage.input_tokens" not in f_attrs
    assert s_attrs["gen_ai.system"] == "local-c" and s_attrs["gen_ai.response.model"] == "model-c"
    assert s_attrs["gen_ai.usage.input_tokens"] == 3 and s_attrs["omniroute.connection"] == "c1"
    assert "error.type" not in s_attrs


def test_a_failed_request_and_a_stream_and_embeddings(
    traced: tuple[GatewayThread, InMemorySpanExporter], fakes: dict[str, FakeProviderThread]
) -> None:
    gw, exporter = traced
    fakes["o"].set_behaviour("model-o", "fail-502")
    fakes["c"].set_behaviour("model-c", "fail-500")
    try:
        r = httpx.post(
            f"{gw.base_url}/chat/completions",
            json={"model": "duo", "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
    finally:
        fakes["c"].set_behaviour("model-c", "")
        fakes["o"].set_behaviour("model-o", "")
    assert r.status_code == 503
    gw.wait_idle()
    (request,) = by_kind(exporter.get_finished_spans(), SpanKind.SERVER)
    assert request.status.status_code == StatusCode.ERROR
    assert dict(request.attributes or {})["error.type"] == "503"
    assert "gen_ai.response.model" not in dict(request.attributes or {})
    assert [
        dict(s.attributes or {})["error.type"]
        for s in by_kind(exporter.get_finished_spans(), SpanKind.CLIENT)
    ] == [
        "502",
        "500",
    ]

    exporter.clear()
    client = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model="local-c/model-c", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    )
    assert chunks
    client.embeddings.create(model="local-o/model-o", input=["a b"])
    gw.wait_idle()
    spans = exporter.get_finished_spans()
    stream_req, embed_req = by_kind(spans, SpanKind.SERVER)
    stream_attempt, embed_attempt = by_kind(spans, SpanKind.CLIENT)
    assert stream_attempt.end_time == stream_req.end_time, "the served stream's span lasts to its end"
    assert dict(embed_req.attributes or {})["gen_ai.operation.name"] == "embeddings"
    assert embed_req.name == "embeddings local-o/model-o"
    assert dict(embed_attempt.attributes or {})["gen_ai.operation.name"] == "embeddings"


def test_tracing_is_off_unless_configured(make_gateway: Any) -> None:
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in os.environ
    gw = make_gateway()
    assert gw.app.observer.tracing is None


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        _Collector.received.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_spans_go_to_the_configured_otlp_endpoint(
    make_gateway: Any, fakes: dict[str, FakeProviderThread]
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Collector.received = []
    try:
        gw = make_gateway({"server": {"otlp_endpoint": f"http://127.0.0.1:{server.server_port}"}})
        client = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)
        client.chat.completions.create(model="local-o/model-o", messages=[{"role": "user", "content": "hi"}])
        gw.wait_idle()
        gw.stop()  # the batch processor exports what it holds at shutdown
    finally:
        server.shutdown()
    assert [path for path, _ in _Collector.received] == ["/v1/traces"]
    export = ExportTraceServiceRequest.FromString(_Collector.received[0][1])
    (resource_spans,) = export.resource_spans
    resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert resource["service.name"] == "omniroute"
    names = sorted(s.name for scope in resource_spans.scope_spans for s in scope.spans)
    assert names == ["chat local-o/model-o", "chat model-o"]
