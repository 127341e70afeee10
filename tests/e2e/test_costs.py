"""A day of mixed traffic priced from list prices, summed by ``/api/usage/summary`` (SPEC OBS-1).

The built-in ``openai``, ``anthropic`` and ``gemini`` providers are pointed at the fakes, so requests
are priced by genai-prices 0.2.3 (USD per 1M tokens: gpt-5 1.25 in / 0.125 cached / 10 out; Claude
Sonnet 4.5 3 in / 0.30 cached / 3.75 5-min write / 6 1-hour write / 15 out; Gemini 2.5 Pro above 200k
prompt tokens 2.50 in / 0.25 cached / 15 out). Each fake reports the token counts its behaviour spec
asks for (``prompt-N``, ``cache-read-N``, ``cache-write-N``, ``cache-write-1h-N``, ``reasoning``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

# The fake's reasoning text is "The user wants an answer from <model>.": 7 words.
REASONING = 7

# (surface, model, stream, fake spec, hand-computed cost in USD)
TRAFFIC: list[tuple[str, str, bool, str, float]] = [
    # uncached
    ("openai", "openai/gpt-5", False, "prompt-10000+answer-ok", (10_000 * 1.25 + 1 * 10) / 1e6),
    # cached prompt, streamed
    (
        "openai",
        "openai/gpt-5",
        True,
        "prompt-10000+cache-read-8000+answer-ok",
        (2_000 * 1.25 + 8_000 * 0.125 + 10) / 1e6,
    ),
    # reasoning: the thought tokens are output tokens
    (
        "openai",
        "openai/gpt-5",
        False,
        "prompt-1000+reasoning+answer-ok",
        (1_000 * 1.25 + (1 + REASONING) * 10) / 1e6,
    ),
    # 100k cache reads and 12 output tokens: $0.03018
    (
        "anthropic",
        "anthropic/claude-sonnet-4-5",
        True,
        "prompt-100000+cache-read-100000+answer-a_b_c_d_e_f_g_h_i_j_k_l",
        (100_000 * 0.3 + 12 * 15) / 1e6,
    ),
    # cache writes at both lifetimes
    (
        "anthropic",
        "anthropic/claude-sonnet-4-5",
        False,
        "prompt-50000+cache-write-20000+cache-write-1h-10000+answer-ok",
        (20_000 * 3 + 20_000 * 3.75 + 10_000 * 6 + 1 * 15) / 1e6,
    ),
    # long context with cache reads and reasoning, streamed, reached from an OpenAI client
    (
        "openai",
        "gemini/gemini-2.5-pro",
        True,
        "prompt-300000+cache-read-100000+reasoning+answer-ok",
        (200_000 * 2.5 + 100_000 * 0.25 + (1 + REASONING) * 15) / 1e6,
    ),
    # the same model through its own wire format, below the long-context threshold
    (
        "gemini",
        "gemini-2.5-pro",
        False,
        "prompt-20000+cache-read-10000+answer-ok",
        (10_000 * 1.25 + 10_000 * 0.125 + 10) / 1e6,
    ),
]


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
        }
    )


def _send(gw: GatewayThread, surface: str, model: str, stream: bool) -> None:
    messages = [{"role": "user", "content": "hi"}]
    if surface == "openai":
        url, body = "/v1/chat/completions", {"model": model, "messages": messages, "stream": stream}
    elif surface == "anthropic":
        url = "/v1/messages"
        body = {"model": model, "max_tokens": 100, "messages": messages, "stream": stream}
    else:
        action = "streamGenerateContent?alt=sse" if stream else "generateContent"
        url, body = (
            f"/v1beta/models/{model}:{action}",
            {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
    r = httpx.post(f"{gw.url}{url}", json=body, timeout=30)
    assert r.status_code == 200, r.text
    r.read()


def _spec_for(fakes: dict[str, FakeProviderThread], model: str, spec: str) -> None:
    provider, _, bare = model.rpartition("/")
    fake = {"openai": "o", "anthropic": "c", "gemini": "g", "": "g"}[provider]
    fakes[fake].set_behaviour(bare, spec)


def test_a_day_of_mixed_traffic_costs_its_hand_computed_total(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """OBS-1: cached, uncached, cache-writing, reasoning and long-context requests over every surface,
    streaming and not, sum to the list-price total to the cent, per model and overall."""
    for surface, model, stream, spec, _ in TRAFFIC:
        _spec_for(fakes, model, spec)
        _send(gw, surface, model, stream)
    summary = httpx.get(f"{gw.url}/api/usage/summary", params={"group_by": "provider,model,day"}, timeout=10)
    assert summary.status_code == 200, summary.text
    body: dict[str, Any] = summary.json()
    expected_total = sum(t[4] for t in TRAFFIC)
    assert body["total"]["requests"] == len(TRAFFIC)
    assert round(body["total"]["cost_usd"], 2) == round(expected_total, 2)
    assert body["total"]["cost_usd"] == pytest.approx(expected_total, abs=1e-9)
    by_model = {(d["provider"], d["model"]): d for d in body["data"]}
    sonnet = by_model[("anthropic", "claude-sonnet-4-5")]
    assert sonnet["cost_usd"] == pytest.approx(TRAFFIC[3][4] + TRAFFIC[4][4], abs=1e-9)
    assert (sonnet["cached_tokens"], sonnet["cache_write_tokens"], sonnet["cache_write_1h_tokens"]) == (
        100_000,
        30_000,
        10_000,
    )
    assert by_model[("openai", "gpt-5")]["reasoning_tokens"] == REASONING
    pro = by_model[("gemini", "gemini-2.5-pro")]
    assert (pro["prompt_tokens"], pro["cached_tokens"], pro["reasoning_tokens"]) == (
        320_000,
        110_000,
        REASONING,
    )
    assert pro["cost_usd"] == pytest.approx(TRAFFIC[5][4] + TRAFFIC[6][4], abs=1e-9)
    assert {d["day"] for d in body["data"]} == {body["data"][0]["day"]}
    assert body["total"]["price_unknown_requests"] == 0


def test_a_model_without_a_price_is_recorded_at_zero_and_flagged(
    gw: GatewayThread, caplog: pytest.LogCaptureFixture
) -> None:
    """OBS-1: a model no price source knows is served, costs $0, and its rows say price_unknown;
    the warning is logged once per model."""
    for _ in range(2):
        _send(gw, "openai", "openai/gpt-99-experimental", False)
    rows = httpx.get(f"{gw.url}/api/usage", timeout=10).json()["data"]
    assert [(r["cost_usd"], r["price_unknown"]) for r in rows] == [(0.0, True), (0.0, True)]
    summary = httpx.get(f"{gw.url}/api/usage/summary", params={"group_by": "key"}, timeout=10).json()
    assert summary["data"] == [
        {
            "key": None,
            "requests": 2,
            "prompt_tokens": rows[0]["prompt_tokens"] * 2,
            "completion_tokens": rows[0]["completion_tokens"] * 2,
            "cached_tokens": 0,
            "cache_write_tokens": 0,
            "cache_write_1h_tokens": 0,
            "reasoning_tokens": 0,
            "cost_usd": 0.0,
            "price_unknown_requests": 2,
        }
    ]
    warnings = [r for r in caplog.records if "gpt-99-experimental" in r.getMessage()]
    assert len(warnings) == 1


def test_an_unknown_summary_group_is_a_400_naming_the_parameter(gw: GatewayThread) -> None:
    """Bad input gets a 400 naming the field, never a 500."""
    r = httpx.get(f"{gw.url}/api/usage/summary", params={"group_by": "model,colour"}, timeout=10)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "group_by" and "colour" in r.json()["error"]["message"]
