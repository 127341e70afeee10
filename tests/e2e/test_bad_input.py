"""Bad input never gets a 500 or a stack trace: a clear error in the OpenAI shape naming the field
(API-6, API-8, SPEC §4, OPS-2 max_body_mb)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from omniroute.testing.gateway import GatewayThread

GOOD = {"model": "local-o/model-o", "messages": [{"role": "user", "content": "hi"}]}


def post(
    gw: GatewayThread,
    body: Any = None,
    *,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    h = {"content-type": "application/json", **(headers or {})}
    if content is None:
        return httpx.post(f"{gw.base_url}/chat/completions", json=body, headers=h, timeout=10)
    return httpx.post(f"{gw.base_url}/chat/completions", content=content, headers=h, timeout=10)


def assert_error(
    r: httpx.Response, status: int, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "code", "param"}
    assert "Traceback" not in r.text
    if param is not None:
        assert err["param"] == param
        assert param.split("[")[0].split(".")[0].lower() in err["message"].lower()
    if code is not None:
        assert err["code"] == code
    return err


def test_malformed_json_is_400(gateway: GatewayThread) -> None:
    assert_error(post(gateway, content=b'{"model": "x", "messages": ['), 400, "body")


def test_wrong_content_type_is_400(gateway: GatewayThread) -> None:
    r = post(gateway, content=b"model=x", headers={"content-type": "application/x-www-form-urlencoded"})
    assert_error(r, 400, "content-type")


def test_body_not_an_object_is_400(gateway: GatewayThread) -> None:
    assert_error(post(gateway, content=b"[1, 2]"), 400, "body")


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"messages": None}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": "hello"}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 42}]}, "messages[0].content"),
        ({"model": 7}, "model"),
        ({"temperature": 5}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_p": -0.1}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": "ten"}, "max_tokens"),
        ({"max_completion_tokens": -5}, "max_completion_tokens"),
        ({"stream": "yes"}, "stream"),
        ({"tools": [{"type": "function"}]}, "tools[0]"),
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ],
)
def test_invalid_field_is_400_naming_the_field(
    gateway: GatewayThread, patch: dict[str, Any], param: str
) -> None:
    body = {**GOOD, **patch}
    if patch.get("messages", 0) is None:
        del body["messages"]
    assert_error(post(gateway, body), 400, param)


def test_missing_model_is_400(gateway: GatewayThread) -> None:
    assert_error(post(gateway, {"messages": GOOD["messages"]}), 400, "model")


def test_body_over_max_body_mb_is_413(make_gateway: Callable[..., GatewayThread]) -> None:
    gw = make_gateway({"server": {"max_body_mb": 0.01}})
    big = {**GOOD, "messages": [{"role": "user", "content": "x" * 20000}]}
    assert_error(post(gw, big), 413)


def test_unknown_model_is_404_pointing_at_models(gateway: GatewayThread) -> None:
    err = assert_error(post(gateway, {**GOOD, "model": "no-such-model"}), 404, code="model_not_found")
    assert "/v1/models" in err["message"]


def test_unknown_model_of_unconnected_provider_is_404(gateway: GatewayThread) -> None:
    err = assert_error(
        post(gateway, {**GOOD, "model": "mistral/mistral-large-latest"}), 404, code="model_not_found"
    )
    assert "mistral" in err["message"]


def test_upstream_unreachable_is_502_naming_the_provider(make_gateway: Callable[..., GatewayThread]) -> None:
    gw = make_gateway(
        {
            "providers": [{"id": "dead", "base_url": "http://127.0.0.1:9/v1", "models": [{"id": "m"}]}],
            "connections": [{"id": "d1", "provider": "dead", "api_key": "k"}],
        }
    )
    err = assert_error(post(gw, {**GOOD, "model": "dead/m"}), 502)
    assert "dead" in err["message"]
    gw2_stream = post(gw, {**GOOD, "model": "dead/m", "stream": True})
    assert_error(gw2_stream, 502)


def test_require_api_key_rejects_missing_and_wrong_keys(make_gateway: Callable[..., GatewayThread]) -> None:
    """API-8: with require_api_key a missing or unknown key is 401; a configured key works."""
    gw = make_gateway(
        {"server": {"require_api_key": True}, "api_keys": [{"name": "dev", "key": "${DEV_KEY}"}]},
        env={"DEV_KEY": "sk-dev-123"},
    )
    assert_error(post(gw, GOOD), 401, code="invalid_api_key")
    assert_error(post(gw, GOOD, headers={"authorization": "Bearer nope"}), 401)
    r = post(gw, GOOD, headers={"authorization": "Bearer sk-dev-123"})
    assert r.status_code == 200, r.text
    r = httpx.get(f"{gw.base_url}/models", timeout=5)
    assert r.status_code == 401


def test_key_allowlist_is_403(make_gateway: Callable[..., GatewayThread]) -> None:
    gw = make_gateway(
        {
            "server": {"require_api_key": True},
            "api_keys": [{"name": "dev", "key": "sk-x", "allowed_models": ["local-c/*"]}],
        }
    )
    assert_error(post(gw, GOOD, headers={"authorization": "Bearer sk-x"}), 403, "model")
    ok = post(gw, {**GOOD, "model": "local-c/model-c"}, headers={"authorization": "Bearer sk-x"})
    assert ok.status_code == 200


def test_unknown_admin_route_is_404_json(gateway: GatewayThread) -> None:
    r = httpx.get(f"{gateway.url}/api/nothing-here", timeout=5)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", ["/chat/completions", "/messages"])
def test_an_integer_beyond_64_bits_is_echoed_as_an_integer_not_in_e_notation(
    gateway: GatewayThread, path: str
) -> None:
    """``max_tokens: 99999999999999999999999`` is refused naming the field and echoing a whole number
    (the parser reads it as a float, which must not read back as ``1e+23``); a fraction stays one."""
    for raw, echoed in ((b"99999999999999999999999", "got 9999999999999999"), (b"1.5", "got 1.5")):
        body = b'{"model": "local-o/model-o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": '
        r = httpx.post(
            f"{gateway.base_url}{path}",
            content=body + raw + b"}",
            headers={"content-type": "application/json"},
            timeout=10,
        )
        assert r.status_code == 400, r.text
        message = r.json()["error"]["message"]
        assert "max_tokens" in message and echoed in message and "e+" not in message, message
