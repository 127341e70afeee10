"""A first run with real providers: keyless local servers (Ollama, llama.cpp, vLLM) serve ``auto`` like
any other connection, and an ``auto`` request nothing can serve says which connection was left out
and why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread


def _config(tmp: Path, fake: FakeProviderThread, *, base_url: str, api_key: str | None) -> dict[str, Any]:
    conn: dict[str, Any] = {"id": "local-1", "provider": "local", "default_model": "m"}
    if api_key is not None:
        conn["api_key"] = api_key
    return {
        "database_url": f"sqlite:///{tmp}/gw.db",
        "providers": [{"id": "local", "base_url": base_url, "models": [{"id": "m"}]}],
        "connections": [conn],
    }


def test_keyless_connection_to_a_local_server_serves_auto(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    gw = make_gateway(
        replace=_config(tmp_path, fakes["o"], base_url=f"{fakes['o'].base_url}/v1", api_key=None)
    )
    r = httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-connection"] == "local-1"
    assert "authorization" not in {k.lower() for k in fakes["o"].requests[-1].headers}


def test_auto_with_only_a_keyless_remote_connection_names_the_missing_key(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    cfg = _config(tmp_path, fakes["o"], base_url="https://api.example.com/v1", api_key=None)
    gw = make_gateway(replace=cfg)
    r = httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert r.status_code == 503
    err = r.json()
    assert "no API key" in err["error"]["message"]
    excluded = err["diagnostics"]["excluded"]
    assert excluded[0]["provider"] == "local" and "no API key" in excluded[0]["reason"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/models"),
        ("GET", "/v1/models/no-such-model"),
        ("GET", "/v1/chat/completions"),
        ("PUT", "/v1/messages"),
        ("GET", "/v1/nothing-here"),
        ("GET", "/health"),
        ("GET", "/health/ready"),
        ("GET", "/api/combos"),
        ("GET", "/metrics"),
    ],
)
def test_every_response_carries_a_request_id(gateway: GatewayThread, method: str, path: str) -> None:
    r = httpx.request(method, f"{gateway.url}{path}", timeout=10)
    assert r.headers.get("x-request-id"), (r.status_code, dict(r.headers))
    echoed = httpx.request(method, f"{gateway.url}{path}", headers={"x-request-id": "mine-1"}, timeout=10)
    assert echoed.headers["x-request-id"] == "mine-1"
