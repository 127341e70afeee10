"""Error messages a client reads use JSON's words and the names the client sent: "an auto route",
"got object"/"must be an array" (not Python's dict/tuple), a UTF-8 ``X-Route-Model`` echoed as sent,
and an unknown provider in a resilience reset is a 404 naming it."""

from __future__ import annotations

import httpx

from omniroute.testing.gateway import GatewayThread


def test_embeddings_for_auto_says_an_auto_route(gateway: GatewayThread) -> None:
    r = httpx.post(f"{gateway.base_url}/embeddings", json={"model": "auto", "input": "hi"}, timeout=10)
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "'auto' is an auto route" in message, message


def test_messages_of_the_wrong_type_are_named_in_json_terms(gateway: GatewayThread) -> None:
    r = httpx.post(f"{gateway.base_url}/chat/completions", json={"model": "x", "messages": {}}, timeout=10)
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "got object" in message and "dict" not in message, message
    r = httpx.post(
        f"{gateway.url}/api/combos", json={"name": "c", "targets": {"model": "local-o/model-o"}}, timeout=10
    )
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "targets" and err["message"] == "targets: must be an array", err


def test_non_ascii_route_model_header_is_echoed_as_sent(gateway: GatewayThread) -> None:
    r = httpx.post(
        f"{gateway.base_url}/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}]},
        headers={"x-route-model": "ü-modell".encode()},
        timeout=10,
    )
    assert r.status_code in (400, 404), r.text
    message = r.json()["error"]["message"]
    assert "ü-modell" in message and "Ã" not in message, message


def test_resilience_reset_of_an_unknown_provider_is_a_404_naming_it(gateway: GatewayThread) -> None:
    r = httpx.post(f"{gateway.url}/api/resilience/reset", json={"provider": "nope"}, timeout=10)
    assert r.status_code == 404, r.text
    assert "'nope'" in r.json()["error"]["message"] and r.json()["error"]["param"] == "provider"
    r = httpx.post(f"{gateway.url}/api/resilience/reset", json={"connection": "nope-1"}, timeout=10)
    assert r.status_code == 404 and "'nope-1'" in r.json()["error"]["message"], r.text
    ok = httpx.post(
        f"{gateway.url}/api/resilience/reset", json={"provider": "local-o", "connection": "o1"}, timeout=10
    )
    assert ok.status_code == 200 and ok.json()["reset"] is True, ok.text
