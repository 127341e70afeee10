"""Where provider keys may go: model ids cannot steer a Gemini upstream to another path, ``base_url``
follows the address policy on every write and again at request time, and repointing a connection
drops its secret."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.config import ConfigError, config_from_dict
from omniroute.core.egress import EgressDenied, EgressPolicy, path_segment
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

GEMINI_OK = {
    "candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
    "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
}
MSGS = [{"role": "user", "content": "hi"}]


class Recorder:
    """A Gemini-shaped upstream that answers every path and records each request's raw path."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.paths.append(self.path)
                self.rfile.read(int(self.headers.get("content-length") or 0))
                body = json.dumps(GEMINI_OK).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.stop()


def gateway_for(tmp_path: Path, extra: dict[str, Any]) -> GatewayThread:
    data: dict[str, Any] = {"database_url": f"sqlite:///{tmp_path}/gw.db", **extra}
    return GatewayThread(config_from_dict(data, env={})).start()


@pytest.mark.parametrize(
    "model",
    [
        "gfake/../../../v1beta/cachedContents?",
        "gfake/../../v1beta/files#",
        "gfake/gemini-x:countTokens?x=",
        "gfake/a/%2e%2e/%2e%2e/files",
    ],
)
def test_a_model_id_never_reaches_another_path_on_a_gemini_upstream(
    tmp_path: Path, recorder: Recorder, model: str
) -> None:
    gw = gateway_for(
        tmp_path,
        {
            "providers": [
                {
                    "id": "gfake",
                    "format": "gemini",
                    "base_url": recorder.base_url,
                    "models": [{"id": "gemini-x"}],
                }
            ],
            "connections": [{"id": "g1", "provider": "gfake", "api_key": "gem-key-0001"}],
        },
    )
    try:
        with httpx.Client(base_url=gw.url, timeout=30) as c:
            ok = c.post("/v1/chat/completions", json={"model": "gfake/gemini-x", "messages": MSGS})
            bad = c.post("/v1/chat/completions", json={"model": model, "messages": MSGS})
    finally:
        gw.stop()
    assert ok.status_code == 200, ok.text
    assert all(p.startswith("/v1beta/models/") for p in recorder.paths), recorder.paths
    assert all(p.count("/") == 3 and "?" not in p and ".." not in p for p in recorder.paths), recorder.paths
    if bad.status_code == 200:  # encoded into a single (unknown) model name, never a different path
        assert len(recorder.paths) == 2
    else:
        assert bad.status_code in (400, 404), bad.text
        assert bad.json()["error"]["message"]


def test_model_ids_are_checked_and_encoded_as_one_path_segment() -> None:
    assert path_segment("gemini-2.5-flash") == "gemini-2.5-flash"
    assert path_segment("org/model:tag") == "org%2Fmodel%3Atag"
    assert path_segment("m+args-%7B%7D") == "m%2Bargs-%257B%257D", "a % is escaped, never decoded"
    for bad in ["../x", "a/../b", "a/./b", "a?b", "a#b", "a b", "", "a//b", "/a", "a\\b"]:
        with pytest.raises(ValueError, match="not a valid model id"):
            path_segment(bad)


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://[fe80::1]/v1",
        "http://metadata.google.internal/computeMetadata/v1",
        "http://[::ffff:169.254.169.254]/",
    ],
)
def test_metadata_and_link_local_base_urls_are_always_refused(url: str) -> None:
    permissive = EgressPolicy(allow_loopback=True, allow_private=True)
    with pytest.raises(EgressDenied, match="always refused"):
        permissive.check_url(url)


def test_loopback_and_private_ranges_follow_the_config() -> None:
    default = EgressPolicy()
    for url in ["http://127.0.0.1:8080/v1", "http://localhost:11434", "http://10.1.2.3/v1", "http://[::1]/"]:
        default.check_url(url)
    strict = EgressPolicy(allow_loopback=False, allow_private=False)
    for url in [
        "http://127.0.0.1:8080/v1",
        "http://localhost:11434",
        "http://10.1.2.3/v1",
        "http://192.168.0.9",
    ]:
        with pytest.raises(EgressDenied):
            strict.check_url(url)
    strict.check_url("https://api.openai.com/v1")


