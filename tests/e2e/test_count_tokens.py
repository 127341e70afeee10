"""Token counting: forwarded to the target upstream's own count endpoint for Anthropic- and
Gemini-format targets (whatever the client's format), a tokenizer for OpenAI-family models when its
encoding can be loaded, else the estimate — each answer saying its source in
``X-OmniRoute-Token-Count``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from reasoning_agents import family_config

from omniroute.testing import FakeProviderThread
from omniroute.testing.faults import count_tokens_of
from omniroute.testing.gateway import GatewayThread
from omniroute.wire.anthropic.inbound import estimate_input_tokens
from omniroute.wire.count_tokens import tokenizer_count

ANTHROPIC = {"anthropic-version": "2023-06-01"}
PROMPT = "How many tokens does this prompt have?"


@pytest.fixture
def gw(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> GatewayThread:
    """The providers of :func:`family_config`, ``oa`` also serving ``gpt-4o``."""
    cfg = family_config(fakes, tmp_path)
    next(p for p in cfg["providers"] if p["id"] == "oa")["models"].append({"id": "gpt-4o"})
    for fake in fakes.values():
        fake.set_behaviour("m", "")
    return make_gateway(replace=cfg)


BODY = {"system": "Be brief.", "messages": [{"role": "user", "content": PROMPT}]}
ESTIMATE = estimate_input_tokens(BODY)


def _anthropic_count(gw: GatewayThread, model: str) -> httpx.Response:
    body = {"model": model, **BODY}
    r = httpx.post(f"{gw.url}/v1/messages/count_tokens", json=body, headers=ANTHROPIC, timeout=30)
    assert r.status_code == 200, r.text
    return r


def _gemini_count(gw: GatewayThread, model: str) -> httpx.Response:
    body = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
    r = httpx.post(f"{gw.url}/v1beta/models/{model}:countTokens", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r


@pytest.mark.parametrize(
    ("model", "fake", "path"), [("a/m", "o", "/count_tokens"), ("ge/m", "g", ":countTokens")]
)
def test_anthropic_count_tokens_is_the_target_upstreams_own_count(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread], model: str, fake: str, path: str
) -> None:
    r = _anthropic_count(gw, model)
    assert r.headers["x-omniroute-token-count"] == "upstream"
    sent = fakes[fake].requests[-1]
    assert sent.path.endswith(path)
    assert r.json() == {"input_tokens": count_tokens_of(sent.body)} != {"input_tokens": ESTIMATE}
    assert "Be brief." in repr(sent.body) and PROMPT in repr(sent.body)


@pytest.mark.parametrize(
    ("model", "fake", "path"), [("a/m", "o", "/count_tokens"), ("ge/m", "g", ":countTokens")]
)
def test_gemini_count_tokens_is_the_target_upstreams_own_count(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread], model: str, fake: str, path: str
) -> None:
    r = _gemini_count(gw, model)
    assert r.headers["x-omniroute-token-count"] == "upstream"
    sent = fakes[fake].requests[-1]
    assert sent.path.endswith(path) and PROMPT in repr(sent.body)
    assert r.json() == {"totalTokens": count_tokens_of(sent.body)}


def test_a_failing_upstream_count_falls_back_to_the_estimate(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    fakes["o"].set_behaviour("m", "fail-500")
    r = _anthropic_count(gw, "a/m")
    assert r.headers["x-omniroute-token-count"] == "estimate"
    assert r.json() == {"input_tokens": ESTIMATE}


def test_a_model_without_a_tokenizer_gets_the_estimate_marked_as_one(gw: GatewayThread) -> None:
    r = _anthropic_count(gw, "oa/m")
    assert r.headers["x-omniroute-token-count"] == "estimate"
    assert r.json() == {"input_tokens": ESTIMATE}


def test_an_openai_family_model_is_counted_by_tiktoken_when_its_encoding_loads(gw: GatewayThread) -> None:
    """tiktoken downloads its encodings; without a network the answer is the estimate, said so."""
    r = _anthropic_count(gw, "oa/gpt-4o")
    canonical = {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": PROMPT}]
    }
    local = tokenizer_count(canonical, "gpt-4o")
    if local is None:
        assert r.headers["x-omniroute-token-count"] == "estimate"
        assert r.json() == {"input_tokens": ESTIMATE}
    else:
        assert r.headers["x-omniroute-token-count"] == "tokenizer"
        assert r.json() == {"input_tokens": local}
