"""Usage as each client format reports it, streaming and not, over every upstream family: input
tokens (cache reads and writes included or beside, as the format puts them), cache reads, cache
writes by lifetime (5 minutes / 1 hour), output and reasoning tokens. An Anthropic client's stream
over an upstream that reports usage only at the end gets an estimated ``message_start`` input count
and the true numbers in ``message_delta``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from reasoning_agents import sse_data, strict_gateway

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

__all__ = ["strict_gateway"]  # the fixture

SPEC = "prompt-40+cache-read-5+cache-write-7+cache-write-1h-3+reasoning+answer-ok"
FAKE = {"a": "o", "oa": "c", "ge": "g"}


@dataclass(frozen=True)
class Seen:
    """Usage read back from a client format: every count in tokens, ``None`` where the format has
    no place for it."""

    input: int
    cache_read: int
    cache_write: int | None
    cache_write_1h: int | None
    output: int
    reasoning: int | None


def _chat(gw: GatewayThread, model: str, stream: bool) -> Seen:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "low"}
    body |= (
        {"max_tokens": 4000, "stream": stream, "stream_options": {"include_usage": True}}
        if stream
        else {"max_tokens": 4000}
    )
    r = httpx.post(f"{gw.url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    u = [e for e in sse_data(r.text) if e.get("usage")][-1]["usage"] if stream else r.json()["usage"]
    d = u.get("prompt_tokens_details") or {}
    return Seen(
        u["prompt_tokens"],
        d.get("cached_tokens", 0),
        d.get("cache_write_tokens", 0),
        d.get("cache_write_1h_tokens", 0),
        u["completion_tokens"],
        (u.get("completion_tokens_details") or {}).get("reasoning_tokens", 0),
    )


def _messages(gw: GatewayThread, model: str, stream: bool) -> Seen:
    body = {
        "model": model,
        "max_tokens": 4000,
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "messages": [{"role": "user", "content": "hi"}],
        "stream": stream,
    }
    r = httpx.post(
        f"{gw.url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}, timeout=30
    )
    assert r.status_code == 200, r.text
    if stream:  # message_delta's counts replace message_start's, as the Anthropic SDK merges them
        events = sse_data(r.text)
        start = events[0]["message"]["usage"]
        assert start["input_tokens"] > 0, start  # the upstream's, or the gateway's estimate
        u = {**start, **[e for e in events if e["type"] == "message_delta"][-1]["usage"]}
    else:
        u = r.json()["usage"]
    read, write = u["cache_read_input_tokens"], u["cache_creation_input_tokens"]
    split = u.get("cache_creation") or {"ephemeral_1h_input_tokens": 0}
    assert write == sum(split.values())
    return Seen(
        u["input_tokens"] + read + write,
        read,
        write,
        split["ephemeral_1h_input_tokens"],
        u["output_tokens"],
        None,
    )


def _responses(gw: GatewayThread, model: str, stream: bool) -> Seen:
    body = {"model": model, "input": "hi", "reasoning": {"effort": "low"}, "max_output_tokens": 4000}
    r = httpx.post(f"{gw.url}/v1/responses", json={**body, "stream": stream}, timeout=30)
    assert r.status_code == 200, r.text
    if stream:
        u = [e for e in sse_data(r.text) if e["type"] == "response.completed"][-1]["response"]["usage"]
    else:
        u = r.json()["usage"]
    d = u["input_tokens_details"]
    return Seen(
        u["input_tokens"],
        d["cached_tokens"],
        d["cache_write_tokens"],
        d.get("cache_write_1h_tokens", 0),
        u["output_tokens"],
        u["output_tokens_details"]["reasoning_tokens"],
    )


def _gemini(gw: GatewayThread, model: str, stream: bool) -> Seen:
    body: dict[str, Any] = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True}},
    }
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    r = httpx.post(f"{gw.url}/v1beta/models/{model}:{action}", json=body, timeout=30)
    assert r.status_code == 200, r.text
    u = (
        [e for e in sse_data(r.text) if e.get("usageMetadata")][-1]["usageMetadata"]
        if stream
        else r.json()["usageMetadata"]
    )
    reasoning = u.get("thoughtsTokenCount", 0)
    return Seen(
        u["promptTokenCount"],
        u.get("cachedContentTokenCount", 0),
        None,
        None,
        u["candidatesTokenCount"] + reasoning,
        reasoning,
    )


SURFACES = {"chat": _chat, "messages": _messages, "responses": _responses, "gemini": _gemini}


def _expected(upstream: str) -> Seen:
    """What the fakes report for :data:`SPEC`, in canonical terms: 40 input tokens of which 5 cache
    reads and 10 cache writes (3 for one hour); Gemini has no cache writes, the OpenAI format no
    lifetime for them. Output counts depend on the answer and are only checked to be there."""
    writes = {"a": (10, 3), "oa": (10, 0), "ge": (0, 0)}[upstream]
    return Seen(40, 5, writes[0], writes[1], 0, None if upstream == "a" else 0)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("upstream", ["a", "oa", "ge"])
@pytest.mark.parametrize("surface", list(SURFACES))
def test_usage_reaches_every_surface_with_cache_and_reasoning_counts(
    strict_gateway: GatewayThread,
    fakes: dict[str, FakeProviderThread],
    surface: str,
    upstream: str,
    stream: bool,
) -> None:
    fake = fakes[FAKE[upstream]]
    fake.set_behaviour("m", SPEC)
    seen = SURFACES[surface](strict_gateway, f"{upstream}/m", stream)
    want = _expected(upstream)
    assert (seen.input, seen.cache_read) == (want.input, want.cache_read)
    if seen.cache_write is not None:
        assert (seen.cache_write, seen.cache_write_1h) == (want.cache_write, want.cache_write_1h)
    assert seen.output > 0
    if seen.reasoning is not None and want.reasoning is not None:
        assert 0 < seen.reasoning < seen.output


def test_anthropic_stream_over_an_openai_format_upstream_starts_with_an_estimate_and_ends_true(
    strict_gateway: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """``message_start`` cannot wait for the upstream's count (it comes last): its input count is the
    gateway's estimate of this prompt, and ``message_delta`` carries the upstream's true numbers."""
    fakes["c"].set_behaviour("m", "prompt-400+cache-read-50+answer-ok")
    prompt = "word " * 200
    body = {
        "model": "oa/m",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": prompt}],
    }
    r = httpx.post(
        f"{strict_gateway.url}/v1/messages",
        json=body,
        headers={"anthropic-version": "2023-06-01"},
        timeout=30,
    )
    events = sse_data(r.text)
    start = events[0]["message"]["usage"]
    assert 200 <= start["input_tokens"] <= 400, start  # ≈ 1,000 characters / 4
    end = [e for e in events if e["type"] == "message_delta"][-1]["usage"]
    assert (end["input_tokens"], end["cache_read_input_tokens"]) == (350, 50)


def test_anthropic_to_anthropic_keeps_cache_writes_apart_from_input_tokens(
    strict_gateway: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """Regression: a non-streaming answer from an Anthropic upstream used to fold its cache writes
    into ``input_tokens`` and report 0 ``cache_creation_input_tokens``."""
    fakes["o"].set_behaviour("m", SPEC)
    body = {"model": "a/m", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(
        f"{strict_gateway.url}/v1/messages",
        json=body,
        headers={"anthropic-version": "2023-06-01"},
        timeout=30,
    )
    u = r.json()["usage"]
    assert (u["input_tokens"], u["cache_creation_input_tokens"], u["cache_read_input_tokens"]) == (25, 10, 5)
    assert u["cache_creation"] == {"ephemeral_5m_input_tokens": 7, "ephemeral_1h_input_tokens": 3}
