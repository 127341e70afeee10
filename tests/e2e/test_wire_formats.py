"""Every client wire format reaches every upstream wire format through one gateway (SPEC PROV-1,
API-3, API-4, API-6, RESIL-9), checked with the official ``anthropic``, ``openai`` and ``google-genai``
SDKs as real clients against the scripted fake providers.

Upstreams: ``local-o`` (OpenAI format, fake O), ``fake-claude`` (Anthropic format, fake C) and
``fake-gemini`` (Gemini format, fake G). The fakes answer ``Hello from {fake} ({model}).`` and take
their faults from the model name (``+tool-call``, ``+fail-529`` …).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

ARGS = {"city": "Paris", "unit": "celsius"}
UPSTREAMS = {
    "openai": ("local-o/model-o", "o"),
    "anthropic": ("fake-claude/model-c", "c"),
    "gemini": ("fake-gemini/model-g", "g"),
}
A_TOOL: Any = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}
O_TOOL: Any = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}
R_TOOL: Any = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def _model(fake_id: str) -> dict[str, Any]:
    return {
        "id": fake_id,
        "context_window": 100000,
        "max_output_tokens": 4096,
        "capabilities": ["tools", "vision"],
    }


def wire_config(fakes: dict[str, FakeProviderThread]) -> dict[str, Any]:
    """The base providers plus an Anthropic-format and a Gemini-format provider, and combos."""
    return {
        "providers": [
            *(
                {
                    "id": f"local-{n}",
                    "format": "openai",
                    "base_url": f"{f.base_url}/v1",
                    "models": [_model(f"model-{n}")],
                }
                for n, f in fakes.items()
            ),
            {
                "id": "fake-claude",
                "format": "anthropic",
                "base_url": fakes["c"].base_url,
                "models": [_model("model-c")],
            },
            {
                "id": "fake-gemini",
                "format": "gemini",
                "base_url": f"{fakes['g'].base_url}/v1beta",
                "models": [_model("model-g")],
            },
        ],
        "connections": [
            *(
                {"id": f"{n}1", "provider": f"local-{n}", "api_key": f"sk-{n}1", "priority": i + 1}
                for i, n in enumerate(fakes)
            ),
            {"id": "fc1", "provider": "fake-claude", "api_key": "sk-fc1", "priority": 4},
            {"id": "fg1", "provider": "fake-gemini", "api_key": "sk-fg1", "priority": 5},
        ],
        "combos": [
            {
                "name": "cross-529",
                "strategy": "priority",
                "description": "fallback across formats",
                "targets": [{"model": "fake-claude/model-c+fail-529"}, {"model": "local-o/model-o+chunks-3"}],
            },
            {
                "name": "cross-event",
                "strategy": "priority",
                "description": "error event before content",
                "targets": [
                    {"model": "fake-claude/model-c+error-event"},
                    {"model": "fake-gemini/model-g+tool-call"},
                ],
            },
        ],
    }


@pytest.fixture
def gw(make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]) -> GatewayThread:
    return make_gateway(wire_config(fakes))


def claude(gw: GatewayThread) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key="unused", max_retries=0)


def oai(gw: GatewayThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="unused", max_retries=0)


def gemini(gw: GatewayThread, api_version: str | None) -> genai.Client:
    opts = (
        types.HttpOptions(base_url=gw.url, api_version=api_version)
        if api_version
        else types.HttpOptions(base_url=gw.url)
    )
    return genai.Client(api_key="unused", http_options=opts)


def answer(upstream: str, suffix: str = "") -> str:
    model, fake = UPSTREAMS[upstream]
    return f"Hello from {fake} ({model.split('/')[1]}{suffix})."


def raw_events(gw: GatewayThread, path: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(event, data)`` pairs of an SSE response, parsed by hand (what the SDKs hide)."""
    out: list[tuple[str, dict[str, Any]]] = []
    with httpx.stream("POST", f"{gw.url}{path}", json=body, timeout=10) as r:
        assert r.status_code == 200, r.read()
        event = ""
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and line != "data: [DONE]":
                out.append((event, json.loads(line[6:])))
                event = ""
    return out


