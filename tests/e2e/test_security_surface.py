"""The management surface: who may read ``/metrics``, ``/docs`` and ``/openapi.json``; the OpenAPI
document lists the errors routes really answer; slow request headers are cut off; a client's
request id cannot overwrite another request's decision; feedback only on one's own requests."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from omniroute.testing.gateway import GatewayThread

ADMIN = "adm-0123456789abcdef"
MSGS = [{"role": "user", "content": "hi"}]


def bearer(token: str | bytes) -> dict[str, Any]:
    return {"Authorization": b"Bearer " + (token.encode() if isinstance(token, str) else token)}


def get(gw: GatewayThread, path: str, headers: dict[str, Any] | None = None) -> httpx.Response:
    raw = [(k.encode(), v if isinstance(v, bytes) else v.encode()) for k, v in (headers or {}).items()]
    return httpx.get(f"{gw.url}{path}", headers=raw, timeout=10)


def test_metrics_docs_and_openapi_need_the_admin_key_when_one_is_set(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    gw = make_gateway({"server": {"admin_key": ADMIN}})
    for path in ("/metrics", "/docs", "/openapi.json"):
        anonymous = get(gw, path)
        assert anonymous.status_code == 401, (path, anonymous.text)
        assert anonymous.json()["error"]["type"] == "authentication_error"
        assert get(gw, path, bearer("wrong")).status_code == 401
        assert get(gw, path, bearer("ключ".encode())).status_code == 401, "non-ASCII is a 401, not a 500"
        assert get(gw, path, bearer(ADMIN)).status_code == 200, path
    assert "omniroute_" in get(gw, "/metrics", bearer(ADMIN)).text


def test_metrics_can_have_their_own_token_or_be_public(make_gateway: Callable[..., GatewayThread]) -> None:
    gw = make_gateway({"server": {"admin_key": ADMIN, "metrics_auth": "token", "metrics_token": "scrape-1"}})
    assert get(gw, "/metrics").status_code == 401
    assert get(gw, "/metrics", bearer("scrape-1")).status_code == 200
    assert get(gw, "/metrics", bearer(ADMIN)).status_code == 200
    assert get(gw, "/api/keys", bearer("scrape-1")).status_code == 401, (
        "the metrics token is not an admin key"
    )
    public = make_gateway({"server": {"admin_key": ADMIN, "metrics_auth": "public"}})
    assert get(public, "/metrics").status_code == 200


def test_a_token_mode_without_a_token_is_a_config_error() -> None:
    from omniroute.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError, match=r"server\.metrics_token"):
        config_from_dict({"server": {"metrics_auth": "token"}}, env={})


def test_the_openapi_document_lists_the_errors_routes_really_answer(gateway: GatewayThread) -> None:
    spec = get(gateway, "/openapi.json").json()
    ops = {(p, m): op for p, item in spec["paths"].items() for m, op in item.items()}
    assert all("422" not in op["responses"] for op in ops.values()), "validation errors are 400s"
    assert {"400", "401", "403", "409"} <= set(ops[("/api/keys", "post")]["responses"])
    assert {"401", "403", "404"} <= set(ops[("/api/connections/{cid}", "get")]["responses"])
    assert {"400", "404"} <= set(ops[("/api/connections/{cid}", "put")]["responses"])
    assert set(ops[("/health", "get")]["responses"]) == {"200"}
    err = ops[("/api/keys", "post")]["responses"]["400"]["content"]["application/json"]["schema"]
    assert err == {"$ref": "#/components/schemas/ErrorBody"}
    # and the listed 400 is what a bad body gets
    r = httpx.post(f"{gateway.url}/api/keys", json={"name": ""}, timeout=10)
    assert r.status_code == 400 and r.json()["error"]["param"] == "name"


def test_slow_request_headers_are_cut_off(make_gateway: Callable[..., GatewayThread]) -> None:
    """A client trickling its headers a byte at a time is disconnected after server.header_timeout_s,
    however often bytes arrive; a normal request on the same gateway is served."""
    gw = make_gateway({"server": {"header_timeout_s": 1}})
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        s.settimeout(0.1)
        closed = False
        while time.monotonic() - started < 15:
            try:
                if s.recv(1024) == b"":
                    closed = True
                    break
            except TimeoutError:
                try:
                    s.sendall(b"X")  # one more byte of a header that never ends
                except OSError:
                    closed = True
                    break
            except OSError:
                closed = True
                break
    assert closed, "the connection was held open"
    assert get(gw, "/health").status_code == 200


def test_a_reused_request_id_never_overwrites_another_requests_decision(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    gw = make_gateway()
    first = httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": "local-o/model-o", "messages": MSGS},
        headers={"x-request-id": "victim-1"},
        timeout=10,
    )
    assert first.headers["x-request-id"] == "victim-1"
    second = httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": "local-c/model-c", "messages": MSGS},
        headers={"x-request-id": "victim-1"},
        timeout=10,
    )
    assert second.status_code == 200
    rid = second.headers["x-request-id"]
    assert rid != "victim-1" and rid.startswith("req_")
    gw.wait_idle()
    victim = get(gw, "/api/routing/decisions/victim-1").json()
    assert victim["served"].startswith("local-o/"), victim
    other = get(gw, f"/api/routing/decisions/{rid}").json()
    assert other["served"].startswith("local-c/") and other["client_request_id"] == "victim-1"


def test_feedback_is_accepted_only_on_the_callers_own_requests(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    gw = make_gateway(
        {
            "server": {"require_api_key": True},
            "api_keys": [{"name": "alice", "key": "sk-alice-0001"}, {"name": "bob", "key": "sk-bob-0002"}],
        }
    )
    r = httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": "local-o/model-o", "messages": MSGS},
        headers={"Authorization": "Bearer sk-alice-0001"},
        timeout=10,
    )
    rid = r.headers["x-request-id"]
    body = {"request_id": rid, "score": 0.0}
    bob = httpx.post(
        f"{gw.base_url}/auto-combo/feedback", json=body, headers=bearer("sk-bob-0002"), timeout=10
    )
    assert bob.status_code == 404, bob.text
    alice = httpx.post(
        f"{gw.base_url}/auto-combo/feedback", json=body, headers=bearer("sk-alice-0001"), timeout=10
    )
    assert alice.status_code == 200, alice.text
