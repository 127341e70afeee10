"""Scripted coding agents for the reasoning round-trip tests: each keeps a conversation in its client
format, replays everything the gateway gave it (signed thinking, reasoning items, tool-call ids) and
runs tool-using turns — ask, get a tool call, send the tool result, get the answer — asserting every
request is answered."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

AGENT = "strict+reasoning+call-get_weather"
MODEL = {"id": "m", "max_output_tokens": 4096, "context_window": 100000}
TOOL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
EFFORT = "low"
MAX_TOKENS = 4000


def sse_data(text: str) -> list[dict[str, Any]]:
    """The JSON objects of an SSE body's ``data:`` lines (``[DONE]`` left out)."""
    out = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(orjson.loads(line[6:]))
    return out


def _merge_chat_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A streamed chat completion → its assistant message, as an agent accumulates it."""
    msg: dict[str, Any] = {"role": "assistant", "content": ""}
    calls: dict[int, dict[str, Any]] = {}
    for ev in events:
        assert "error" not in ev, ev
        for c in ev.get("choices") or ():
            d = c.get("delta") or {}
            msg["content"] += d.get("content") or ""
            if d.get("thinking_blocks"):
                msg.setdefault("thinking_blocks", []).extend(d["thinking_blocks"])
            for tc in d.get("tool_calls") or ():
                call = calls.setdefault(
                    tc["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = tc.get("id") or call["id"]
                fn = tc.get("function") or {}
                call["function"]["name"] += fn.get("name") or ""
                call["function"]["arguments"] += fn.get("arguments") or ""
    if calls:
        msg["tool_calls"] = [calls[i] for i in sorted(calls)]
    return msg


class ChatAgent:
    """An OpenAI Chat Completions agent that keeps the assistant messages it gets, extensions
    (``thinking_blocks``) included; like typed OpenAI clients it does not send ``reasoning_content``
    back (an OpenAI client's own ``reasoning_content`` is passed to OpenAI-format upstreams as sent)."""

    def __init__(self, gw: GatewayThread) -> None:
        self.gw = gw
        self.messages: list[dict[str, Any]] = []

    def _ask(self, model: str, stream: bool) -> dict[str, Any]:
        body = {
            "model": model,
            "messages": self.messages,
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": TOOL_SCHEMA}}],
            "reasoning_effort": EFFORT,
            "max_tokens": MAX_TOKENS,
            "stream": stream,
        }
        r = httpx.post(f"{self.gw.url}/v1/chat/completions", json=body, timeout=30)
        assert r.status_code == 200, r.text
        msg = _merge_chat_stream(sse_data(r.text)) if stream else r.json()["choices"][0]["message"]
        msg.pop("reasoning_content", None)
        self.messages.append(msg)
        return msg

    def call(self, model: str, stream: bool, question: str) -> list[str]:
        self.messages.append({"role": "user", "content": question})
        msg = self._ask(model, stream)
        assert msg.get("tool_calls"), msg
        return [tc["id"] for tc in msg["tool_calls"]]

    def answer(self, model: str, stream: bool, ids: list[str]) -> str:
        self.messages += [{"role": "tool", "tool_call_id": i, "content": "sunny"} for i in ids]
        return str(self._ask(model, stream)["content"])


class MessagesAgent:
    """An Anthropic Messages agent on the official SDK (as Claude Code is): thinking on, replaying the
    content blocks it got (streamed ones as the SDK accumulates them, signatures included)."""

    def __init__(self, gw: GatewayThread) -> None:
        self.client = anthropic.Anthropic(base_url=gw.url, api_key="sk-test", max_retries=0)
        self.messages: list[dict[str, Any]] = []

    def _ask(self, model: str, stream: bool) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "model": model,
            "max_tokens": MAX_TOKENS,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "tools": [{"name": "get_weather", "input_schema": TOOL_SCHEMA}],
            "messages": self.messages,
        }
        if stream:
            with self.client.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = self.client.messages.create(**kwargs)
        blocks = [b.model_dump(exclude_none=True) for b in message.content]
        self.messages.append({"role": "assistant", "content": blocks})
        return blocks

    def call(self, model: str, stream: bool, question: str) -> list[str]:
        self.messages.append({"role": "user", "content": question})
        blocks = self._ask(model, stream)
        ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
        assert ids, blocks
        return ids

    def answer(self, model: str, stream: bool, ids: list[str]) -> str:
        results = [{"type": "tool_result", "tool_use_id": i, "content": "sunny"} for i in ids]
        self.messages.append({"role": "user", "content": results})
        return "".join(b.get("text", "") for b in self._ask(model, stream) if b["type"] == "text")