def assert_anthropic_order(types_: list[str]) -> None:
    """message_start first, message_stop last, each block started before its deltas and stopped once."""
    assert types_[0] == "message_start" and types_[-1] == "message_stop"
    assert types_[-2] == "message_delta"
    depth = 0
    for t in types_[1:-2]:
        if t == "content_block_start":
            assert depth == 0
            depth = 1
        elif t == "content_block_stop":
            assert depth == 1
            depth = 0
        elif t == "content_block_delta":
            assert depth == 1
    assert depth == 0


# -- anthropic SDK -----------------------------------------------------------------------------------


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_anthropic_sdk_text(gw: GatewayThread, upstream: str) -> None:
    """API-3: a Messages call is served by any upstream format, with stop_reason, usage and headers."""
    raw = claude(gw).messages.with_raw_response.create(
        model=UPSTREAMS[upstream][0],
        max_tokens=100,
        system="be brief",
        messages=[{"role": "user", "content": "hi there"}],
    )
    msg = raw.parse()
    assert [b.type for b in msg.content] == ["text"]
    assert msg.content[0].text == answer(upstream)
    assert msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens == 4 and msg.usage.output_tokens == 4
    assert msg.id.startswith("msg_") and msg.model == UPSTREAMS[upstream][0].split("/")[1]
    assert raw.headers["x-omniroute-provider"] == UPSTREAMS[upstream][0].split("/")[0]


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_anthropic_sdk_streaming_event_order(gw: GatewayThread, upstream: str) -> None:
    """API-3: the stream is message_start … message_stop in an order the SDK accumulates."""
    model = UPSTREAMS[upstream][0] + "+chunks-4"
    with claude(gw).messages.stream(
        model=model, max_tokens=100, messages=[{"role": "user", "content": "hi there"}]
    ) as s:
        events = [e.type for e in s if e.type != "text"]
        final = s.get_final_message()
    assert_anthropic_order(events)
    assert events.count("content_block_start") == 1
    assert final.content[0].text == answer(upstream, "+chunks-4")
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 4


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_anthropic_sdk_streamed_tool_call(gw: GatewayThread, upstream: str) -> None:
    """API-3: a streamed tool call → content_block_start (tool_use with id and name) first — no empty
    leading text block — then input_json_deltas concatenating to the full JSON; stop_reason tool_use."""
    events = raw_events(
        gw,
        "/v1/messages",
        {
            "model": UPSTREAMS[upstream][0] + "+tool-call+chunks-5",
            "max_tokens": 100,
            "stream": True,
            "tools": [A_TOOL],
            "messages": [{"role": "user", "content": "weather in Paris?"}],
        },
    )
    types_ = [e for e, _ in events]
    assert_anthropic_order(types_)
    starts = [d for e, d in events if e == "content_block_start"]
    assert len(starts) == 1
    block = starts[0]["content_block"]
    assert (
        starts[0]["index"] == 0
        and block["type"] == "tool_use"
        and block["id"]
        and block["name"] == "get_weather"
    )
    pieces = [d["delta"]["partial_json"] for e, d in events if e == "content_block_delta"]
    assert all(d["delta"]["type"] == "input_json_delta" for e, d in events if e == "content_block_delta")
    if upstream != "gemini":  # Gemini sends a call whole; the others split it
        assert len(pieces) >= 3
    assert json.loads("".join(pieces)) == ARGS
    delta = next(d for e, d in events if e == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"
    with claude(gw).messages.stream(
        model=UPSTREAMS[upstream][0] + "+tool-call",
        max_tokens=100,
        tools=[A_TOOL],
        messages=[{"role": "user", "content": "weather?"}],
    ) as s:
        final = s.get_final_message()
    assert final.content[0].type == "tool_use" and final.content[0].input == ARGS


@pytest.mark.parametrize("upstream", ["openai", "gemini"])
def test_anthropic_text_and_tool_start_in_one_upstream_chunk(gw: GatewayThread, upstream: str) -> None:
    """API-3: one upstream chunk with text and a tool-call start → a text block and a tool_use block."""
    events = raw_events(
        gw,
        "/v1/messages",
        {
            "model": UPSTREAMS[upstream][0] + "+text-and-tool+chunks-2",
            "max_tokens": 100,
            "stream": True,
            "tools": [A_TOOL],
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    assert_anthropic_order([e for e, _ in events])
    blocks = [d["content_block"] for e, d in events if e == "content_block_start"]
    assert [b["type"] for b in blocks] == ["text", "tool_use"]
    text = "".join(d["delta"].get("text", "") for e, d in events if e == "content_block_delta")
    assert text == answer(upstream, "+text-and-tool+chunks-2")


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_anthropic_tool_result_turn_reaches_upstream(
    gw: GatewayThread, upstream: str, fakes: dict[str, FakeProviderThread]
) -> None:
    """API-3: tool_use/tool_result turns are translated (or passed through to an Anthropic upstream
    unmodified except for the model id, PROV-1)."""
    body = {
        "model": UPSTREAMS[upstream][0],
        "max_tokens": 50,
        "tools": [A_TOOL],
        "messages": [
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                    {"type": "text", "text": "echo: noted", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
    }
    msg = claude(gw).messages.create(**body)
    assert msg.content[0].text == "noted"
    sent = fakes[UPSTREAMS[upstream][1]].requests[-1].body
    if upstream == "anthropic":
        assert sent == {**body, "model": "model-c"}
    elif upstream == "openai":
        assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool", "user"]
        assert sent["messages"][1]["tool_calls"][0]["id"] == "toolu_1"
        assert sent["messages"][2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
    else:
        assert sent["contents"][2]["parts"][0]["functionResponse"]["name"] == "get_weather"


def test_anthropic_cross_format_fallback_keeps_a_valid_stream(gw: GatewayThread) -> None:
    """RESIL-9/PROV-1: first target (Anthropic upstream) 529s, the OpenAI-format target serves, and
    the Anthropic client still gets a valid Anthropic stream."""
    with claude(gw).messages.with_streaming_response.create(
        model="cross-529", max_tokens=100, stream=True, messages=[{"role": "user", "content": "hi"}]
    ) as resp:
        assert resp.headers["x-omniroute-provider"] == "local-o"
        assert resp.headers["x-omniroute-attempts"] == "2"
    with claude(gw).messages.stream(
        model="cross-529", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
    ) as s:
        events = [e.type for e in s if e.type != "text"]
        final = s.get_final_message()
    assert_anthropic_order(events)
    assert final.content[0].text == "Hello from o (model-o+chunks-3)."


def test_anthropic_error_event_before_content_falls_back(gw: GatewayThread) -> None:
    """RESIL-9: an error event before any content falls through invisibly to the next target (here a
    Gemini upstream answering with a tool call)."""
    with claude(gw).messages.stream(
        model="cross-event", max_tokens=100, tools=[A_TOOL], messages=[{"role": "user", "content": "hi"}]
    ) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[0].type == "tool_use" and final.content[0].input == ARGS


def test_anthropic_exhausted_529_is_an_anthropic_overloaded_error(gw: GatewayThread) -> None:
    """API-6: when every target is overloaded the client gets Anthropic's overloaded_error shape."""
    r = httpx.post(
        f"{gw.url}/v1/messages",
        timeout=10,
        json={
            "model": "fake-claude/model-c+fail-529",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert r.status_code == 503
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "overloaded_error"
    assert "diagnostics" in body


def test_anthropic_beta_query_headers_and_count_tokens(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """API-3: ?beta=true and anthropic-beta are accepted (and forwarded on pass-through);
    count_tokens answers a local estimate."""
    r = httpx.post(
        f"{gw.url}/v1/messages?beta=true",
        timeout=10,
        headers={
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "tools-2024-04-04",
            "x-api-key": "anything",
        },
        json={
            "model": "fake-claude/model-c",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "x"}],
        },
    )
    assert r.status_code == 200 and r.json()["content"][0]["text"] == "Hello from c (model-c)."
    assert fakes["c"].requests[-1].headers["anthropic-beta"] == "tools-2024-04-04"
    assert fakes["c"].requests[-1].headers["x-api-key"] == "sk-fc1"
    count = claude(gw).messages.count_tokens(
        model="fake-claude/model-c", messages=[{"role": "user", "content": "a" * 400}]
    )
    assert 90 <= count.input_tokens <= 120


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "local-o/model-o", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        (
            {
                "model": "local-o/model-o",
                "max_tokens": 5,
                "messages": [
                    {"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}]}
                ],
            },
            "messages.0.content.0.type",
        ),
        (
            {
                "model": "local-o/model-o",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "video"}]}],
            },
            "messages.0.content.0.type",
        ),
        (
            {
                "model": "local-o/model-o",
                "max_tokens": 5,
                "tool_choice": {"type": "sometimes"},
                "messages": [{"role": "user", "content": "x"}],
            },
            "tool_choice.type",
        ),
    ],
)
def test_anthropic_bad_input_is_400_naming_the_field(
    gw: GatewayThread, body: dict[str, Any], field: str
) -> None:
    """API-6: bad /v1/messages bodies → 400 invalid_request_error in Anthropic's shape naming the field."""
    r = httpx.post(f"{gw.url}/v1/messages", json=body, timeout=10)
    assert r.status_code == 400
    err = r.json()
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert err["error"]["message"].startswith(field)


def test_anthropic_auth_accepts_x_api_key(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    """API-8: /v1/messages takes x-api-key; an unknown key is 401 in Anthropic's shape."""
    extra = {
        **wire_config(fakes),
        "server": {"require_api_key": True},
        "api_keys": [{"name": "dev", "key": "sk-dev-123", "allowed_models": ["*"]}],
    }
    g = make_gateway(extra)
    ok = anthropic.Anthropic(base_url=g.url, api_key="sk-dev-123", max_retries=0).messages.create(
        model="local-o/model-o", max_tokens=10, messages=[{"role": "user", "content": "x"}]
    )
    assert ok.content[0].text == "Hello from o (model-o)."
    with pytest.raises(anthropic.AuthenticationError) as exc:
        anthropic.Anthropic(base_url=g.url, api_key="wrong", max_retries=0).messages.create(
            model="local-o/model-o", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert exc.value.body["error"]["type"] == "authentication_error"


# -- openai SDK → Anthropic and Gemini upstreams ------------------------------------------------------


@pytest.mark.parametrize("upstream", ["anthropic", "gemini"])
def test_openai_sdk_streamed_tool_call_from_other_formats(gw: GatewayThread, upstream: str) -> None:
    """PROV-1: streamed tool calls from Anthropic/Gemini upstreams have id, type, name and index ≥ 0 on
    their first delta and arguments that reassemble."""
    stream = oai(gw).chat.completions.create(
        model=UPSTREAMS[upstream][0] + "+tool-call",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[O_TOOL],
        stream=True,
    )
    first = None
    args = ""
    finish = None
    for c in stream:
        for tc in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            first = first or tc
            args += (tc.function.arguments or "") if tc.function else ""
        if c.choices and c.choices[0].finish_reason:
            finish = c.choices[0].finish_reason
    assert first is not None and first.id and first.type == "function" and first.index >= 0
    assert first.function is not None and first.function.name == "get_weather"
    assert json.loads(args) == ARGS
    assert finish == "tool_calls"


@pytest.mark.parametrize("upstream", ["anthropic", "gemini"])
def test_openai_sdk_include_usage_one_final_chunk_before_done(gw: GatewayThread, upstream: str) -> None:
    """API-1/RESIL-9: with include_usage exactly one final chunk has choices [] and the usage, then [DONE]."""
    body = {
        "model": UPSTREAMS[upstream][0],
        "messages": [{"role": "user", "content": "one two three"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", f"{gw.base_url}/chat/completions", json=body, timeout=10) as r:
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
    with_usage = [c for c in chunks if c.get("usage")]
    assert len(with_usage) == 1 and with_usage[0] is chunks[-1] and chunks[-1]["choices"] == []
    assert with_usage[0]["usage"]["prompt_tokens"] == 3 and with_usage[0]["usage"]["completion_tokens"] == 4
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == answer(upstream)


@pytest.mark.parametrize("upstream", ["anthropic", "gemini"])
def test_openai_sdk_non_streaming_from_other_formats(gw: GatewayThread, upstream: str) -> None:
    """PROV-1: chat.completion from Anthropic/Gemini upstreams: text, finish, usage, served model."""
    resp = oai(gw).chat.completions.create(
        model=UPSTREAMS[upstream][0] + "+reasoning", messages=[{"role": "user", "content": "hi"}]
    )
    assert resp.choices[0].message.content == answer(upstream, "+reasoning")
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.prompt_tokens == 1
    assert resp.model == UPSTREAMS[upstream][0].split("/")[1] + "+reasoning"


# -- openai SDK responses.create ---------------------------------------------------------------------


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_responses_create_non_streaming(gw: GatewayThread, upstream: str) -> None:
    """API-4: responses.create returns a completed response with output_text and usage."""
    r = oai(gw).responses.create(model=UPSTREAMS[upstream][0], input="hi there", instructions="be brief")
    assert r.status == "completed" and r.id.startswith("resp_")
    assert r.output_text == answer(upstream)
    assert r.usage is not None and r.usage.input_tokens == 4 and r.usage.output_tokens == 4


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_responses_create_streaming_events(gw: GatewayThread, upstream: str) -> None:
    """API-4: the stream is created → in_progress → item/part added → text deltas → done events →
    completed, with increasing sequence numbers."""
    events = list(
        oai(gw).responses.create(model=UPSTREAMS[upstream][0] + "+chunks-3", input="hi", stream=True)
    )
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert kinds.count("response.output_text.delta") == 3
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == answer(upstream, "+chunks-3")
    done = events[-1].response
    assert done.output_text == text and done.usage is not None and done.usage.output_tokens == 4


def test_responses_function_call_then_previous_response_id(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """API-4: a function call comes back as a function_call item; the follow-up with
    previous_response_id and a function_call_output replays the whole conversation upstream."""
    client = oai(gw)
    first = client.responses.create(model="local-o/model-o+tool-call", input="weather?", tools=[R_TOOL])
    (call,) = [o for o in first.output if o.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == ARGS and call.call_id
    second = client.responses.create(
        model="local-o/model-o",
        previous_response_id=first.id,
        tools=[R_TOOL],
        input=[
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
            {"role": "user", "content": "echo: done"},
        ],
    )
    assert second.output_text == "done"
    sent = fakes["o"].requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[1]["tool_calls"][0]["id"] == call.call_id
    assert sent[2] == {"role": "tool", "tool_call_id": call.call_id, "content": "sunny"}


@pytest.mark.parametrize("upstream", ["openai", "anthropic"])
def test_responses_streamed_function_call_events(gw: GatewayThread, upstream: str) -> None:
    """API-4: a streamed tool call → output_item.added (function_call) → arguments deltas → done."""
    events = list(
        oai(gw).responses.create(
            model=UPSTREAMS[upstream][0] + "+tool-call", input="weather?", tools=[R_TOOL], stream=True
        )
    )
    kinds = [e.type for e in events]
    assert "response.function_call_arguments.delta" in kinds
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(done.arguments) == ARGS
    added = next(e for e in events if e.type == "response.output_item.added")
    assert added.item.type == "function_call" and added.item.name == "get_weather"
    assert kinds[-1] == "response.completed"
    final = events[-1].response
    assert final.output[0].type == "function_call"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "local-o/model-o"}, "input"),
        (
            {"model": "local-o/model-o", "input": "x", "tools": [R_TOOL], "tool_choice": "sometimes"},
            "tool_choice",
        ),
        ({"model": "local-o/model-o", "input": [{"type": "mystery"}]}, "input[0].type"),
        (
            {"model": "local-o/model-o", "input": "x", "previous_response_id": "resp_nope"},
            "previous_response_id",
        ),
    ],
)
def test_responses_bad_input_is_400_naming_the_field(
    gw: GatewayThread, body: dict[str, Any], field: str
) -> None:
    """API-6: bad /v1/responses bodies → 400 in the OpenAI shape naming the field."""
    r = httpx.post(f"{gw.base_url}/responses", json=body, timeout=10)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field
    assert field.split("[")[0] in r.json()["error"]["message"]


# -- google-genai SDK ----------------------------------------------------------------------------------


@pytest.mark.parametrize("api_version", ["v1beta", None])
@pytest.mark.parametrize("upstream", ["openai", "anthropic"])
def test_genai_sdk_text_and_stream(gw: GatewayThread, upstream: str, api_version: str | None) -> None:
    """PROV-1: google-genai (v1beta and its default v1) → OpenAI and Anthropic upstreams."""
    client = gemini(gw, api_version)
    r = client.models.generate_content(
        model=UPSTREAMS[upstream][0],
        contents="hi there",
        config=types.GenerateContentConfig(system_instruction="be brief"),
    )
    assert r.text == answer(upstream)
    assert r.usage_metadata is not None and r.usage_metadata.prompt_token_count == 4
    assert r.candidates is not None and r.candidates[0].finish_reason == types.FinishReason.STOP
    chunks = list(
        client.models.generate_content_stream(model=UPSTREAMS[upstream][0] + "+chunks-3", contents="hi")
    )
    assert "".join(c.text or "" for c in chunks) == answer(upstream, "+chunks-3")
    assert chunks[-1].usage_metadata is not None and chunks[-1].usage_metadata.candidates_token_count == 4


@pytest.mark.parametrize("upstream", ["openai", "anthropic"])
def test_genai_sdk_function_calling_round_trip(
    gw: GatewayThread, upstream: str, fakes: dict[str, FakeProviderThread]
) -> None:
    """PROV-1: a function call reaches the google-genai client whole (streamed and not), and its
    function response goes back upstream as a tool result for that call."""
    client = gemini(gw, "v1beta")
    tool = types.Tool(
        function_declarations=[
            types.FunctionDeclaration(
                name="get_weather",
                description="Weather",
                parameters_json_schema={"type": "object", "properties": {}},
            )
        ]
    )
    cfg = types.GenerateContentConfig(
        tools=[tool], automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)
    )
    model = UPSTREAMS[upstream][0]
    r = client.models.generate_content(model=model + "+tool-call", contents="weather?", config=cfg)
    assert r.function_calls is not None
    (fc,) = r.function_calls
    assert fc.name == "get_weather" and fc.args == ARGS
    streamed = [
        c
        for c in client.models.generate_content_stream(
            model=model + "+tool-call", contents="weather?", config=cfg
        )
        if c.function_calls
    ]
    assert [c.function_calls[0].args for c in streamed] == [ARGS]
    history = [
        types.Content(role="user", parts=[types.Part(text="weather?")]),
        r.candidates[0].content,
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="get_weather", response={"sky": "clear"})],
        ),
    ]
    client.models.generate_content(model=model, contents=history, config=cfg)
    sent = fakes[UPSTREAMS[upstream][1]].requests[-1].body
    if upstream == "openai":
        assert sent["messages"][2]["role"] == "tool"
        assert sent["messages"][2]["tool_call_id"] == sent["messages"][1]["tool_calls"][0]["id"]
    else:
        assert sent["messages"][2]["content"][0]["type"] == "tool_result"
        assert sent["messages"][2]["content"][0]["tool_use_id"] == sent["messages"][1]["content"][0]["id"]


def test_genai_same_format_passes_through(gw: GatewayThread, fakes: dict[str, FakeProviderThread]) -> None:
    """PROV-1: a Gemini client reaching a Gemini upstream sends its body unchanged."""
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"temperature": 0.3, "topK": 7},
        "safetySettings": [],
    }
    r = httpx.post(f"{gw.url}/v1beta/models/fake-gemini/model-g:generateContent", json=body, timeout=10)
    assert r.status_code == 200 and r.json()["candidates"][0]["content"]["parts"][0]["text"] == answer(
        "gemini"
    )
    assert fakes["g"].requests[-1].body == body
    events = raw_events(gw, "/v1/models/fake-gemini/model-g+chunks-2:streamGenerateContent?alt=sse", body)
    assert "".join(
        p.get("text", "") for _, e in events for p in e["candidates"][0]["content"]["parts"]
    ) == answer("gemini", "+chunks-2")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "contents"),
        ({"contents": [{"role": "user", "parts": [{"mystery": 1}]}]}, "contents[0].parts[0]"),
        (
            {
                "contents": [{"role": "user", "parts": [{"text": "x"}]}],
                "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}},
            },
            "toolConfig.functionCallingConfig.mode",
        ),
    ],
)
def test_gemini_bad_input_is_400_naming_the_field(
    gw: GatewayThread, body: dict[str, Any], field: str
) -> None:
    """API-6: bad Gemini bodies → 400 INVALID_ARGUMENT in Gemini's shape naming the field."""
    r = httpx.post(f"{gw.url}/v1beta/models/local-o/model-o:generateContent", json=body, timeout=10)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["status"] == "INVALID_ARGUMENT" and err["code"] == 400
    assert field in err["message"]


