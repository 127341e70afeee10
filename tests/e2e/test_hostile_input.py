"""Regression tests for hostile or careless input found by trying the product as a new user: every
case gets a clear error in the client's wire format, never a 500, a dropped connection or a hang
(API-6, API-8, OPS-2)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from omniroute.config import ConfigError, config_from_dict
from omniroute.testing.gateway import GatewayThread


def post(gw: GatewayThread, path: str, body: object, **kw: object) -> httpx.Response:
    return httpx.post(f"{gw.url}{path}", json=body, timeout=10, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad", ["local-o/model-o\u0000x", "local-o/model-o\nX-Evil: 1", "local-o/\u0001", "x" * 300]
)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/embeddings"])
def test_control_characters_or_huge_model_ids_are_400_not_a_dropped_connection(
    gateway: GatewayThread, bad: str, path: str
) -> None:
    """API-6: a model id with control characters or over 256 characters is a 400 naming ``model``."""
    body: dict[str, object] = {
        "model": bad,
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "input": "hi",
    }
    r = post(gateway, path, body)
    assert r.status_code == 400, r.text
    text = r.text
    assert "model" in text and "Traceback" not in text


def test_provider_without_model_part_is_404(gateway: GatewayThread) -> None:
    r = post(
        gateway, "/v1/chat/completions", {"model": "local-o/", "messages": [{"role": "user", "content": "x"}]}
    )
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"reasoning": "x"}, "reasoning"),
        ({"reasoning": {"effort": "bogus"}}, "reasoning.effort"),
        ({"instructions": 5}, "instructions"),
        ({"input": []}, "input"),
        ({"text": 5}, "text"),
        ({"include": "x"}, "include"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_responses_bad_fields_are_400(
    gateway: GatewayThread, patch: dict[str, object], param: str, stream: bool
) -> None:
    """API-4/API-6: invalid Responses fields are a 400 naming the field, streaming or not."""
    r = post(gateway, "/v1/responses", {"model": "local-o/model-o", "input": "hi", "stream": stream, **patch})
    assert r.status_code == 400, r.text
    assert param in r.text


def test_declared_oversized_body_is_413_at_once(gateway: GatewayThread) -> None:
    """OPS-2 max_body_mb: a Content-Length over the cap is refused from the header, without waiting."""
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=5) as s:
        s.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 99999999999\r\n\r\n{"
        )
        t0 = time.monotonic()
        data = s.recv(4096)
        assert time.monotonic() - t0 < 2
    assert b" 413 " in data.split(b"\r\n")[0]


def test_management_api_honours_max_body_mb(make_gateway: Callable[..., GatewayThread]) -> None:
    """OPS-2: the body cap applies to /api/* too."""
    gw = make_gateway({"server": {"max_body_mb": 0.01}})
    r = post(
        gw,
        "/api/combos",
        {
            "name": "big",
            "strategy": "priority",
            "description": "x" * 20000,
            "targets": [{"model": "local-o/model-o"}],
        },
    )
    assert r.status_code == 413


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/responses",
        "/v1/embeddings",
        "/v1beta/models/x:generateContent",
    ],
)
def test_wrong_method_is_405_with_allow(gateway: GatewayThread, path: str) -> None:
    r = httpx.get(f"{gateway.url}{path}", timeout=5)
    assert r.status_code == 405 and r.headers["allow"] == "POST"


def test_duplicate_key_name_is_409_not_500(gateway: GatewayThread) -> None:
    """API-8: creating a key whose name exists is a clear 409."""
    assert post(gateway, "/api/keys", {"name": "dup"}).status_code == 201
    r = post(gateway, "/api/keys", {"name": "dup"})
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"


@pytest.mark.parametrize("name", ["auto", "auto/coding", "bad\nname"])
def test_reserved_or_unprintable_combo_names_are_400(gateway: GatewayThread, name: str) -> None:
    """COMBO-1/AUTO-1: a combo may not take over `auto` routing or carry control characters."""
    r = post(
        gateway,
        "/api/combos",
        {"name": name, "strategy": "priority", "targets": [{"model": "local-o/model-o"}]},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "name"


def test_all_cooling_down_429_has_rate_limit_type(gateway: GatewayThread) -> None:
    """RESIL-7: a 429 exhaustion error is typed rate_limit_error."""
    body = {"model": "local-o/model-o+fail-429-retry-30", "messages": [{"role": "user", "content": "x"}]}
    r = post(gateway, "/v1/chat/completions", body)
    assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error"


def test_connection_to_unknown_provider_stops_the_start(tmp_path: Path) -> None:
    """OPS-2: a connection naming an unknown provider fails at start with the key path."""
    cfg = config_from_dict(
        {
            "database_url": f"sqlite:///{tmp_path}/x.db",
            "connections": [{"id": "c1", "provider": "nope", "api_key": "k"}],
        },
        env={},
    )
    import asyncio

    from omniroute.gateway import Gateway

    async def start() -> None:
        gw = Gateway(cfg)
        try:
            await gw.start()
        finally:
            await gw.stop()

    with pytest.raises(ConfigError, match=r"connections\[0\]\.provider"):
        asyncio.run(start())


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"generationConfig": {"temperature": 99}}, "generationConfig.temperature"),
        ({"generationConfig": {"maxOutputTokens": -1}}, "generationConfig.maxOutputTokens"),
        ({"systemInstruction": 5}, "systemInstruction"),
    ],
)
def test_gemini_surface_validates_like_openai(
    gateway: GatewayThread, patch: dict[str, object], param: str
) -> None:
    """API-6 on the Gemini surface: the same limits as chat completions, naming the Gemini field."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], **patch}
    r = post(gateway, "/v1beta/models/local-o/model-o:generateContent", body)
    assert r.status_code == 400, r.text
    assert param in r.text


@pytest.mark.parametrize(
    ("messages", "param"),
    [
        ([{"role": "user", "content": [{"type": "weird"}]}], "messages[0].content[0].type"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": 123}}]}],
            "messages[0].content[0].image_url.url",
        ),
        ([{"role": "user", "content": "x"}, {"role": "tool", "content": "r"}], "messages[1].tool_call_id"),
        ([{"role": "assistant", "content": "x", "tool_calls": "x"}], "messages[0].tool_calls"),
    ],
)
def test_chat_message_shapes_are_validated(
    gateway: GatewayThread, messages: list[object], param: str
) -> None:
    r = post(gateway, "/v1/chat/completions", {"model": "local-o/model-o", "messages": messages})
    assert r.status_code == 400 and r.json()["error"]["param"] == param


def test_embeddings_to_a_combo_is_a_clear_400(make_gateway: Callable[..., GatewayThread]) -> None:
    """API-5: embeddings route to provider/model or bare ids; a combo name gets a 400 that says so."""
    gw = make_gateway(
        {"combos": [{"name": "cx", "strategy": "priority", "targets": [{"model": "local-o/model-o"}]}]}
    )
    r = post(gw, "/v1/embeddings", {"model": "cx", "input": "hi"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"


def test_infinite_key_budget_and_chain_extras_are_400(gateway: GatewayThread) -> None:
    """API-8/RESIL-4: an infinite budget is not 'unlimited' by accident; unknown chain fields are named."""
    r = httpx.post(
        f"{gateway.url}/api/keys",
        content=b'{"name": "inf", "budget_usd": Infinity}',
        headers={"content-type": "application/json"},
        timeout=5,
    )
    assert r.status_code == 400
    r = post(gateway, "/api/fallback/chains", {"model": "m", "chain": [{"provider": "local-o", "bogus": 1}]})
    assert r.status_code == 400 and "bogus" in r.json()["error"]["param"]
    r = post(gateway, "/api/fallback/chains", {"model": "m" * 300, "chain": [{"provider": "local-o"}]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/connections", {"id": "cz", "provider": "local-o", "api_key": "k", "max_concurrent": 2**70}),
        ("/api/combos", {"name": "big", "targets": [{"model": "local-o/model-o"}], "config": {"a": 2**70}}),
        ("/api/fallback/chains", {"model": "zz", "chain": [{"provider": "local-o", "priority": 2**70}]}),
    ],
)
def test_integers_beyond_64_bits_are_400_not_500(gateway: GatewayThread, path: str, body: object) -> None:
    """API-6 on the management API: out-of-range integers are a JSON 400, never a plain-text 500."""
    r = post(gateway, path, body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_chunked_upload_over_the_cap_is_413_on_management_api(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    """OPS-2: a chunked body (no Content-Length) past max_body_mb is refused on /api/* too."""
    gw = make_gateway({"server": {"max_body_mb": 0.01}})

    def chunks():  # type: ignore[no-untyped-def]
        yield b'{"name": "huge", "allowed_models": ["'
        for _ in range(50):
            yield b"x" * 1000
        yield b'"]}'

    r = httpx.post(
        f"{gw.url}/api/keys", content=chunks(), headers={"content-type": "application/json"}, timeout=10
    )
    assert r.status_code == 413
    assert all(k["name"] != "huge" for k in httpx.get(f"{gw.url}/api/keys", timeout=5).json()["data"])


@pytest.mark.parametrize(
    "url", ["x", "ftp://127.0.0.1/v1", "file:///etc/passwd", "http://127.0.0.1:99999/v1"]
)
def test_provider_base_url_must_be_http(gateway: GatewayThread, url: str) -> None:
    r = post(gateway, "/api/providers", {"id": "pbad", "base_url": url, "models": [{"id": "m"}]})
    assert r.status_code == 400 and "base_url" in r.json()["error"]["param"]


def test_invalid_budget_header_is_400_not_ignored(gateway: GatewayThread) -> None:
    """AUTO-7: a budget that is not a number ≥ 0 is a 400 naming the header."""
    body = {"model": "auto", "messages": [{"role": "user", "content": "x"}]}
    r = post(
        gateway,
        "/v1/chat/completions",
        body,
        headers={"x-omniroute-budget": "abc", "x-omniroute-budget-fallback": "strict"},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "X-OmniRoute-Budget"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/connections", {"id": "c9", "provider": "local-o", "api_key": "k", "bogus": 1}),
        ("/api/keys", {"name": "k9", "bogus": 1}),
        ("/api/providers", {"id": "p9", "base_url": "http://127.0.0.1:1/v1", "bogus": 1}),
    ],
)
def test_unknown_fields_in_management_bodies_are_400(gateway: GatewayThread, path: str, body: object) -> None:
    """API-6: an unknown field is named in a 400 instead of being stored silently."""
    r = post(gateway, path, body)
    assert r.status_code == 400 and "bogus" in r.json()["error"]["param"]


def test_unknown_gemini_path_is_a_gemini_shaped_404(gateway: GatewayThread) -> None:
    """API-6: a 404 under /v1beta uses Gemini's error shape so the google-genai SDK can read it."""
    r = httpx.get(f"{gateway.url}/v1beta/models", timeout=5)
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND"


def test_unexpected_handler_error_is_a_json_500_not_a_plain_text_page(gateway: GatewayThread) -> None:
    """API-6: a bug on the hot path answers 500 in the OpenAI error shape; the server stays up."""

    async def broken(*_: object) -> None:
        raise RuntimeError("boom")

    routes = gateway.app.post_routes
    saved = routes["/v1/chat/completions"]
    routes["/v1/chat/completions"] = broken
    try:
        r = post(gateway, "/v1/chat/completions", {"model": "x", "messages": []})
    finally:
        routes["/v1/chat/completions"] = saved
    assert r.status_code == 500
    assert r.json()["error"]["message"].startswith("Internal gateway error")
    assert "boom" not in r.text


def test_unexpected_error_after_the_response_started_never_looks_complete(gateway: GatewayThread) -> None:
    """RESIL-9: a failure after the headers went out cuts the connection; the client never gets a
    complete-looking body."""

    async def half(_gw: object, _scope: object, _receive: object, send: Callable[..., object]) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]})
        await send({"type": "http.response.body", "body": b'{"partial": ', "more_body": True})
        raise RuntimeError("boom")

    routes = gateway.app.post_routes
    saved = routes["/v1/chat/completions"]
    routes["/v1/chat/completions"] = half  # type: ignore[assignment]
    try:
        with pytest.raises(httpx.HTTPError):
            post(gateway, "/v1/chat/completions", {"model": "x", "messages": []})
    finally:
        routes["/v1/chat/completions"] = saved
    r = post(
        gateway,
        "/v1/chat/completions",
        {"model": "local-o/model-o", "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 200


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/embeddings"])
def test_a_body_that_stops_arriving_is_a_408_and_other_requests_go_on(
    gateway: GatewayThread, path: str
) -> None:
    """API-6: a client that announces a body and stalls gets 408 in the error shape after the body
    allowance; requests beside it are answered meanwhile."""
    gateway.gateway.body_deadlines.timeout_s = 0.5
    try:
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as s:
            s.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                'Content-Length: 100\r\n\r\n{"model"'.encode()
            )
            ok = post(
                gateway,
                "/v1/chat/completions",
                {"model": "local-o/model-o", "messages": [{"role": "user", "content": "x"}]},
            )
            assert ok.status_code == 200
            t0 = time.monotonic()
            reply = b""
            while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                data = s.recv(4096)
                if not data:
                    break
                reply += data
        assert time.monotonic() - t0 < 5
    finally:
        gateway.gateway.body_deadlines.timeout_s = 30.0
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b"did not arrive" in reply


@pytest.mark.parametrize("bad", ["x" * 129, "a b/../c", "id\u00fc", "a/b"])
def test_an_unusable_client_request_id_is_replaced_by_the_gateways_own(
    gateway: GatewayThread, bad: str
) -> None:
    """API-7/OBS-2: the request id is echoed, stored and used in a URL path, so a client id that is
    too long or has other characters than ``A-Za-z0-9._:-`` is replaced; a good one is kept."""
    body = {"model": "local-o/model-o", "messages": [{"role": "user", "content": "x"}]}
    r = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json=body,
        headers={"x-request-id": bad.encode()},
        timeout=10,
    )
    assert r.status_code == 200
    rid = r.headers["x-request-id"]
    assert rid != bad and rid.startswith("req_")
    assert httpx.get(f"{gateway.url}/api/routing/decisions/{rid}", timeout=10).status_code == 200
    good = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json=body,
        headers={"x-request-id": "trace-42.a:b_c"},
        timeout=10,
    )
    assert good.headers["x-request-id"] == "trace-42.a:b_c"


def test_creating_a_connection_whose_id_exists_is_400_and_keeps_the_original(gateway: GatewayThread) -> None:
    """API-6/PROV-3: POST with an existing id is a 400 naming ``id``; the stored connection (secret,
    default model) is untouched, and the update route still changes it."""
    first = {"id": "dup1", "provider": "local-o", "api_key": "sk-first-111111", "default_model": "model-o"}
    assert post(gateway, "/api/connections", first).status_code == 201
    again = {"id": "dup1", "provider": "local-o", "api_key": "sk-second-22222"}
    r = post(gateway, "/api/connections", again)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "id" and "already exists" in err["message"]
    got = httpx.get(f"{gateway.url}/api/connections/dup1", timeout=5).json()
    assert got["default_model"] == "model-o"
    r = httpx.put(f"{gateway.url}/api/connections/dup1", json={"default_model": "other"}, timeout=5)
    assert r.status_code == 200 and r.json()["default_model"] == "other"


_CHAT_MSG = {"role": "user", "content": "x"}


def _call(fn: dict[str, object]) -> dict[str, object]:
    return {"id": "c1", "type": "function", "function": fn}


@pytest.mark.parametrize(
    ("patch", "param"),
    [
        ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0].text"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
            "messages[0].content[0].text",
        ),
        (
            {"messages": [_CHAT_MSG, {"role": "assistant", "tool_calls": ["x"]}, _CHAT_MSG]},
            "messages[1].tool_calls[0]",
        ),
        (
            {
                "messages": [
                    _CHAT_MSG,
                    {
                        "role": "assistant",
                        "tool_calls": [{**_call({"name": "f", "arguments": "{}"}), "id": 1}],
                    },
                ]
            },
            "messages[1].tool_calls[0].id",
        ),
        (
            {
                "messages": [
                    _CHAT_MSG,
                    {
                        "role": "assistant",
                        "tool_calls": [{**_call({"name": "f", "arguments": "{}"}), "type": "x"}],
                    },
                ]
            },
            "messages[1].tool_calls[0].type",
        ),
        (
            {"messages": [_CHAT_MSG, {"role": "assistant", "tool_calls": [_call({"arguments": "{}"})]}]},
            "messages[1].tool_calls[0].function.name",
        ),
        (
            {
                "messages": [
                    _CHAT_MSG,
                    {"role": "assistant", "tool_calls": [_call({"name": "f", "arguments": {"a": 1}})]},
                ]
            },
            "messages[1].tool_calls[0].function.arguments",
        ),
        ({"logit_bias": {"50256": 101}}, "logit_bias"),
        ({"logit_bias": {"50256": "x"}}, "logit_bias"),
        ({"logit_bias": {"50256": True}}, "logit_bias"),
    ],
)
def test_chat_bad_text_part_tool_calls_or_logit_bias_is_400_naming_the_field(
    gateway: GatewayThread, patch: dict[str, object], param: str
) -> None:
    """API-6: text parts need a string ``text``; assistant ``tool_calls`` need string id, type
    "function", string name and arguments; ``logit_bias`` values are numbers in -100..100."""
    body = {"model": "local-o/model-o", "messages": [_CHAT_MSG], **patch}
    r = post(gateway, "/v1/chat/completions", body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_chat_valid_text_part_tool_calls_and_logit_bias_still_succeed(gateway: GatewayThread) -> None:
    body = {
        "model": "local-o/model-o",
        "logit_bias": {"50256": -100, "11": 2.5},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "x"}]},
            {"role": "assistant", "content": None, "tool_calls": [_call({"name": "f", "arguments": "{}"})]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
    }
    r = post(gateway, "/v1/chat/completions", body)
    assert r.status_code == 200, r.text


def test_responses_empty_string_input_is_400_naming_input(gateway: GatewayThread) -> None:
    r = post(gateway, "/v1/responses", {"model": "local-o/model-o", "input": ""})
    assert r.status_code == 400 and r.json()["error"]["param"] == "input", r.text


def test_messages_that_is_not_an_array_says_it_must_be_an_array(gateway: GatewayThread) -> None:
    """API-6: ``messages: {...}`` on /v1/messages is not "Field required" but "should be ... array"."""
    body = {"model": "local-o/model-o", "max_tokens": 10, "messages": {"a": 1}}
    r = post(gateway, "/v1/messages", body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert "array" in err["message"] and "required" not in err["message"].lower()
    assert r.json()["type"] == "error"