def _responses_output(r: httpx.Response, stream: bool) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    if not stream:
        return dict(r.json())
    done = [e for e in sse_data(r.text) if e.get("type") in ("response.completed", "response.failed")]
    assert done and done[-1]["type"] == "response.completed", r.text[-2000:]
    return dict(done[-1]["response"])


class ResponsesAgent:
    """A Responses API agent: with ``stateless`` it sends the whole conversation each time with
    ``store: false`` and ``include: ["reasoning.encrypted_content"]`` (as Codex CLI does), replaying
    the output items it got; otherwise it chains ``previous_response_id`` and sends only new items."""

    def __init__(self, gw: GatewayThread, stateless: bool = False) -> None:
        self.gw = gw
        self.stateless = stateless
        self.items: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []
        self.previous: str | None = None

    def _ask(self, model: str, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "tools": [{"type": "function", "name": "get_weather", "parameters": TOOL_SCHEMA}],
            "reasoning": {"effort": EFFORT},
            "max_output_tokens": MAX_TOKENS,
            "stream": stream,
        }
        if self.stateless:
            self.items += self.pending
            body.update(input=self.items, store=False, include=["reasoning.encrypted_content"])
        else:
            body["input"] = self.pending
            if self.previous:
                body["previous_response_id"] = self.previous
        self.pending = []
        resp = _responses_output(httpx.post(f"{self.gw.url}/v1/responses", json=body, timeout=30), stream)
        assert resp["status"] == "completed", resp
        self.previous = resp["id"]
        if self.stateless:
            self.items += resp["output"]
        return resp

    def call(self, model: str, stream: bool, question: str) -> list[str]:
        self.pending.append({"role": "user", "content": question})
        resp = self._ask(model, stream)
        if self.stateless and model.startswith("a/"):  # Anthropic's signed thinking, sealed for replay
            reasoning = [i for i in resp["output"] if i["type"] == "reasoning"]
            assert reasoning and all("encrypted_content" in i for i in reasoning), reasoning
        ids = [i["call_id"] for i in resp["output"] if i["type"] == "function_call"]
        assert ids, resp["output"]
        return ids

    def answer(self, model: str, stream: bool, ids: list[str]) -> str:
        self.pending += [{"type": "function_call_output", "call_id": i, "output": "sunny"} for i in ids]
        resp = self._ask(model, stream)
        return "".join(p["text"] for i in resp["output"] if i["type"] == "message" for p in i["content"])