# -- failures after commit ----------------------------------------------------------------------------


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
@pytest.mark.parametrize("surface", ["anthropic", "responses", "gemini"])
def test_failure_after_commit_ends_with_an_error_event(
    gw: GatewayThread, surface: str, upstream: str
) -> None:
    """RESIL-9: an upstream failure after the first content ends the client stream with the surface's
    error event and never with its normal end (no message_stop / response.completed / finishReason)."""
    model = UPSTREAMS[upstream][0] + "+chunks-4+error-after-2"
    if surface == "anthropic":
        events = raw_events(
            gw,
            "/v1/messages",
            {
                "model": model,
                "max_tokens": 50,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
        kinds = [e for e, _ in events]
        assert kinds[0] == "message_start" and kinds[-1] == "error" and "message_stop" not in kinds
        assert events[-1][1]["type"] == "error" and events[-1][1]["error"]["message"]
    elif surface == "responses":
        events = raw_events(gw, "/v1/responses", {"model": model, "input": "hi", "stream": True})
        kinds = [e for e, _ in events]
        assert kinds[-2:] == ["error", "response.failed"] and "response.completed" not in kinds
        assert events[-1][1]["response"]["status"] == "failed"
    else:
        events = raw_events(
            gw,
            f"/v1beta/models/{model}:streamGenerateContent?alt=sse",
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
        assert "error" in events[-1][1]
        assert not any(c.get("finishReason") for _, e in events for c in e.get("candidates") or ())
    assert len(events) >= 3  # content reached the client before the failure


# -- cross-check against an independent implementation: llmock ----------------------------------------

LLMOCK_PROVIDERS = {
    "openai": ("lm-openai", "/v1"),
    "anthropic": ("lm-claude", "/anthropic"),
    "gemini": ("lm-gemini", "/gemini/v1beta"),
}
MOCK_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="module")
def llmock_server() -> Any:
    from llmock.simulation import MockResponseSettings
    from llmock.testing import LLMockServer

    with LLMockServer(responses=MockResponseSettings(response_style="static")) as server:
        yield server


@pytest.fixture
def mock_gw(make_gateway: Callable[..., GatewayThread], llmock_server: Any) -> GatewayThread:
    llmock_server.state.reset()
    return make_gateway(
        {
            "providers": [
                {
                    "id": pid,
                    "format": fmt,
                    "base_url": llmock_server.url + path,
                    "models": [{"id": "mock-model", "max_output_tokens": 1024, "capabilities": ["tools"]}],
                }
                for fmt, (pid, path) in LLMOCK_PROVIDERS.items()
            ],
            "connections": [
                {"id": f"{pid}-1", "provider": pid, "api_key": "sk-mock"}
                for pid, _ in LLMOCK_PROVIDERS.values()
            ],
        }
    )


def _normal(resp: Any) -> tuple[str, list[tuple[str, Any]], str, tuple[int, int]]:
    """(text, [(tool name, args)], finish, (prompt, completion tokens)) of a chat.completion."""
    choice = resp.choices[0]
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]
    return (
        choice.message.content or "",
        calls,
        choice.finish_reason,
        (resp.usage.prompt_tokens, resp.usage.completion_tokens),
    )


def _normal_stream(chunks: list[Any]) -> tuple[str, list[tuple[str, Any]], str, tuple[int, int]]:
    text, finish, usage = "", "", (0, 0)
    calls: dict[int, list[str]] = {}
    for c in chunks:
        if c.usage is not None:
            usage = (c.usage.prompt_tokens, c.usage.completion_tokens)
        for ch in c.choices:
            text += ch.delta.content or ""
            finish = ch.finish_reason or finish
            for tc in ch.delta.tool_calls or []:
                entry = calls.setdefault(tc.index, ["", ""])
                entry[0] += (tc.function.name or "") if tc.function else ""
                entry[1] += (tc.function.arguments or "") if tc.function else ""
    return text, [(n, json.loads(a)) for _, (n, a) in sorted(calls.items())], finish, usage


def _cross_check(gw: GatewayThread, server: Any, reply: Any, *, stream: bool, **kwargs: Any) -> list[Any]:
    """Send the same request (with the same scripted reply) to llmock in each format; normalized results."""
    results = []
    for pid, _ in LLMOCK_PROVIDERS.values():
        if reply is not None:
            server.state.scenarios.add(reply)
        if stream:
            chunks = list(
                oai(gw).chat.completions.create(
                    model=f"{pid}/mock-model", stream=True, stream_options={"include_usage": True}, **kwargs
                )
            )
            results.append(_normal_stream(chunks))
        else:
            results.append(_normal(oai(gw).chat.completions.create(model=f"{pid}/mock-model", **kwargs)))
    return results


MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is six times seven?"},
]