def test_the_config_file_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict(
            {
                "connections": [
                    {"id": "c", "provider": "openai", "api_key": "k", "base_url": "http://169.254.169.254/"}
                ]
            },
            env={},
        )
    assert "connections[0].base_url" in str(err.value)
    with pytest.raises(ConfigError, match=r"providers\[0\]\.base_url"):
        config_from_dict(
            {
                "security": {"allow_private_base_urls": False},
                "providers": [{"id": "lan", "base_url": "http://192.168.1.5:8000/v1"}],
            },
            env={},
        )
    with pytest.raises(ConfigError, match="denied_base_url_hosts"):
        config_from_dict({"security": {"denied_base_url_hosts": ["not a host!"]}}, env={})


def test_the_management_api_refuses_a_metadata_base_url(tmp_path: Path) -> None:
    gw = gateway_for(tmp_path, {})
    try:
        with httpx.Client(base_url=gw.url, timeout=30) as c:
            r1 = c.post(
                "/api/connections",
                json={
                    "id": "c1",
                    "provider": "openai",
                    "api_key": "k-1",
                    "base_url": "http://169.254.169.254/v1",
                },
            )
            r2 = c.post("/api/providers", json={"id": "meta", "base_url": "http://[fd00:ec2::254]/v1"})
            c.post("/api/connections", json={"id": "c2", "provider": "openai", "api_key": "k-2"})
            r3 = c.put("/api/connections/c2", json={"base_url": "http://169.254.170.2/v1"})
    finally:
        gw.stop()
    for r in (r1, r2, r3):
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == "base_url"


def test_a_name_that_resolves_to_a_refused_address_is_refused_at_request_time(tmp_path: Path) -> None:
    """The write-time check sees only the name; the resolved address is checked when connecting."""
    with FakeProviderThread(name="local") as fake:
        port = fake.base_url.rsplit(":", 1)[1]
        gw = gateway_for(
            tmp_path,
            {
                "security": {"denied_base_url_hosts": ["127.0.0.0/8", "::1/128"]},
                "providers": [
                    {"id": "p", "base_url": f"http://localhost:{port}/v1", "models": [{"id": "m"}]}
                ],
                "connections": [{"id": "c", "provider": "p", "api_key": "secret-never-sent"}],
            },
        )
        try:
            with httpx.Client(base_url=gw.url, timeout=30) as c:
                r = c.post("/v1/chat/completions", json={"model": "p/m", "messages": MSGS})
        finally:
            gw.stop()
        assert fake.requests == []
    assert r.status_code in (502, 503), r.text
    assert "secret-never-sent" not in r.text


def test_repointing_a_connection_drops_its_secret_unless_a_new_one_is_given(tmp_path: Path) -> None:
    with FakeProviderThread(name="a") as old, FakeProviderThread(name="b") as new:
        gw = gateway_for(
            tmp_path,
            {
                "providers": [{"id": "p", "base_url": f"{old.base_url}/v1", "models": [{"id": "m"}]}],
                "connections": [{"id": "c", "provider": "p", "api_key": "sk-old-secret-1234"}],
            },
        )
        try:
            with httpx.Client(base_url=gw.url, timeout=30) as c:
                r = c.put("/api/connections/c", json={"base_url": f"{new.base_url}/v1"})
                assert r.status_code == 200, r.text
                c.post("/v1/chat/completions", json={"model": "p/m", "messages": MSGS})
                seen = [q.headers for q in new.requests]
                r = c.put(
                    "/api/connections/c", json={"base_url": f"{old.base_url}/v1", "api_key": "sk-fresh-5678"}
                )
                assert r.status_code == 200, r.text
                ok = c.post("/v1/chat/completions", json={"model": "p/m", "messages": MSGS})
        finally:
            gw.stop()
        assert all("sk-old-secret-1234" not in json.dumps(h) for h in seen), seen
        assert ok.status_code == 200, ok.text
        assert old.requests[-1].headers.get("authorization") == "Bearer sk-fresh-5678"


def test_the_cli_refuses_a_base_url_the_policy_refuses(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from omniroute.cli.main import app as cli_app

    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"database_url: 'sqlite:///{tmp_path}/o.db'\nsecurity: {{allow_private_base_urls: false}}\n"
    )
    cases = [
        ("providers", "add", "meta", "--base-url", "http://169.254.169.254/v1"),
        ("providers", "add", "lan", "--base-url", "http://192.168.1.9:8000/v1"),
        ("connections", "add", "c1", "--provider", "openai", "--base-url", "http://[fd00:ec2::254]/"),
    ]
    for args in cases:
        out = CliRunner().invoke(cli_app, [*args, "--config", str(cfg)], env={"COLUMNS": "200", "K": "x"})
        assert out.exit_code == 2, (args, out.output)
        text = " ".join(out.output.split())
        assert "base_url:" in text and ("always refused" in text or "private address" in text), text
