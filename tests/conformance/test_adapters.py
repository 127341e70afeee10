"""The shared adapter conformance suite (DESIGN house style 14, SPEC PROV-1): every upstream adapter
in the wire registry (OpenAI, Anthropic, Gemini …) is driven against the scripted fake provider
speaking its wire format, through the real upstream client, and must give the same canonical
results: plain text, streaming, tools (non-streaming and streaming, parallel), multi-turn with tool
results, reasoning, usage and classified errors (RESIL-5, RESIL-9).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from omniroute.errors import (
    ContextOverflow,
    Overloaded,
    RateLimited,
    StreamBroken,
    UpstreamBadRequest,
    UpstreamError,
)
from omniroute.providers.upstream import AttemptTimeouts, UpstreamClient
from omniroute.testing import FakeProvider
from omniroute.values import Candidate, ChatRequest, Connection, ModelInfo, ProviderInfo
from omniroute.wire import adapters, upstream_formats
from omniroute.wire.base import ProviderAdapter

FORMATS = upstream_formats()
BASE_PATHS = {"openai": "/v1", "anthropic": "", "gemini": "/v1beta"}
"""Where each format's API lives on the fake provider (a new upstream format adds its entry here and
teaches :class:`~omniroute.testing.FakeProvider` to speak it)."""
NOW = 1_700_000_000.0  # epoch s: the clock reading error classification is given
ARGS = {"city": "Paris", "unit": "celsius"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
USER = [{"role": "user", "content": "one two three"}]


@dataclass
class Harness:
    """One adapter, its fake upstream and the upstream client."""

    fmt: str
    adapter: ProviderAdapter
    fake: FakeProvider
    client: UpstreamClient

    def cand(self, model: str) -> Candidate:
        base = self.fake.base_url + BASE_PATHS[self.fmt]
        prov = ProviderInfo(id=f"fake-{self.fmt}", format=self.fmt, base_url=base)
        return Candidate(
            prov,
            Connection(id="c1", provider=prov.id, api_key="sk-test"),
            ModelInfo(id=model, max_output_tokens=1024),
        )

    async def call(self, model: str, body: dict[str, Any]) -> dict[str, Any]:
        """Non-streaming: build → send → parse (or raise the classified error)."""
        cand = self.cand(model)
        req = ChatRequest(body={"model": model, **body}, model=model)
        resp = await self.client.send(
            self.adapter.build_request(cand, req, stream=False), provider=cand.provider.id
        )
        try:
            raw = await resp.read()
            if resp.status >= 400:
                raise self.adapter.classify_error(resp.status, resp.headers, raw, cand, now=NOW)
            return self.adapter.parse_response(raw, cand)
        finally:
            resp.close()

    async def stream(self, model: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Streaming: every canonical chunk the parser yields, in order."""
        cand = self.cand(model)
        req = ChatRequest(body={"model": model, "stream": True, **body}, model=model, stream=True)
        resp = await self.client.send(
            self.adapter.build_request(cand, req, stream=True), provider=cand.provider.id
        )
        try:
            if resp.status >= 400:
                raise self.adapter.classify_error(resp.status, resp.headers, await resp.read(), cand, now=NOW)
            parser = self.adapter.stream_parser(cand, req)
            out: list[dict[str, Any]] = []
            async for ev, data in resp.events():
                out += parser.feed(ev, data)
                if parser.done:
                    break
            return out + parser.finish()
        finally:
            resp.close()

    def last_body(self) -> dict[str, Any]:
        body = self.fake.requests[-1].body
        assert isinstance(body, dict)
        return body


@pytest.fixture(params=FORMATS)
async def h(request: pytest.FixtureRequest) -> AsyncIterator[Harness]:
    fmt = request.param
    client = UpstreamClient(AttemptTimeouts(connect_s=2, ttft_s=5, idle_s=3, total_s=10))
    async with FakeProvider(name="fake", formats=(fmt,)) as fake:
        yield Harness(fmt, adapters()[fmt], fake, client)
    await client.close()


def content_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["delta"].get("content") or "" for ch in chunks for c in ch.get("choices") or ())


def finishes(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["finish_reason"] for ch in chunks for c in ch.get("choices") or () if c.get("finish_reason")]