@pytest.mark.parametrize("stream", [False, True])
def test_llmock_scripted_text_is_equivalent_across_formats(
    mock_gw: GatewayThread, llmock_server: Any, stream: bool
) -> None:
    """PROV-1 cross-check: the same scripted answer through llmock's OpenAI, Anthropic and Gemini
    endpoints gives the same text, finish reason and usage."""
    from llmock.scenarios import Reply

    results = _cross_check(
        mock_gw, llmock_server, Reply(text="The answer is 42."), stream=stream, messages=MESSAGES
    )
    assert results[0] == results[1] == results[2]
    assert results[0][0] == "The answer is 42." and results[0][2] == "stop" and results[0][3][0] > 0


@pytest.mark.parametrize("stream", [False, True])
def test_llmock_scripted_tool_call_is_equivalent_across_formats(
    mock_gw: GatewayThread, llmock_server: Any, stream: bool
) -> None:
    """PROV-1 cross-check: the same scripted tool call arrives with the same name, arguments, finish
    reason and usage from every format."""
    from llmock.scenarios import Reply, ToolCall

    reply = Reply(tool_calls=(ToolCall("get_weather", {"city": "Paris", "days": [1, 2]}),))
    results = _cross_check(mock_gw, llmock_server, reply, stream=stream, messages=MESSAGES, tools=[MOCK_TOOL])
    assert results[0] == results[1] == results[2]
    assert (
        results[0][1] == [("get_weather", {"city": "Paris", "days": [1, 2]})]
        and results[0][2] == "tool_calls"
    )


