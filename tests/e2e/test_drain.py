"""SIGTERM drains a real ``omniroute serve``: new connections are refused, the stream in flight finishes
whole, its usage row and decision are written, and the process exits 0; readiness says draining."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from serve_support import Served

from omniroute.testing.gateway import GatewayThread


def _chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {"id": "chatcmpl-gated", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return b"data: " + json.dumps({**body, "choices": choices, **extra}).encode() + b"\n\n"


class GatedUpstream(BaseHTTPRequestHandler):
    """An OpenAI-compatible stream that sends ``Hello`` and then waits for ``release`` before the rest:
    the test decides when the stream in flight may finish."""

    arrived: ClassVar[threading.Event] = threading.Event()
    release: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(_chunk({"role": "assistant", "content": ""}) + _chunk({"content": "Hello"}))
        self.wfile.flush()
        GatedUpstream.arrived.set()
        GatedUpstream.release.wait(60)
        for piece in (" whole", " world"):
            self.wfile.write(_chunk({"content": piece}))
            self.wfile.flush()
        usage = {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}
        self.wfile.write(_chunk({}, "stop") + _chunk(None, usage=usage) + b"data: [DONE]\n\n")
        self.wfile.flush()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def gated() -> Iterator[str]:
    GatedUpstream.arrived.clear()
    GatedUpstream.release.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), GatedUpstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    GatedUpstream.release.set()
    server.shutdown()


def config(base_url: str, tmp: Path) -> dict[str, Any]:
    return {
        "database_url": f"sqlite:///{tmp}/gw.db",
        "providers": [{"id": "gated", "format": "openai", "base_url": base_url, "models": [{"id": "m"}]}],
        "connections": [{"id": "gated-1", "provider": "gated", "api_key": "k"}],
    }


def refused(url: str) -> bool:
    try:
        httpx.get(f"{url}/health", timeout=2)
    except httpx.ConnectError:
        return True
    return False


def test_sigterm_lets_the_stream_in_flight_finish_whole_and_refuses_new_connections(
    tmp_path: Path, gated: str
) -> None:
    served = Served(tmp_path, config(gated, tmp_path), "--log-format", "json").wait_ready()
    received: list[str] = []
    headers: dict[str, str] = {}

    def stream() -> None:
        body = {"model": "gated/m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        with httpx.stream("POST", f"{served.url}/v1/chat/completions", json=body, timeout=60) as r:
            headers.update(r.headers)
            received.extend(line for line in r.iter_lines() if line)

    client = threading.Thread(target=stream)
    try:
        client.start()
        assert GatedUpstream.arrived.wait(30), "the stream never reached the upstream"
        served.proc.send_signal(15)  # SIGTERM while the stream waits for the rest of its answer
        deadline = time.monotonic() + 30
        while not refused(served.url):
            assert time.monotonic() < deadline, "new connections still accepted after SIGTERM"
            time.sleep(0.05)
        assert client.is_alive() and served.proc.poll() is None, "the stream in flight is still served"
        GatedUpstream.release.set()
        client.join(30)
        assert served.proc.wait(30) == 0
    finally:
        GatedUpstream.release.set()
        served.kill()
    events = [line.removeprefix("data: ") for line in received]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello whole world"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"

    rid = headers["x-request-id"]
    messages = [x["message"] for x in served.json_lines()]
    draining = next(i for i, m in enumerate(messages) if m.startswith("SIGTERM: draining"))
    assert "1 request(s) in flight" in messages[draining]
    access = next(i for i, x in enumerate(served.json_lines()) if x.get("request_id") == rid)
    assert draining < access < messages.index("drained: usage and decisions written; exiting")
    with sqlite3.connect(tmp_path / "gw.db") as db:
        usage = db.execute("select status, completion_tokens from usage_log where request_id = ?", (rid,))
        assert usage.fetchall() == [(200, 3)]
        decisions = db.execute("select count(*) from routing_decisions where request_id = ?", (rid,))
        assert decisions.fetchone() == (1,)


def test_readiness_is_503_while_draining_and_200_when_degraded(make_gateway: Any) -> None:
    gw: GatewayThread = make_gateway({"redis_url": "redis://127.0.0.1:1/0"})
    ready = httpx.get(f"{gw.url}/health/ready", timeout=10)
    assert ready.status_code == 200 and ready.json()["status"] == "degraded"
    metrics = httpx.get(f"{gw.url}/metrics", timeout=10).text
    assert "omniroute_routing_state_degraded 1.0" in metrics

    async def sigterm(_: Any) -> None:
        gw.app.begin_drain()  # what the SIGTERM handler of omniroute serve runs

    gw.call(sigterm)
    ready = httpx.get(f"{gw.url}/health/ready", timeout=10)
    assert ready.status_code == 503 and ready.json()["status"] == "draining"


def test_a_request_still_running_when_the_drain_time_is_up_is_cut_and_logged(
    tmp_path: Path, gated: str
) -> None:
    cfg = {**config(gated, tmp_path), "server": {"drain_timeout_s": 1}}
    served = Served(tmp_path, cfg, "--log-format", "json").wait_ready()
    received: list[str] = []
    outcome: list[BaseException | None] = []
    headers: dict[str, str] = {}

    def stream() -> None:
        body = {"model": "gated/m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        try:
            with httpx.stream("POST", f"{served.url}/v1/chat/completions", json=body, timeout=60) as r:
                headers.update(r.headers)
                received.extend(line for line in r.iter_lines() if line)
        except httpx.HTTPError as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    client = threading.Thread(target=stream)
    try:
        client.start()
        assert GatedUpstream.arrived.wait(30), "the stream never reached the upstream"
        served.proc.send_signal(15)  # the upstream is never released: the drain time runs out
        assert served.proc.wait(60) == 0
        client.join(30)
    finally:
        GatedUpstream.release.set()
        served.kill()
    assert "data: [DONE]" not in received, "a cut stream never reads as complete"
    assert received and received[0].startswith("data: ")
    rid = headers["x-request-id"]
    (line,) = [x for x in served.json_lines() if x.get("request_id") == rid]
    assert line["level"] == "WARNING" and "drain_timeout_s" in line["error"]


def test_a_stream_cut_by_the_drain_timeout_gets_the_error_event_and_a_usage_row_without_a_traceback(
    tmp_path: Path, gated: str
) -> None:
    """The drain time runs out while a stream waits for its upstream: the client reads the error
    event (never ``[DONE]``), the log has no traceback, and the usage row charges what was sent."""
    cfg = {**config(gated, tmp_path), "server": {"drain_timeout_s": 1}}
    served = Served(tmp_path, cfg, "--log-format", "json").wait_ready()
    received: list[str] = []
    headers: dict[str, str] = {}

    def stream() -> None:
        body = {"model": "gated/m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        url = f"{served.url}/v1/chat/completions"
        with contextlib.suppress(httpx.HTTPError), httpx.stream("POST", url, json=body, timeout=60) as r:
            headers.update(r.headers)
            received.extend(line for line in r.iter_lines() if line)

    client = threading.Thread(target=stream)
    try:
        client.start()
        assert GatedUpstream.arrived.wait(30), "the stream never reached the upstream"
        served.proc.send_signal(15)  # the upstream is never released: the drain time runs out
        assert served.proc.wait(60) == 0
        client.join(30)
    finally:
        GatedUpstream.release.set()
        served.kill()
    assert "data: [DONE]" not in received
    last = json.loads(received[-1].removeprefix("data: "))
    assert "error" in last and "drain_timeout_s" in last["error"]["message"]
    log = served.log_text()
    assert "Traceback" not in log and "Exception in ASGI application" not in log
    with sqlite3.connect(tmp_path / "gw.db") as db:
        rows = db.execute(
            "select status, completion_tokens, error from usage_log where request_id = ?",
            (headers["x-request-id"],),
        ).fetchall()
    assert len(rows) == 1
    status, completion_tokens, error = rows[0]
    assert status == 503 and completion_tokens >= 1 and "drain_timeout_s" in error