class GeminiAgent:
    """A Gemini ``generateContent`` agent (as Gemini CLI is): thinking on, replaying the model turns
    it got with their parts unchanged (call signatures included); streamed turns are their events'
    parts, text and thoughts joined."""

    def __init__(self, gw: GatewayThread) -> None:
        self.gw = gw
        self.contents: list[dict[str, Any]] = []

    def _ask(self, model: str, stream: bool) -> list[dict[str, Any]]:
        body = {
            "contents": self.contents,
            "tools": [{"functionDeclarations": [{"name": "get_weather", "parameters": TOOL_SCHEMA}]}],
            "generationConfig": {
                "maxOutputTokens": MAX_TOKENS,
                "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True},
            },
        }
        action = "streamGenerateContent?alt=sse" if stream else "generateContent"
        r = httpx.post(f"{self.gw.url}/v1beta/models/{model}:{action}", json=body, timeout=30)
        assert r.status_code == 200, r.text
        events = sse_data(r.text) if stream else [r.json()]
        assert all("error" not in e for e in events), events
        parts: list[dict[str, Any]] = []
        for e in events:
            for p in (e.get("candidates") or [{}])[0].get("content", {}).get("parts", []):
                last = parts[-1] if parts else None
                joinable = last is not None and "text" in p and "text" in last
                if joinable and bool(last.get("thought")) == bool(p.get("thought")) and len(p) == len(last):
                    last["text"] += p["text"]
                else:
                    parts.append(dict(p))
        self.contents.append({"role": "model", "parts": parts})
        return parts

    def call(self, model: str, stream: bool, question: str) -> list[str]:
        self.contents.append({"role": "user", "parts": [{"text": question}]})
        calls = [p["functionCall"] for p in self._ask(model, stream) if "functionCall" in p]
        assert calls, self.contents[-1]
        return [str(c.get("id") or c["name"]) for c in calls]

    def answer(self, model: str, stream: bool, ids: list[str]) -> str:
        calls = [p["functionCall"] for p in self.contents[-1]["parts"] if "functionCall" in p]
        responses = [
            {"functionResponse": {"id": c.get("id"), "name": c["name"], "response": {"output": "sunny"}}}
            for c in calls
        ]
        self.contents.append({"role": "user", "parts": responses})
        return "".join(p.get("text", "") for p in self._ask(model, stream) if not p.get("thought"))


Agent = ChatAgent | MessagesAgent | ResponsesAgent | GeminiAgent


def make_agent(kind: str, gw: GatewayThread) -> Agent:
    """``chat`` | ``messages`` | ``responses`` (``previous_response_id``) | ``responses-stateless`` |
    ``gemini``."""
    if kind == "chat":
        return ChatAgent(gw)
    if kind == "messages":
        return MessagesAgent(gw)
    if kind == "gemini":
        return GeminiAgent(gw)
    return ResponsesAgent(gw, stateless=kind == "responses-stateless")


def family_config(fakes: dict[str, FakeProviderThread], tmp: Path) -> dict[str, Any]:
    """Providers ``a`` (Anthropic format, fake O), ``oa`` (OpenAI format, fake C), ``ge`` (Gemini
    format, fake G) serving ``m``, and ``a2``/``ge2`` (fakes O and G, own connections) serving ``mf``,
    the model a failover test makes fail; combos ``a-then-ge`` = a2/mf → ge/m and ``ge-then-a`` =
    ge2/mf → a/m."""
    providers = [
        ("a", "anthropic", f"{fakes['o'].base_url}", "m"),
        ("a2", "anthropic", f"{fakes['o'].base_url}", "mf"),
        ("oa", "openai", f"{fakes['c'].base_url}/v1", "m"),
        ("ge", "gemini", f"{fakes['g'].base_url}/v1beta", "m"),
        ("ge2", "gemini", f"{fakes['g'].base_url}/v1beta", "mf"),
    ]
    return {
        "database_url": f"sqlite:///{tmp}/omniroute.db",
        "providers": [
            {"id": pid, "format": fmt, "base_url": url, "models": [{**MODEL, "id": model}]}
            for pid, fmt, url, model in providers
        ],
        "connections": [{"id": f"{p[0]}1", "provider": p[0], "api_key": f"sk-{p[0]}"} for p in providers],
        "combos": [
            {"name": "a-then-ge", "strategy": "priority", "targets": [{"model": "a2/mf"}, {"model": "ge/m"}]},
            {"name": "ge-then-a", "strategy": "priority", "targets": [{"model": "ge2/mf"}, {"model": "a/m"}]},
        ],
        "resilience": {"timeouts": {"connect_s": 2, "ttft_s": 10, "idle_s": 10, "total_s": 30}},
    }


@pytest.fixture
def strict_gateway(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> Iterator[GatewayThread]:
    """The gateway on :func:`family_config`, every fake model a strict agent model (until the test ends)."""
    for fake in fakes.values():
        for model in ("m", "mf"):
            fake.set_behaviour(model, AGENT)
    yield make_gateway(replace=family_config(fakes, tmp_path))
    for fake in fakes.values():
        for model in ("m", "mf"):
            fake.set_behaviour(model, None)