def tool_deltas(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [tc for ch in chunks for c in ch.get("choices") or () for tc in c["delta"].get("tool_calls") or ()]


def usage_of(chunks: list[dict[str, Any]]) -> dict[str, Any] | None:
    found = [ch["usage"] for ch in chunks if ch.get("usage")]
    return found[-1] if found else None


async def test_plain_text_answer_and_usage(h: Harness) -> None:
    """PROV-1: a plain answer comes back as a canonical chat.completion with finish stop and usage."""
    resp = await h.call("m1", {"messages": USER})
    assert resp["object"] == "chat.completion"
    choice = resp["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "Hello from fake (m1)."
    assert choice["finish_reason"] == "stop"
    assert resp["usage"]["prompt_tokens"] == 3
    assert resp["usage"]["completion_tokens"] == 4
    assert resp["usage"]["total_tokens"] == 7


async def test_system_prompt_reaches_upstream_in_its_own_place(h: Harness) -> None:
    """PROV-1: system messages are translated to the format's system slot, not dropped."""
    await h.call("m1", {"messages": [{"role": "system", "content": "be brief"}, *USER]})
    body = h.last_body()
    if h.fmt == "anthropic":
        assert body["system"] == "be brief"
        assert [m["role"] for m in body["messages"]] == ["user"]
    elif h.fmt == "gemini":
        assert body["systemInstruction"] == {"parts": [{"text": "be brief"}]}
        assert [c["role"] for c in body["contents"]] == ["user"]
    else:
        assert body["messages"][0] == {"role": "system", "content": "be brief"}


async def test_streaming_text_reassembles_with_one_finish(h: Harness) -> None:
    """PROV-1/RESIL-9: streamed text deltas reassemble the answer; exactly one finish reason."""
    chunks = await h.stream("m1+chunks-4", {"messages": USER})
    assert content_of(chunks) == "Hello from fake (m1+chunks-4)."
    assert sum(1 for ch in chunks for c in ch["choices"] if c["delta"].get("content")) == 4
    assert finishes(chunks) == ["stop"]
    assert all(ch["object"] == "chat.completion.chunk" and ch["id"] and ch["model"] for ch in chunks)


async def test_streaming_usage_is_reported(h: Harness) -> None:
    """RESIL-9: a stream reports usage (prompt words, completion words) so spend is recorded."""
    usage = usage_of(await h.stream("m1", {"messages": USER}))
    assert usage is not None
    assert usage["prompt_tokens"] == 3
    assert usage["completion_tokens"] == 4


async def test_missing_usage_stays_missing(h: Harness) -> None:
    """OBS-1: no usage from the upstream → no invented usage."""
    assert usage_of(await h.stream("m1+usage-missing", {"messages": USER})) is None
    assert "usage" not in await h.call("m1+usage-missing", {"messages": USER})


async def test_tool_call_non_streaming(h: Harness) -> None:
    """PROV-1: a tool call comes back with an id, the function name and JSON arguments; finish tool_calls."""
    resp = await h.call("m1+tool-call", {"messages": USER, "tools": TOOLS, "tool_choice": "auto"})
    choice = resp["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["id"] and call["type"] == "function"
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == ARGS
    tools_sent = h.last_body()
    if h.fmt == "anthropic":
        assert tools_sent["tools"][0]["name"] == "get_weather"
        assert tools_sent["tools"][0]["input_schema"]["required"] == ["city"]
        assert tools_sent["tool_choice"] == {"type": "auto"}
    elif h.fmt == "gemini":
        decl = tools_sent["tools"][0]["functionDeclarations"][0]
        assert decl["name"] == "get_weather" and decl["parameters"]["required"] == ["city"]
        assert tools_sent["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}


async def test_tool_call_streaming_first_delta_names_the_call(h: Harness) -> None:
    """PROV-1: a streamed tool call's first delta has index ≥ 0, id, type and name; the argument
    fragments of that index concatenate to the full JSON; finish tool_calls."""
    chunks = await h.stream("m1+tool-call", {"messages": USER, "tools": TOOLS})
    deltas = tool_deltas(chunks)
    first = deltas[0]
    assert first["index"] >= 0 and first["id"] and first["type"] == "function"
    assert first["function"]["name"] == "get_weather"
    args = "".join(d["function"].get("arguments") or "" for d in deltas if d["index"] == first["index"])
    assert json.loads(args) == ARGS
    assert finishes(chunks) == ["tool_calls"]


async def test_parallel_tool_calls_keep_distinct_indexes(h: Harness) -> None:
    """PROV-1: parallel calls stream with distinct indexes, each with its own id and arguments."""
    chunks = await h.stream("m1+tools-2", {"messages": USER, "tools": TOOLS})
    starts = [d for d in tool_deltas(chunks) if d.get("id")]
    assert [d["index"] for d in starts] == [0, 1]
    assert len({d["id"] for d in starts}) == 2
    for s in starts:
        args = "".join(
            d["function"].get("arguments") or "" for d in tool_deltas(chunks) if d["index"] == s["index"]
        )
        assert json.loads(args) == ARGS


async def test_text_and_tool_call_in_one_answer(h: Harness) -> None:
    """PROV-1: an answer with text and a tool call keeps both, streaming and not."""
    resp = await h.call("m1+text-and-tool", {"messages": USER, "tools": TOOLS})
    msg = resp["choices"][0]["message"]
    assert msg["content"] and msg["tool_calls"][0]["function"]["name"] == "get_weather"
    chunks = await h.stream("m1+text-and-tool", {"messages": USER, "tools": TOOLS})
    assert content_of(chunks) and tool_deltas(chunks)[0]["id"]


async def test_multi_turn_with_tool_results_is_well_formed(h: Harness) -> None:
    """PROV-1: assistant tool calls and tool results are translated to the format's own turn shapes
    (Anthropic tool_use/tool_result in alternating turns; Gemini functionCall/functionResponse)."""
    messages = [
        *USER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": '{"sky": "rain"}'},
        {"role": "user", "content": "echo: thanks"},
    ]
    resp = await h.call("m1", {"messages": messages, "tools": TOOLS})
    assert resp["choices"][0]["message"]["content"] == "thanks"
    body = h.last_body()
    if h.fmt == "anthropic":
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["user", "assistant", "user"]
        uses = body["messages"][1]["content"]
        assert [(b["type"], b["id"], b["input"]) for b in uses] == [
            ("tool_use", "call_a", {"city": "Paris"}),
            ("tool_use", "call_b", {"city": "Rome"}),
        ]
        results = body["messages"][2]["content"]
        assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
        assert [b.get("tool_use_id") for b in results[:2]] == ["call_a", "call_b"]
    elif h.fmt == "gemini":
        assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
        calls = body["contents"][1]["parts"]
        assert [p["functionCall"]["args"] for p in calls] == [{"city": "Paris"}, {"city": "Rome"}]
        responses = body["contents"][2]["parts"]
        assert responses[0]["functionResponse"] == {"name": "get_weather", "response": {"output": "sunny"}}
        assert responses[1]["functionResponse"]["response"] == {"sky": "rain"}
        assert responses[2] == {"text": "echo: thanks"}


async def test_images_are_translated(h: Harness) -> None:
    """PROV-1: base64 data URLs and plain URLs become the format's image parts."""
    content = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
    ]
    await h.call("m1", {"messages": [{"role": "user", "content": content}]})
    body = h.last_body()
    if h.fmt == "anthropic":
        parts = body["messages"][0]["content"]
        assert parts[1] == {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        }
        assert parts[2] == {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}
    elif h.fmt == "gemini":
        parts = body["contents"][0]["parts"]
        assert parts[1] == {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
        assert parts[2] == {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}}


async def test_reasoning_becomes_reasoning_content(h: Harness) -> None:
    """PROV-1: thinking/thought content arrives as reasoning_content, streaming and not."""
    resp = await h.call("m1+reasoning", {"messages": USER})
    assert resp["choices"][0]["message"]["reasoning_content"] == "The user wants an answer from m1+reasoning."
    chunks = await h.stream("m1+reasoning", {"messages": USER})
    reasoning = "".join(c["delta"].get("reasoning_content") or "" for ch in chunks for c in ch["choices"])
    assert reasoning == "The user wants an answer from m1+reasoning."


async def test_max_tokens_truncation_is_finish_length(h: Harness) -> None:
    """PROV-1: the output cap is sent in the format's field and a truncated answer finishes 'length'."""
    resp = await h.call("m1", {"messages": USER, "max_tokens": 2})
    assert resp["choices"][0]["finish_reason"] == "length"
    assert resp["choices"][0]["message"]["content"] == "Hello from"


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("fail-429", RateLimited),
        ("fail-503", Overloaded),
        ("fail-400", UpstreamBadRequest),
        ("ctx-2", ContextOverflow),
    ],
)
async def test_http_errors_are_classified(h: Harness, fault: str, error: type[UpstreamError]) -> None:
    """RESIL-5: each format's error bodies map to the same error classes."""
    with pytest.raises(error):
        await h.call(f"m1+{fault}", {"messages": USER})
    with pytest.raises(error):
        await h.stream(f"m1+{fault}", {"messages": USER})


async def test_rate_limit_hint_is_kept(h: Harness) -> None:
    """RESIL-2: the Retry-After hint rides along on the classified error."""
    with pytest.raises(RateLimited) as exc:
        await h.call("m1+fail-429-retry-7", {"messages": USER})
    assert exc.value.retry_after_s == 7


async def test_error_event_in_stream_raises(h: Harness) -> None:
    """RESIL-9: an error event inside a 200 stream raises a classified, retryable error."""
    with pytest.raises(UpstreamError) as exc:
        await h.stream("m1+error-event", {"messages": USER})
    assert exc.value.retryable


async def test_malformed_event_is_stream_broken(h: Harness) -> None:
    """RESIL-9: a malformed event raises StreamBroken."""
    with pytest.raises(StreamBroken):
        await h.stream("m1+malformed-at-2", {"messages": USER})


async def test_stream_without_terminator_still_ends_with_its_finish(h: Harness) -> None:
    """RESIL-9: a stream that closes without its terminator ([DONE], message_stop) still yields the
    finish reason it sent; the parser adds nothing."""
    chunks = await h.stream("m1+no-done+chunks-3", {"messages": USER})
    assert finishes(chunks) == ["stop"]
    assert content_of(chunks) == "Hello from fake (m1+no-done+chunks-3)."


async def test_cut_connection_is_stream_broken(h: Harness) -> None:
    """RESIL-9: a connection cut mid-stream raises StreamBroken."""
    with pytest.raises(StreamBroken):
        await h.stream("m1+cut-after-1", {"messages": USER})
