"""The management surface against hostile requests: non-ASCII credentials are a 401 in each
surface's error shape; DNS rebinding (a foreign ``Host``) and cross-site ``Origin`` requests are
refused with 403 (``server.allowed_hosts`` admits more host names)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from omniroute.api.hosts import hostname_of, is_loopback_name
from omniroute.testing.gateway import GatewayThread

NON_ASCII = "Bearer ключ-\u00e9".encode()
MSGS = [{"role": "user", "content": "hi"}]


def call(
    gw: GatewayThread, method: str, path: str, headers: dict[str, Any], body: Any = None
) -> httpx.Response:
    raw = [(k.encode(), v if isinstance(v, bytes) else v.encode()) for k, v in headers.items()]
    return httpx.request(method, f"{gw.url}{path}", headers=raw, json=body, timeout=10)


@pytest.mark.parametrize("admin_key", [None, "adm-0123456789"])
def test_a_non_ascii_bearer_on_the_management_api_is_401_not_500(
    make_gateway: Callable[..., GatewayThread], admin_key: str | None
) -> None:
    gw = make_gateway({"server": {"admin_key": admin_key}} if admin_key else {})
    r = call(gw, "GET", "/api/keys", {"Authorization": NON_ASCII})
    assert r.status_code == 401, r.text
    assert r.json()["error"]["type"] == "authentication_error" and "Traceback" not in r.text


@pytest.mark.parametrize("require_api_key", [False, True])
def test_a_non_ascii_key_on_the_client_api_is_401_in_each_wire_shape(
    make_gateway: Callable[..., GatewayThread], require_api_key: bool
) -> None:
    gw = make_gateway({"server": {"require_api_key": require_api_key}})
    auth = {"Authorization": NON_ASCII}
    r = call(gw, "POST", "/v1/chat/completions", auth, {"model": "local-o/model-o", "messages": MSGS})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    r = call(gw, "POST", "/v1/responses", auth, {"model": "local-o/model-o", "input": "hi"})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    r = call(
        gw,
        "POST",
        "/v1/messages",
        {"x-api-key": "ключ".encode()},
        {"model": "local-o/model-o", "max_tokens": 5, "messages": MSGS},
    )
    assert r.status_code == 401 and r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "authentication_error"
    r = call(
        gw,
        "POST",
        "/v1beta/models/local-o/model-o:generateContent",
        {"x-goog-api-key": "ключ".encode()},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    )
    assert r.status_code == 401 and r.json()["error"]["status"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:20128", "192.168.1.20", "localhost.evil.example"]
)
def test_a_foreign_host_is_refused_without_an_admin_key(
    gateway: GatewayThread, host: str, method: str
) -> None:
    """DNS rebinding: the page's own name resolves to 127.0.0.1, so only the Host header shows it."""
    r = call(gateway, method, "/api/keys", {"Host": host}, {"name": "stolen"} if method == "POST" else None)
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "host_not_allowed"
    assert call(gateway, "GET", "/api/keys", {}).json()["data"] == [], "no key was created"


@pytest.mark.parametrize("host", ["localhost", "localhost:20128", "127.0.0.1", "[::1]:20128", "gw.localhost"])
def test_loopback_hosts_are_served(gateway: GatewayThread, host: str) -> None:
    assert call(gateway, "GET", "/api/keys", {"Host": host}).status_code == 200


def test_allowed_hosts_admit_more_names(make_gateway: Callable[..., GatewayThread]) -> None:
    gw = make_gateway({"server": {"allowed_hosts": ["Gateway.Internal"]}})
    assert call(gw, "GET", "/api/keys", {"Host": "gateway.internal:20128"}).status_code == 200
    assert call(gw, "GET", "/api/keys", {"Host": "evil.example"}).status_code == 403


def test_with_an_admin_key_the_key_is_the_guard(make_gateway: Callable[..., GatewayThread]) -> None:
    gw = make_gateway({"server": {"admin_key": "adm-0123456789"}})
    auth = {"Authorization": "Bearer adm-0123456789", "Host": "gateway.example.com"}
    assert call(gw, "GET", "/api/keys", auth).status_code == 200
    gw2 = make_gateway({"server": {"admin_key": "adm-0123456789", "allowed_hosts": ["gw.example"]}})
    assert call(gw2, "GET", "/api/keys", auth).status_code == 403


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "https://localhost.evil.example"])
def test_a_cross_site_origin_cannot_change_state(gateway: GatewayThread, origin: str) -> None:
    r = call(gateway, "POST", "/api/keys", {"Origin": origin}, {"name": "csrf"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
    assert call(gateway, "GET", "/api/keys", {"Origin": origin}).status_code == 200, "reads are not changes"
    assert call(gateway, "GET", "/api/keys", {}).json()["data"] == []


def test_same_origin_and_loopback_origins_can_change_state(gateway: GatewayThread) -> None:
    same = f"http://127.0.0.1:{gateway.port}"
    assert call(gateway, "POST", "/api/keys", {"Origin": same}, {"name": "a"}).status_code == 201
    assert (
        call(gateway, "POST", "/api/keys", {"Origin": "http://localhost:3000"}, {"name": "b"}).status_code
        == 201
    )


def test_the_client_api_is_not_host_checked(gateway: GatewayThread) -> None:
    r = call(
        gateway,
        "POST",
        "/v1/chat/completions",
        {"Host": "evil.example"},
        {"model": "local-o/model-o", "messages": MSGS},
    )
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("host", "name", "loopback"),
    [
        ("LOCALHOST:80", "localhost", True),
        ("[::1]:8080", "::1", True),
        ("127.8.9.1", "127.8.9.1", True),
        ("localhost.", "localhost", True),
        ("a.b.localhost:1", "a.b.localhost", True),
        ("10.0.0.1:20128", "10.0.0.1", False),
        ("localhost.attacker.com", "localhost.attacker.com", False),
    ],
)
def test_host_names_are_parsed_and_judged(host: str, name: str, loopback: bool) -> None:
    assert hostname_of(host) == name
    assert is_loopback_name(name) is loopback
