"""Optional request fields get the same treatment as the required ones (API-6): a wrong type or value
is a 400 in the client's wire format whose ``param`` (or message, where the wire format has no
``param``) names the field, never a pass-through to the upstream or a 500; a valid value of every
field still succeeds. One case per field on each surface: OpenAI chat, Anthropic Messages and
count_tokens, Responses, embeddings, the Gemini routes, and combo targets on the management API
(COMBO-1, OPS-2)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from conftest import base_config
from omniroute.config import config_from_dict
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MODEL = "local-o/model-o"
HI = [{"role": "user", "content": "hi"}]
CHAT = {"model": MODEL, "messages": HI}
MESSAGES = {"model": MODEL, "max_tokens": 32, "messages": HI}
RESPONSES = {"model": MODEL, "input": "hi"}
EMBEDDINGS = {"model": MODEL, "input": "hi"}
GEMINI_PATH = f"/v1beta/models/{MODEL}:generateContent"
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def gw(
    fakes: dict[str, FakeProviderThread], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayThread]:
    """One gateway for the whole module: every case here is a single stateless request."""
    gt = GatewayThread(config_from_dict(base_config(fakes, tmp_path_factory.mktemp("opt")), env={})).start()
    yield gt
    gt.stop()


def post(gw: GatewayThread, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{gw.url}{path}", json=body, timeout=15)


def assert_openai_400(r: httpx.Response, param: str) -> str:
    """400 in the OpenAI error shape naming ``param``; returns the message."""
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "code", "param"}
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param, err
    assert "Traceback" not in r.text
    return str(err["message"])


def assert_anthropic_error(r: httpx.Response, status: int, kind: str, named: str) -> str:
    """Anthropic's ``{"type": "error", "error": {"type", "message"}}`` whose message names the field."""
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == kind, body
    message = str(body["error"]["message"])
    assert named in message, message
    return message


def assert_gemini_400(r: httpx.Response, param: str) -> None:
    """Gemini's ``{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT"}}`` naming the field."""
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == 400 and err["status"] == "INVALID_ARGUMENT", err
    assert f"'{param}'" in err["message"], err


# -- OpenAI chat completions ------------------------------------------------------------------------

CHAT_BAD: list[tuple[dict[str, Any], str]] = [
    ({"seed": "42"}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"seed": True}, "seed"),
    ({"logprobs": "yes"}, "logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": "5"}, "top_logprobs"),
    ({"top_logprobs": 5}, "top_logprobs"),
    ({"logprobs": False, "top_logprobs": 5}, "top_logprobs"),
    ({"parallel_tool_calls": "no"}, "parallel_tool_calls"),
    ({"metadata": "x"}, "metadata"),
    ({"metadata": {"k": 1}}, "metadata.k"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ({"user": 5}, "user"),
    ({"service_tier": 1}, "service_tier"),
    ({"store": "true"}, "store"),
    ({"modalities": "text"}, "modalities"),
    ({"modalities": ["text", 1]}, "modalities"),
    ({"reasoning_effort": "extreme"}, "reasoning_effort"),
    ({"reasoning_effort": 3}, "reasoning_effort"),
    ({"reasoning_effort": ["high"]}, "reasoning_effort"),
    # unhashable values where a name is expected used to escape as a TypeError (500)
    ({"messages": [{"role": ["user"], "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": {"t": 1}}]}]}, "messages[0].content[0].type"),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "http://x/a.png"}]}]},
        "messages[0].content[0].image_url.url",
    ),
    ({"response_format": {"type": ["json_object"]}}, "response_format.type"),
    ({"tool_choice": {"type": "function", "function": "f"}}, "tool_choice"),
]


@pytest.mark.parametrize(("patch", "param"), CHAT_BAD)
def test_chat_optional_field_with_bad_value_is_400_naming_it(
    gw: GatewayThread, patch: dict[str, Any], param: str
) -> None:
    """API-1/API-6: a wrong type or value of an optional chat field is a 400 with ``param``."""
    assert_openai_400(post(gw, "/v1/chat/completions", {**CHAT, **patch}), param)


CHAT_GOOD: list[dict[str, Any]] = [
    {"seed": 42},
    {"seed": -1},
    {"logprobs": True},
    {"logprobs": False},
    {"logprobs": True, "top_logprobs": 0},
    {"logprobs": True, "top_logprobs": 20},
    {"parallel_tool_calls": False, "tools": [TOOL]},
    {"metadata": {f"k{i}": "v" for i in range(16)}},
    {"metadata": {}},
    {"user": "user-1"},
    {"service_tier": "auto"},
    {"store": False},
    {"modalities": ["text"]},
    *({"reasoning_effort": e} for e in ("none", "minimal", "low", "medium", "high", "xhigh")),
    {"unknown_vendor_field": {"anything": [1, 2]}},
]


@pytest.mark.parametrize("patch", CHAT_GOOD)
def test_chat_optional_field_with_valid_value_still_succeeds(
    gw: GatewayThread, patch: dict[str, Any]
) -> None:
    r = post(gw, "/v1/chat/completions", {**CHAT, **patch})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("value", [5, 1.5, ["call_1"]])
def test_tool_message_with_non_string_tool_call_id_says_it_must_be_a_string(
    gw: GatewayThread, value: object
) -> None:
    """API-6: ``tool_call_id: 5`` is present but wrong, so the message says "must be a string"."""
    messages = [*HI, {"role": "tool", "tool_call_id": value, "content": "r"}]
    msg = assert_openai_400(
        post(gw, "/v1/chat/completions", {**CHAT, "messages": messages}), "messages[1].tool_call_id"
    )
    assert "must be a string" in msg and "required" not in msg


def test_tool_message_without_tool_call_id_still_says_required(gw: GatewayThread) -> None:
    messages = [*HI, {"role": "tool", "content": "r"}]
    msg = assert_openai_400(
        post(gw, "/v1/chat/completions", {**CHAT, "messages": messages}), "messages[1].tool_call_id"
    )
    assert "required" in msg
