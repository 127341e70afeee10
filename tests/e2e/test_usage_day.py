"""A day of mixed traffic from two API keys, summed by ``/api/usage/summary`` per key, provider, model
and day, matches a hand computation from the providers' published list prices to the cent (OBS-1).

Prices are taken from genai-prices, pinned at 0.2.3 in pyproject.toml (the first test fails when the
installed version differs: upgrading the library is how prices change, and then these literals must be
checked again). The literals below are the providers' published list prices, USD per 1M tokens:

- OpenAI, https://openai.com/api/pricing/ : gpt-5 1.25 input / 0.125 cached input / 10.00 output;
  gpt-5-mini 0.25 / 0.025 / 2.00.
- Anthropic, https://docs.claude.com/en/docs/about-claude/pricing : Claude Sonnet 4.5 prompts
  ≤ 200K tokens 3 input / 3.75 5-minute cache write / 6 1-hour cache write / 0.30 cache read /
  15 output; prompts > 200K tokens (long context) 6 / 7.50 / 12 / 0.60 / 22.50. Claude Haiku 4.5
  1 / 1.25 / 2 / 0.10 / 5.
- Google, https://ai.google.dev/gemini-api/docs/pricing : Gemini 2.5 Pro prompts ≤ 200k tokens 1.25
  input / 0.125 context caching / 10.00 output (thinking included); prompts > 200k 2.50 / 0.25 /
  15.00. Gemini 2.5 Flash 0.30 / 0.03 / 2.50.

The fakes report the token counts each request's behaviour spec asks for (``prompt-N``,
``cache-read-N``, ``cache-write-N``, ``cache-write-1h-N``, ``reasoning``) in each provider's own usage
shape; the answer ``ok`` is one output token.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from omniroute.clock import FakeClock
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

DAY = datetime(2026, 11, 17, tzinfo=UTC).timestamp()  # the day under test, 00:00 UTC
KEYS = {"team-a": "sk-team-a-0123456789abcdefghijkl", "team-b": "sk-team-b-0123456789abcdefghijkl"}
REASONING = 7  # the fake's reasoning text "The user wants an answer from <model>." is 7 words
OUT = 1 + REASONING  # answer "ok" plus the reasoning: all output tokens
M = 1e6

# (key, surface, model, stream, fake spec, hand-computed cost in USD)
TRAFFIC: list[tuple[str, str, str, bool, str, float]] = [
    # cached prompt and reasoning, streamed: gpt-5-mini 10k uncached, 30k cached, 8 out
    (
        "team-a",
        "openai",
        "openai/gpt-5-mini",
        True,
        "prompt-40000+cache-read-30000+reasoning+answer-ok",
        (10_000 * 0.25 + 30_000 * 0.025 + OUT * 2.00) / M,
    ),
    # long context (250k > 200k): the whole request at Sonnet 4.5's long-context prices, with cache
    # reads, a 1-hour cache write and thinking, streamed in Anthropic's format
    (
        "team-a",
        "anthropic",
        "anthropic/claude-sonnet-4-5",
        True,
        "prompt-250000+cache-read-200000+cache-write-1h-40000+reasoning+answer-ok",
        (10_000 * 6 + 200_000 * 0.60 + 40_000 * 12 + OUT * 22.50) / M,
    ),
    # Gemini's own format, streamed, with context caching and thoughts
    (
        "team-a",
        "gemini",
        "gemini-2.5-flash",
        True,
        "prompt-8000+cache-read-6000+reasoning+answer-ok",
        (2_000 * 0.30 + 6_000 * 0.03 + OUT * 2.50) / M,
    ),
    # a 5-minute cache write, Anthropic model reached from an OpenAI client
    (
        "team-b",
        "openai",
        "anthropic/claude-haiku-4-5",
        False,
        "prompt-30000+cache-write-10000+answer-ok",
        (20_000 * 1 + 10_000 * 1.25 + 1 * 5) / M,
    ),
    # uncached, an OpenAI model reached from an Anthropic client
    ("team-b", "anthropic", "openai/gpt-5", False, "prompt-5000+answer-ok", (5_000 * 1.25 + 1 * 10) / M),
    # long context on Gemini 2.5 Pro (210k > 200k), uncached
    (
        "team-b",
        "openai",
        "gemini/gemini-2.5-pro",
        False,
        "prompt-210000+answer-ok",
        (210_000 * 2.50 + 1 * 15.00) / M,
    ),
    # the same model below the threshold, cached and thinking, streamed in Gemini's format
    (
        "team-b",
        "gemini",
        "gemini-2.5-pro",
        True,
        "prompt-100000+cache-read-50000+reasoning+answer-ok",
        (50_000 * 1.25 + 50_000 * 0.125 + OUT * 10.00) / M,
    ),
]

# the day before: a large gpt-5 call ($1.25001) that the day's figures must leave out
YESTERDAY = ("team-a", "openai", "openai/gpt-5", False, "prompt-1000000+answer-ok", (1e6 * 1.25 + 10) / M)


@pytest.fixture
def gw(make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]) -> GatewayThread:
    return make_gateway(
        {
            "providers": [
                {"id": "openai", "base_url": f"{fakes['o'].base_url}/v1"},
                {"id": "anthropic", "base_url": fakes["c"].base_url},
                {"id": "gemini", "base_url": f"{fakes['g'].base_url}/v1beta"},
            ],
            "connections": [
                {"id": "oa", "provider": "openai", "api_key": "sk-oa"},
                {"id": "an", "provider": "anthropic", "api_key": "sk-an"},
                {"id": "ge", "provider": "gemini", "api_key": "sk-ge"},
            ],
            "api_keys": [{"name": n, "key": k} for n, k in KEYS.items()],
        },
        clock=FakeClock(DAY - 12 * 3600),  # noon the day before
    )


def _send(gw: GatewayThread, fakes: dict[str, FakeProviderThread], row: tuple[Any, ...]) -> None:
    key, surface, model, stream, spec, _ = row
    provider, _, bare = model.rpartition("/")
    fakes[{"openai": "o", "anthropic": "c", "gemini": "g", "": "g"}[provider]].set_behaviour(bare, spec)
    messages = [{"role": "user", "content": "hi"}]
    auth = KEYS[key]
    if surface == "openai":
        url, headers = "/v1/chat/completions", {"authorization": f"Bearer {auth}"}
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": stream}
    elif surface == "anthropic":
        url, headers = "/v1/messages", {"x-api-key": auth, "anthropic-version": "2023-06-01"}
        body = {"model": model, "max_tokens": 100, "messages": messages, "stream": stream}
    else:
        action = "streamGenerateContent?alt=sse" if stream else "generateContent"
        url, headers = f"/v1beta/models/{model}:{action}", {"x-goog-api-key": auth}
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with httpx.stream("POST", f"{gw.url}{url}", json=body, headers=headers, timeout=30) as r:
        text = r.read().decode()
        assert r.status_code == 200, text
    if stream:  # a complete stream in each format
        assert {"openai": "[DONE]", "anthropic": "message_stop", "gemini": "finishReason"}[surface] in text


def test_the_price_library_is_the_pinned_version() -> None:
    """The literals in this module are checked against genai-prices 0.2.3 (pyproject.toml pins it)."""
    assert importlib.metadata.version("genai-prices") == "0.2.3"


def test_a_days_usage_per_key_matches_the_list_price_hand_computation(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    _send(gw, fakes, YESTERDAY)
    gw.advance(22 * 3600)  # 10:00 UTC on the day
    for row in TRAFFIC:
        _send(gw, fakes, row)
        gw.advance(600)
    ids = {k["name"]: k["id"] for k in httpx.get(f"{gw.url}/api/keys", timeout=10).json()["data"]}
    day = {"since": DAY, "until": DAY + 86400}
    r = httpx.get(f"{gw.url}/api/usage/summary", params={"group_by": "key,day", **day}, timeout=10)
    assert r.status_code == 200, r.text
    body = r.json()
    expected = sum(t[5] for t in TRAFFIC)
    assert body["total"]["requests"] == len(TRAFFIC)
    assert round(body["total"]["cost_usd"], 2) == round(expected, 2)  # to the cent
    assert body["total"]["cost_usd"] == pytest.approx(expected, abs=1e-9)
    assert body["total"]["price_unknown_requests"] == 0
    per_key = {d["key"]: d for d in body["data"]}
    assert {d["day"] for d in body["data"]} == {"2026-11-17"}
    for name in KEYS:
        want = sum(t[5] for t in TRAFFIC if t[0] == name)
        assert per_key[ids[name]]["cost_usd"] == pytest.approx(want, abs=1e-9), name
    a = per_key[ids["team-a"]]
    # every token class, summed: prompt tokens include cache reads and writes
    assert (a["prompt_tokens"], a["cached_tokens"], a["cache_write_tokens"], a["cache_write_1h_tokens"]) == (
        40_000 + 250_000 + 8_000,
        30_000 + 200_000 + 6_000,
        40_000,
        40_000,
    )
    assert a["completion_tokens"] == 3 * OUT
    # gpt-5-mini and Gemini report their thoughts apart; Anthropic counts thinking in output_tokens only
    assert a["reasoning_tokens"] == 2 * REASONING


def test_the_day_groups_by_provider_and_model_and_leaves_out_the_day_before(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    _send(gw, fakes, YESTERDAY)
    gw.advance(22 * 3600)
    for row in TRAFFIC:
        _send(gw, fakes, row)
    day = {"since": DAY, "until": DAY + 86400}
    body = httpx.get(
        f"{gw.url}/api/usage/summary", params={"group_by": "provider,model", **day}, timeout=10
    ).json()
    got = {(d["provider"], d["model"]): d["cost_usd"] for d in body["data"]}
    want: dict[tuple[str, str], float] = {}
    for _, _, model, _, _, usd in TRAFFIC:
        provider, _, bare = model.rpartition("/")
        key = (provider or "gemini", bare)
        want[key] = want.get(key, 0.0) + usd
    assert got.keys() == want.keys()
    for k, usd in want.items():
        assert got[k] == pytest.approx(usd, abs=1e-9), k
    both = httpx.get(
        f"{gw.url}/api/usage/summary", params={"group_by": "day", "since": DAY - 86400, "until": DAY + 86400}
    ).json()
    by_day = {d["day"]: d["cost_usd"] for d in both["data"]}
    assert by_day["2026-11-16"] == pytest.approx(YESTERDAY[5], abs=1e-9)
    assert by_day["2026-11-17"] == pytest.approx(sum(t[5] for t in TRAFFIC), abs=1e-9)


def test_openapi_documents_the_summary_groups_and_token_classes(gw: GatewayThread) -> None:
    spec = httpx.get(f"{gw.url}/openapi.json", timeout=10).json()
    op = spec["paths"]["/api/usage/summary"]["get"]
    params = {p["name"]: p for p in op["parameters"]}
    assert {"group_by", "since", "until"} <= params.keys()
    assert "provider" in params["group_by"]["description"] and "day" in params["group_by"]["description"]
    group = spec["components"]["schemas"]["UsageGroup"]["properties"]
    for field in ("key", "model", "provider", "day", "cached_tokens", "cache_write_1h_tokens", "cost_usd"):
        assert field in group, field