def test_llmock_agent_loop_is_equivalent_across_formats(mock_gw: GatewayThread, llmock_server: Any) -> None:
    """PROV-1 cross-check: llmock's own tool choice (from the translated tool schema) and its answer
    after the translated tool result agree across formats: the translation carries tools, tool calls
    and tool results faithfully."""
    first = _cross_check(mock_gw, llmock_server, None, stream=False, messages=MESSAGES, tools=[MOCK_TOOL])
    assert first[0][1] == first[1][1] == first[2][1] and first[0][1][0][0] == "get_weather"
    assert {r[2] for r in first} == {"tool_calls"}
    answers = []
    for pid, _ in LLMOCK_PROVIDERS.values():
        messages = [
            *MESSAGES,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps(first[0][1][0][1])},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ]
        resp = oai(mock_gw).chat.completions.create(
            model=f"{pid}/mock-model", messages=messages, tools=[MOCK_TOOL]
        )
        answers.append((resp.choices[0].message.content, resp.choices[0].finish_reason))
    assert answers == [("Mock response from mock-model.", "stop")] * 3


def test_llmock_anthropic_client_sees_the_same_answer_from_every_format(
    mock_gw: GatewayThread, llmock_server: Any
) -> None:
    """PROV-1 cross-check from the Anthropic surface: same text, stop reason and token counts."""
    from llmock.scenarios import Reply

    seen = []
    for pid, _ in LLMOCK_PROVIDERS.values():
        llmock_server.state.scenarios.add(Reply(text="Forty-two."))
        with claude(mock_gw).messages.stream(
            model=f"{pid}/mock-model",
            max_tokens=200,
            system="You are terse.",
            messages=[{"role": "user", "content": "What is six times seven?"}],
        ) as s:
            m = s.get_final_message()
        seen.append((m.content[0].text, m.stop_reason, m.usage.input_tokens, m.usage.output_tokens))
    assert seen[0] == seen[1] == seen[2]
    assert seen[0][:2] == ("Forty-two.", "end_turn")
