"""Client-route errors found by trying the gateway as a new user: wrong methods answer 405 in the
route's own wire format, invalid steering headers are a 400 on every route, compressed request
bodies are decoded (bounded) or refused with a 415, and ``auto/`` is not taken for ``auto``."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from omniroute.testing.gateway import GatewayThread

CHAT = {"model": "local-o/model-o", "messages": [{"role": "user", "content": "hi"}]}
COMBO = {"combos": [{"name": "cx", "strategy": "priority", "targets": [{"model": "local-o/model-o"}]}]}


def assert_anthropic_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    return body


@pytest.mark.parametrize(
    ("method", "path"),
    [("PUT", "/v1/messages"), ("PATCH", "/v1/messages"), ("GET", "/v1/messages/count_tokens")],
)
def test_wrong_method_on_anthropic_routes_is_405_in_anthropic_shape(
    gateway: GatewayThread, method: str, path: str
) -> None:
    r = httpx.request(method, f"{gateway.url}{path}", timeout=5)
    body = assert_anthropic_error(r, 405)
    assert r.headers["allow"] == "POST" and method in body["error"]["message"]


@pytest.mark.parametrize("method", ["PATCH", "GET", "DELETE"])
def test_wrong_method_on_gemini_routes_is_405_in_gemini_shape(gateway: GatewayThread, method: str) -> None:
    r = httpx.request(method, f"{gateway.url}/v1beta/models/x:generateContent", timeout=5)
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    err = r.json()["error"]
    assert err["code"] == 405 and method in err["message"] and isinstance(err["status"], str)


@pytest.mark.parametrize("path", ["/v1/models", "/v1/models/local-o/model-o"])
def test_wrong_method_on_models_list_is_405_allowing_get(gateway: GatewayThread, path: str) -> None:
    r = httpx.delete(f"{gateway.url}{path}", timeout=5)
    assert r.status_code == 405 and r.headers["allow"] == "GET"
    assert r.json()["error"]["code"] == "method_not_allowed"
    assert httpx.get(f"{gateway.url}/v1/models", timeout=5).status_code == 200


BAD_STEERING = [
    ("X-OmniRoute-Mode", "weird", "balanced"),
    ("X-OmniRoute-Budget", "abc", ">= 0"),
    ("X-OmniRoute-Budget-Fallback", "weird", "strict"),
    ("X-OmniRoute-Effort", "weird", "auto"),
]


@pytest.mark.parametrize(("header", "value", "allowed"), BAD_STEERING)
@pytest.mark.parametrize("model", ["auto", "cx", "local-o/model-o"])
def test_invalid_steering_header_is_400_naming_it_on_every_route(
    make_gateway: Callable[..., GatewayThread], model: str, header: str, value: str, allowed: str
) -> None:
    gw = make_gateway(COMBO)
    r = httpx.post(
        f"{gw.base_url}/chat/completions", json={**CHAT, "model": model}, headers={header: value}, timeout=10
    )
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == header and header in err["message"] and allowed in err["message"]


@pytest.mark.parametrize(("header", "value", "allowed"), BAD_STEERING)
def test_invalid_steering_header_on_messages_is_400_in_anthropic_shape(
    gateway: GatewayThread, header: str, value: str, allowed: str
) -> None:
    body = {**CHAT, "max_tokens": 10}
    r = httpx.post(f"{gateway.url}/v1/messages", json=body, headers={header: value}, timeout=10)
    msg = assert_anthropic_error(r, 400)["error"]["message"]
    assert header in msg and allowed in msg


def test_valid_steering_headers_are_accepted_on_a_combo(make_gateway: Callable[..., GatewayThread]) -> None:
    gw = make_gateway(COMBO)
    headers = {
        "X-OmniRoute-Mode": "Fast",
        "X-OmniRoute-Budget": "1.5",
        "X-OmniRoute-Budget-Fallback": "cheapest",
        "X-OmniRoute-Effort": "auto",
    }
    r = httpx.post(
        f"{gw.base_url}/chat/completions", json={**CHAT, "model": "cx"}, headers=headers, timeout=10
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("coding", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw DEFLATE without the zlib wrapper
    ],
)
def test_compressed_request_body_is_decoded(
    gateway: GatewayThread, coding: str, compress: Callable[[bytes], bytes]
) -> None:
    r = httpx.post(
        f"{gateway.base_url}/chat/completions",
        content=compress(orjson.dumps(CHAT)),
        headers={"content-type": "application/json", "content-encoding": coding},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"]


def test_gzip_body_on_messages_and_embeddings_is_decoded(gateway: GatewayThread) -> None:
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    body = gzip.compress(orjson.dumps({**CHAT, "max_tokens": 10}))
    r = httpx.post(f"{gateway.url}/v1/messages", content=body, headers=headers, timeout=10)
    assert r.status_code == 200 and r.json()["type"] == "message", r.text
    emb = gzip.compress(orjson.dumps({"model": "local-o/model-o", "input": "hi"}))
    r = httpx.post(f"{gateway.base_url}/embeddings", content=emb, headers=headers, timeout=10)
    assert r.status_code == 200 and r.json()["data"], r.text


def test_gzip_body_that_inflates_past_max_body_mb_is_413(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    gw = make_gateway({"server": {"max_body_mb": 0.01}})
    big = {**CHAT, "messages": [{"role": "user", "content": "a" * 200_000}]}
    packed = gzip.compress(orjson.dumps(big))
    assert len(packed) < 10_000  # small on the wire, 20 times the limit once inflated
    r = httpx.post(
        f"{gw.base_url}/chat/completions",
        content=packed,
        headers={"content-type": "application/json", "content-encoding": "gzip"},
        timeout=10,
    )
    assert r.status_code == 413 and "max_body_mb" in r.json()["error"]["message"], r.text


def test_unsupported_content_encoding_is_415_naming_it(gateway: GatewayThread) -> None:
    r = httpx.post(
        f"{gateway.base_url}/chat/completions",
        content=orjson.dumps(CHAT),
        headers={"content-type": "application/json", "content-encoding": "br"},
        timeout=10,
    )
    assert r.status_code == 415, r.text
    err = r.json()["error"]
    assert err["param"] == "content-encoding" and "Content-Encoding" in err["message"]


def test_corrupt_gzip_body_is_400_naming_content_encoding(gateway: GatewayThread) -> None:
    packed = gzip.compress(orjson.dumps(CHAT))
    r = httpx.post(
        f"{gateway.base_url}/chat/completions",
        content=packed[: len(packed) // 2],
        headers={"content-type": "application/json", "content-encoding": "gzip"},
        timeout=10,
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "content-encoding", r.text


@pytest.mark.parametrize("model", ["auto/", "AUTO/"])
def test_auto_with_an_empty_variant_is_404_not_plain_auto(gateway: GatewayThread, model: str) -> None:
    r = httpx.post(f"{gateway.base_url}/chat/completions", json={**CHAT, "model": model}, timeout=10)
    assert r.status_code == 404, r.text
    err = r.json()["error"]
    assert err["param"] == "model" and "after the '/'" in err["message"]
