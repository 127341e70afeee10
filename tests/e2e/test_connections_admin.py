"""Connections and providers through the management API (PROV-2, PROV-3, RESIL-2, AUTO-2)."""

from __future__ import annotations

import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread


def chat(gw: GatewayThread, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "x"}]}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=10)


def test_provider_and_connection_added_at_runtime_serve_next_request(
    gateway: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """PROV-2/PROV-3: a custom provider and its connection added via the API serve at once; the secret
    is never returned; bad input is a 400 naming the field."""
    api = httpx.Client(base_url=gateway.url, timeout=10)
    assert chat(gateway, "newp/m1").status_code == 404
    bad = api.post("/api/providers", json={"id": "newp", "models": [{"id": "m1"}]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "base_url"
    r = api.post(
        "/api/providers",
        json={
            "id": "newp",
            "base_url": f"{fakes['c'].base_url}/v1",
            "models": [{"id": "m1", "input_price": 1, "output_price": 2, "context_window": 8000}],
        },
    )
    assert r.status_code == 201, r.text
    bad = api.post("/api/connections", json={"id": "n1", "provider": "nope", "api_key": "k"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "provider"
    bad = api.post("/api/connections", json={"id": "n1", "provider": "newp", "priority": "high"})
    assert bad.status_code == 400 and "priority" in bad.json()["error"]["param"]
    r = api.post("/api/connections", json={"id": "n1", "provider": "newp", "api_key": "sk-secret-123456"})
    assert r.status_code == 201 and "sk-secret-123456" not in r.text
    served = chat(gateway, "newp/m1")
    assert served.status_code == 200 and served.headers["x-omniroute-connection"] == "n1"
    providers = {p["id"]: p for p in api.get("/api/providers").json()["data"]}
    assert providers["newp"]["connected"] is True
    assert api.put("/api/connections/n1", json={"is_active": False}).status_code == 200
    assert chat(gateway, "newp/m1").status_code == 404
    assert api.delete("/api/connections/n1").status_code == 200
    assert api.get("/api/connections/n1").status_code == 404


def test_replacing_a_secret_clears_invalid_credentials(
    gateway: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """RESIL-2: 401 marks a connection invalid until an operator fixes it; a new key through the API
    makes it usable again at once."""
    api = httpx.Client(base_url=gateway.url, timeout=10)
    assert chat(gateway, "local-o/model-o+fail-401").status_code >= 400
    assert "o1" in api.get("/api/resilience").json()["invalid"]
    assert chat(gateway, "local-o/model-o").status_code == 503
    assert api.put("/api/connections/o1", json={"api_key": "sk-new"}).status_code == 200
    assert "o1" not in api.get("/api/resilience").json()["invalid"]
    assert chat(gateway, "local-o/model-o").status_code == 200


@pytest.mark.parametrize("status", [401, 403])
def test_an_upstream_auth_failure_is_a_503_not_the_clients_auth_error(
    gateway: GatewayThread, fakes: dict[str, FakeProviderThread], status: int
) -> None:
    """RESIL-7: the upstream rejecting the gateway's own connection key is not the client's 401/403
    (SDKs would raise an authentication error at the client): the exhaustion error is a 503."""
    r = chat(gateway, f"local-o/model-o+fail-{status}")
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] == "fallback_exhausted" and err["type"] == "server_error"
    assert r.json()["diagnostics"]["attempted"][0]["status"] == status
    httpx.post(f"{gateway.url}/api/resilience/reset", json={}, timeout=10)
