"""Secret redaction: an upstream that repeats the key it was sent (or any key-shaped text) in its
error message never gets that text to a client, the usage log, a stored decision, the resilience
state, the auto-combo candidate listing or the logs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.config import config_from_dict
from omniroute.resilience.redact import redact
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

# fault per provider: each leaves the upstream's text in a different place of the ladder
FAULTS = {
    "p500": "fail-500",  # breaker last_error
    "p429": "fail-429",  # connection cooldown reason
    "p401": "fail-401",  # invalid-credentials reason
    "p404": "fail-404",  # model lockout reason
    "pstream": "error-after-1",  # an error event after the stream reached the client
}
OTHER_KEY = "sk-proj-OTHERkey1234567890abcdef"


def secret_of(provider: str) -> str:
    """A connection secret that is not key-shaped: only the connection's own-secret pass finds it."""
    return f"opaque-secret-of-{provider}-0042"


@pytest.fixture
def leaky(tmp_path: Path) -> Iterator[tuple[GatewayThread, FakeProviderThread]]:
    fake = FakeProviderThread(name="leaky").start()
    for provider, fault in FAULTS.items():
        fake.set_behaviour(f"m-{provider}", f"{fault}+echo-key+msg-also_saw_{OTHER_KEY}_and")
    data: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path}/gw.db",
        "providers": [
            {"id": p, "base_url": f"{fake.base_url}/v1", "models": [{"id": f"m-{p}"}]} for p in FAULTS
        ],
        "connections": [{"id": f"{p}-c", "provider": p, "api_key": secret_of(p)} for p in FAULTS],
        "resilience": {"circuit_breaker": {"failure_threshold": 100}},
    }
    gw = GatewayThread(config_from_dict(data, env={})).start()
    yield gw, fake
    gw.stop()
    fake.stop()


def client_calls(gw: GatewayThread) -> list[httpx.Response]:
    """One failing request per provider through each of the four client surfaces, and embeddings."""
    out: list[httpx.Response] = []
    msgs = [{"role": "user", "content": "hi"}]
    for p in FAULTS:
        model = f"{p}/m-{p}"
        stream = p == "pstream"
        calls: list[tuple[str, dict[str, Any]]] = [
            ("/v1/chat/completions", {"model": model, "messages": msgs, "stream": stream}),
            ("/v1/messages", {"model": model, "messages": msgs, "max_tokens": 20, "stream": stream}),
            ("/v1/responses", {"model": model, "input": "hi", "stream": stream}),
        ]
        gemini = "streamGenerateContent?alt=sse" if stream else "generateContent"
        contents = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        calls.append((f"/v1beta/models/{model}:{gemini}", contents))
        for path, body in calls:
            out.append(httpx.post(f"{gw.url}{path}", json=body, timeout=30))
    embeddings = {"model": "p500/m-p500", "input": "hi"}
    out.append(httpx.post(f"{gw.url}/v1/embeddings", json=embeddings, timeout=30))
    return out


def test_no_sink_shows_the_connection_key_or_anything_key_shaped(
    leaky: tuple[GatewayThread, FakeProviderThread], caplog: pytest.LogCaptureFixture
) -> None:
    gw, fake = leaky
    caplog.set_level(logging.DEBUG)
    responses = client_calls(gw)
    assert all(r.status_code >= 400 or "error" in r.text for r in responses), "every call failed upstream"
    assert fake.calls() >= len(FAULTS), "the upstream was reached and answered with the key in its text"
    sinks = {
        "client bodies": "\n".join(r.text for r in responses),
        "usage rows": httpx.get(f"{gw.url}/api/usage?limit=1000", timeout=10).text,
        "decisions": "\n".join(
            httpx.get(f"{gw.url}/api/routing/decisions/{r.headers['x-request-id']}", timeout=10).text
            for r in responses
            if "x-request-id" in r.headers
        ),
        "resilience": httpx.get(f"{gw.url}/api/resilience", timeout=10).text,
        "candidates": httpx.get(f"{gw.url}/v1/auto-combo/auto/candidates", timeout=10).text,
        "logs": caplog.text,
    }
    assert "[redacted]" in sinks["client bodies"]
    assert "[redacted]" in sinks["usage rows"] and "[redacted]" in sinks["resilience"]
    for name, text in sinks.items():
        for p in FAULTS:
            assert secret_of(p) not in text, f"{p}'s key leaked into the {name}"
        assert "OTHERkey" not in text, f"a key-shaped string leaked into the {name}"
    for p in ("p429", "p401", "p404"):
        assert p in sinks["candidates"], "the candidates listing covers the cooled/invalid/locked ones"
    reasons = json.loads(sinks["candidates"])["data"]
    assert any(row["unreachable_reasons"] for row in reasons)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Wrong API key: sk-proj-abcDEF1234567890xyz.", "Wrong API key: [redacted]."),
        ("x-api-key sk-ant-api03-AAAA_bbbb-1234", "x-api-key [redacted]"),
        ("key AIzaSyA1234567890abcdefghijklmnopqrs bad", "key [redacted] bad"),
        ("got Authorization: Bearer abc.def-123456", "got Authorization: [redacted]"),
        ("GET https://h/v1beta/x?key=abc123&alt=sse", "GET https://h/v1beta/x?[redacted]&alt=sse"),
        ("token 0123456789abcdef0123456789abcdef!", "token [redacted]!"),
        ("tok Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5QUJDREVGR0hJSks= end", "tok [redacted] end"),
        ("the secret opaque-secret-of-p1-0042 leaked", "the secret [redacted] leaked"),
    ],
)
def test_key_shaped_text_is_redacted(text: str, expected: str) -> None:
    assert redact(text, "opaque-secret-of-p1-0042") == expected


@pytest.mark.parametrize(
    "text",
    [
        "model Meta-Llama-3-70B-Instruct-Turbo-Free not found",
        "m+fail-400+msg-context_length_exceeded",
        "Bearer authentication required",
        "This model's maximum context length is 8192 tokens.",
    ],
)
def test_ordinary_messages_are_left_alone(text: str) -> None:
    assert redact(text, "k1") == text
