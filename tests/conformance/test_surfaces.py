"""The shared surface conformance suite (DESIGN house style 14, SPEC PROV-1, API-1, API-3, API-4,
API-6): every client wire format of the registry — OpenAI chat, Anthropic messages, OpenAI
Responses, Gemini generateContent … — driven by its official SDK, against every upstream wire format
of the registry, must give the same results: plain text, streaming, tools (non-streaming and
streaming), multi-turn with tool results, usage, and errors in its own shape.

Each client format has a small driver that speaks it and normalizes the answer to ``Result``; each
upstream format has a fake provider entry in :data:`UPSTREAMS`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types

from omniroute.config import config_from_dict
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread
from omniroute.wire import FORMATS, upstream_formats

ARGS = {"city": "Paris", "unit": "celsius"}
UPSTREAMS = {
    "openai": ("local-o/model-o", "o", "/v1"),
    "anthropic": ("fake-claude/model-c", "c", ""),
    "gemini": ("fake-gemini/model-g", "g", "/v1beta"),
}
"""Upstream format → (routable model, fake provider serving it, where its API lives on the fake)."""
CLIENT_FORMATS = [f.name for f in FORMATS if f.client is not None]
SCHEMA: Any = {"type": "object", "properties": {"city": {"type": "string"}}}


@dataclass
class Result:
    """A surface-neutral answer: text, tool calls ``(name, args)``, finish (stop | tool | length) and
    usage ``(prompt, completion)`` tokens."""

    text: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)
    finish: str = ""
    usage: tuple[int, int] = (0, 0)


class Driver(Protocol):
    def text(self, model: str, stream: bool) -> Result: ...
    def tool(self, model: str, stream: bool) -> Result: ...
    def tool_result_turn(self, model: str) -> Result: ...
    def error(self, model: str) -> tuple[int, dict[str, Any]]: ...


class OpenAIChat:
    """``POST /v1/chat/completions`` through the openai SDK."""

    shape = "openai"

    def __init__(self, gw: GatewayThread) -> None:
        self.gw = gw
        self.c = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)

    def _run(self, model: str, stream: bool, **kw: Any) -> Result:
        if not stream:
            r = self.c.chat.completions.create(model=model, **kw)
            m = r.choices[0].message
            calls = [(t.function.name, json.loads(t.function.arguments)) for t in m.tool_calls or []]
            return Result(
                m.content or "",
                calls,
                _finish(r.choices[0].finish_reason),
                (r.usage.prompt_tokens, r.usage.completion_tokens) if r.usage else (0, 0),
            )
        out = Result()
        parts: dict[int, list[str]] = {}
        for ch in self.c.chat.completions.create(
            model=model, stream=True, stream_options={"include_usage": True}, **kw
        ):
            if ch.usage:
                out.usage = (ch.usage.prompt_tokens, ch.usage.completion_tokens)
            for c in ch.choices:
                out.text += c.delta.content or ""
                out.finish = _finish(c.finish_reason) if c.finish_reason else out.finish
                for t in c.delta.tool_calls or []:
                    p = parts.setdefault(t.index, ["", ""])
                    p[0] += (t.function.name or "") if t.function else ""
                    p[1] += (t.function.arguments or "") if t.function else ""
        out.calls = [(n, json.loads(a)) for _, (n, a) in sorted(parts.items())]
        return out

    def text(self, model: str, stream: bool) -> Result:
        return self._run(model, stream, messages=[{"role": "user", "content": "one two three"}])

    def tool(self, model: str, stream: bool) -> Result:
        return self._run(
            model,
            stream,
            messages=[{"role": "user", "content": "weather?"}],
            tools=[{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}],
        )

    def tool_result_turn(self, model: str) -> Result:
        return self._run(
            model,
            False,
            tools=[{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}],
            messages=[
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                {"role": "user", "content": "echo: done"},
            ],
        )

    def error(self, model: str) -> tuple[int, dict[str, Any]]:
        r = httpx.post(
            f"{self.gw.base_url}/chat/completions",
            timeout=10,
            json={"model": model, "messages": [{"role": "user", "content": "x"}]},
        )
        return r.status_code, r.json()


class AnthropicMessages:
    """``POST /v1/messages`` through the anthropic SDK."""

    shape = "anthropic"

    def __init__(self, gw: GatewayThread) -> None:
        self.gw = gw
        self.c = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)

    def _run(self, model: str, stream: bool, **kw: Any) -> Result:
        if stream:
            with self.c.messages.stream(model=model, max_tokens=200, **kw) as s:
                m = s.get_final_message()
        else:
            m = self.c.messages.create(model=model, max_tokens=200, **kw)
        text = "".join(b.text for b in m.content if b.type == "text")
        calls = [(b.name, b.input) for b in m.content if b.type == "tool_use"]
        stops = {"end_turn": "stop", "tool_use": "tool", "max_tokens": "length"}
        prompt = m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0)
        return Result(
            text, calls, stops.get(str(m.stop_reason), str(m.stop_reason)), (prompt, m.usage.output_tokens)
        )

    def text(self, model: str, stream: bool) -> Result:
        return self._run(model, stream, messages=[{"role": "user", "content": "one two three"}])

    def tool(self, model: str, stream: bool) -> Result:
        return self._run(
            model,
            stream,
            messages=[{"role": "user", "content": "weather?"}],
            tools=[{"name": "get_weather", "input_schema": SCHEMA}],
        )

    def tool_result_turn(self, model: str) -> Result:
        return self._run(
            model,
            False,
            tools=[{"name": "get_weather", "input_schema": SCHEMA}],
            messages=[
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                        {"type": "text", "text": "echo: done"},
                    ],
                },
            ],
        )

    def error(self, model: str) -> tuple[int, dict[str, Any]]:
        r = httpx.post(
            f"{self.gw.url}/v1/messages",
            timeout=10,
            json={"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "x"}]},
        )
        return r.status_code, r.json()


class Responses:
    """``POST /v1/responses`` through the openai SDK."""

    shape = "openai"

    def __init__(self, gw: GatewayThread) -> None:
        self.gw = gw
        self.c = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)

    def _run(self, model: str, stream: bool, **kw: Any) -> Result:
        if stream:
            events = list(self.c.responses.create(model=model, stream=True, **kw))
            assert events[-1].type == "response.completed"
            r = events[-1].response
        else:
            r = self.c.responses.create(model=model, **kw)
        calls = [(o.name, json.loads(o.arguments)) for o in r.output if o.type == "function_call"]
        finish = "tool" if calls else ("stop" if r.status == "completed" else "length")
        usage = (r.usage.input_tokens, r.usage.output_tokens) if r.usage else (0, 0)
        return Result(r.output_text, calls, finish, usage)

    def text(self, model: str, stream: bool) -> Result:
        return self._run(model, stream, input="one two three")

    def tool(self, model: str, stream: bool) -> Result:
        return self._run(
            model,
            stream,
            input="weather?",
            tools=[{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
        )

    def tool_result_turn(self, model: str) -> Result:
        return self._run(
            model,
            False,
            tools=[{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
            input=[
                {"role": "user", "content": "weather?"},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "get_weather",
                    "arguments": '{"city": "Paris"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
                {"role": "user", "content": "echo: done"},
            ],
        )

    def error(self, model: str) -> tuple[int, dict[str, Any]]:
        r = httpx.post(f"{self.gw.base_url}/responses", json={"model": model, "input": "x"}, timeout=10)
        return r.status_code, r.json()


class Gemini:
    """``POST /v1beta/models/{model}:generateContent`` through the google-genai SDK."""

    shape = "gemini"

    def __init__(self, gw: GatewayThread) -> None:
        self.gw = gw
        self.c = genai.Client(
            api_key="x", http_options=types.HttpOptions(base_url=gw.url, api_version="v1beta")
        )
        self.cfg = types.GenerateContentConfig(
            tools=[
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(name="get_weather", parameters_json_schema=SCHEMA)
                    ]
                )
            ],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )

    def _run(self, model: str, stream: bool, contents: Any, cfg: Any = None) -> Result:
        chunks = (
            list(self.c.models.generate_content_stream(model=model, contents=contents, config=cfg))
            if stream
            else [self.c.models.generate_content(model=model, contents=contents, config=cfg)]
        )
        out = Result()
        for ch in chunks:
            for cand in ch.candidates or []:
                for p in (cand.content.parts if cand.content else None) or []:
                    if p.text and not p.thought:
                        out.text += p.text
                    if p.function_call:
                        out.calls.append((p.function_call.name or "", p.function_call.args))
                if cand.finish_reason:
                    out.finish = {"STOP": "stop", "MAX_TOKENS": "length"}.get(
                        cand.finish_reason.value, "other"
                    )
            if ch.usage_metadata and ch.usage_metadata.prompt_token_count:
                out.usage = (
                    ch.usage_metadata.prompt_token_count,
                    ch.usage_metadata.candidates_token_count or 0,
                )
        if out.calls and out.finish == "stop":
            out.finish = "tool"
        return out

    def text(self, model: str, stream: bool) -> Result:
        return self._run(model, stream, "one two three")

    def tool(self, model: str, stream: bool) -> Result:
        return self._run(model, stream, "weather?", self.cfg)

    def tool_result_turn(self, model: str) -> Result:
        contents = [
            types.Content(role="user", parts=[types.Part(text="weather?")]),
            types.Content(
                role="model",
                parts=[types.Part.from_function_call(name="get_weather", args={"city": "Paris"})],
            ),
            types.Content(
                role="user",
                parts=[
                    types.Part.from_function_response(name="get_weather", response={"output": "sunny"}),
                    types.Part(text="echo: done"),
                ],
            ),
        ]
        return self._run(model, False, contents, self.cfg)

    def error(self, model: str) -> tuple[int, dict[str, Any]]:
        r = httpx.post(
            f"{self.gw.url}/v1beta/models/{model}:generateContent",
            timeout=10,
            json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]},
        )
        return r.status_code, r.json()


SURFACES = {
    "openai": OpenAIChat,
    "anthropic": AnthropicMessages,
    "responses": Responses,
    "gemini": Gemini,
}
"""Client format → its driver."""


def test_every_registered_format_is_driven() -> None:
    """PROV-1: the suite covers every client and upstream format in the wire registry."""
    assert sorted(SURFACES) == sorted(CLIENT_FORMATS)
    assert sorted(UPSTREAMS) == sorted(upstream_formats())


def _finish(reason: str | None) -> str:
    return {"tool_calls": "tool"}.get(str(reason), str(reason))


@pytest.fixture(scope="module")
def gw(
    fakes: dict[str, FakeProviderThread], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayThread]:
    """One gateway for the module: these tests use no fault that changes routing state."""
    tmp: Path = tmp_path_factory.mktemp("surfaces")
    model = {"max_output_tokens": 4096, "context_window": 100000, "capabilities": ["tools"]}
    upstreams = [(fmt, *UPSTREAMS[fmt]) for fmt in upstream_formats()]
    config = {
        "database_url": f"sqlite:///{tmp}/omniroute.db",
        "providers": [
            {
                "id": routable.split("/")[0],
                "format": fmt,
                "base_url": fakes[fake].base_url + path,
                "models": [{"id": routable.split("/")[1], **model}],
            }
            for fmt, routable, fake, path in upstreams
        ],
        "connections": [
            {"id": f"{fmt}-1", "provider": routable.split("/")[0], "api_key": "k"}
            for fmt, routable, _, _ in upstreams
        ],
        "resilience": {"timeouts": {"connect_s": 2, "ttft_s": 5, "idle_s": 3, "total_s": 30}},
    }
    with GatewayThread(config_from_dict(config, env={})) as g:
        yield g


@pytest.fixture(params=CLIENT_FORMATS)
def surface(request: pytest.FixtureRequest, gw: GatewayThread) -> Any:
    return SURFACES[request.param](gw)


@pytest.fixture(params=upstream_formats())
def upstream(request: pytest.FixtureRequest) -> tuple[str, str]:
    model, fake, _ = UPSTREAMS[request.param]
    return model, fake


@pytest.mark.parametrize("stream", [False, True])
def test_plain_text_with_usage(surface: Driver, upstream: tuple[str, str], stream: bool) -> None:
    """PROV-1: the answer text, finish stop and usage (prompt 3 words, completion 4) reach every surface
    from every upstream format, streaming and not."""
    model, fake = upstream
    r = surface.text(model + "+chunks-3", stream)
    assert r.text == f"Hello from {fake} ({model.split('/')[1]}+chunks-3)."
    assert r.finish == "stop" and not r.calls
    assert r.usage == (3, 4)


@pytest.mark.parametrize("stream", [False, True])
def test_tool_call(surface: Driver, upstream: tuple[str, str], stream: bool) -> None:
    """PROV-1: a tool call (streamed arguments reassembled) reaches every surface with its name and
    arguments and a tool finish."""
    r = surface.tool(upstream[0] + "+tool-call", stream)
    assert r.calls == [("get_weather", ARGS)]
    assert r.finish == "tool" and r.text == ""


def test_multi_turn_with_tool_result(surface: Driver, upstream: tuple[str, str]) -> None:
    """PROV-1: a conversation with a tool call and its result is accepted and answered."""
    r = surface.tool_result_turn(upstream[0])
    assert r.text == "done" and r.finish == "stop"


def test_upstream_400_in_the_surface_shape(surface: Any, upstream: tuple[str, str]) -> None:
    """API-6/RESIL-5: an upstream validation error comes back as 400 in the surface's own error shape."""
    status, body = surface.error(upstream[0] + "+fail-400")
    assert status == 400
    if surface.shape == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    elif surface.shape == "gemini":
        assert body["error"]["status"] == "INVALID_ARGUMENT" and body["error"]["code"] == 400
    else:
        assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"]
