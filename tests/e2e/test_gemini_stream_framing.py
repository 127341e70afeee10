"""Gemini ``:streamGenerateContent`` framing: with ``?alt=sse`` the answer is SSE (what the google-genai
SDK asks for); without it, Google's REST API streams one JSON array (``[{…}\\r\\n,{…}\\r\\n]``) and so
does the gateway, whatever format the upstream speaks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from google import genai
from google.genai import types
from test_wire_formats import UPSTREAMS, answer, wire_config

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}


@pytest.fixture
def gw(make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]) -> GatewayThread:
    return make_gateway(wire_config(fakes))


def stream_array(gw: GatewayThread, model: str) -> tuple[httpx.Response, bytes]:
    with httpx.stream(
        "POST", f"{gw.url}/v1beta/models/{model}:streamGenerateContent", json=BODY, timeout=10
    ) as r:
        return r, r.read()


def texts(elements: list[dict[str, Any]]) -> str:
    return "".join(
        p.get("text", "")
        for e in elements
        for c in e.get("candidates") or ()
        for p in (c.get("content") or {}).get("parts") or ()
        if not p.get("thought")
    )


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_stream_without_alt_sse_is_a_streamed_json_array(gw: GatewayThread, upstream: str) -> None:
    model = UPSTREAMS[upstream][0] + "+chunks-3"
    r, raw = stream_array(gw, model)
    assert r.status_code == 200, raw
    assert r.headers["content-type"].startswith("application/json")
    assert raw.lstrip().startswith(b"[{") and raw.rstrip().endswith(b"]") and b"data:" not in raw
    elements = orjson.loads(raw)
    assert isinstance(elements, list) and len(elements) >= 2  # one element per streamed event
    assert texts(elements) == answer(upstream, "+chunks-3")
    last = elements[-1]
    assert last["candidates"][0]["finishReason"] == "STOP" and last["usageMetadata"]["totalTokenCount"] > 0


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_stream_with_alt_sse_stays_sse_for_the_genai_sdk(gw: GatewayThread, upstream: str) -> None:
    with httpx.stream(
        "POST",
        f"{gw.url}/v1beta/models/{UPSTREAMS[upstream][0]}:streamGenerateContent?alt=sse",
        json=BODY,
        timeout=10,
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        assert b"data: {" in r.read()
    client = genai.Client(api_key="unused", http_options=types.HttpOptions(base_url=gw.url))
    model = UPSTREAMS[upstream][0] + "+chunks-3"
    chunks = list(client.models.generate_content_stream(model=model, contents="hi"))
    assert "".join(c.text or "" for c in chunks) == answer(upstream, "+chunks-3")


def test_failure_after_commit_closes_the_array_with_an_error_element(gw: GatewayThread) -> None:
    _, raw = stream_array(gw, UPSTREAMS["openai"][0] + "+chunks-4+error-after-2")
    elements = orjson.loads(raw)
    assert texts(elements)  # content reached the client before the failure
    assert "error" in elements[-1] and elements[-1]["error"]["message"]
    assert not any(c.get("finishReason") for e in elements for c in e.get("candidates") or ())


def test_error_before_the_stream_is_a_gemini_json_error(gw: GatewayThread) -> None:
    r, raw = stream_array(gw, "no-such/model")
    assert r.status_code == 404
    assert orjson.loads(raw)["error"]["status"] == "NOT_FOUND"
