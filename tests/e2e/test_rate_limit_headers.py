"""Every response to a key with request/token limits carries OpenAI's ``x-ratelimit-*`` headers (API-8),
not only the 429s: ``limit``, ``remaining`` after this call and ``reset`` for ``-requests`` and
``-tokens``, as OpenAI's API sends them
(https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

BOTH = "sk-limited-both-0123456789abcdef"
RPM_ONLY = "sk-limited-rpm-0123456789abcdefg"
FREE = "sk-unlimited-0123456789abcdefghi"
MSG: Any = [{"role": "user", "content": "hi"}]
# The gateway counts a call's tokens before it runs: the prompt estimate (4 for this body) plus
# max_tokens, as OpenAI counts a request against its token limit.
CALL_TOKENS = 4 + 10


@pytest.fixture
def gt(make_gateway: Callable[..., GatewayThread]) -> GatewayThread:
    keys = [
        {"name": "both", "key": BOTH, "rpm": 3, "tpm": 1000},
        {"name": "rpm-only", "key": RPM_ONLY, "rpm": 5},
        {"name": "free", "key": FREE},
    ]
    return make_gateway({"api_keys": keys})


def test_openai_sdk_sees_the_remaining_requests_and_tokens_on_each_success(gt: GatewayThread) -> None:
    client = openai.OpenAI(base_url=gt.base_url, api_key=BOTH, max_retries=0)
    seen = []
    for _ in range(2):
        raw = client.chat.completions.with_raw_response.create(
            model="local-o/model-o", messages=MSG, max_tokens=10
        )
        assert raw.status_code == 200 and raw.parse().choices[0].message.content
        seen.append(raw.headers)
    assert [h["x-ratelimit-limit-requests"] for h in seen] == ["3", "3"]
    assert [h["x-ratelimit-remaining-requests"] for h in seen] == ["2", "1"]
    assert [h["x-ratelimit-limit-tokens"] for h in seen] == ["1000", "1000"]
    assert [h["x-ratelimit-remaining-tokens"] for h in seen] == [
        str(1000 - CALL_TOKENS),
        str(1000 - 2 * CALL_TOKENS),
    ]
    for h in seen:  # the window is a minute: whole again within it, in OpenAI's duration form
        for kind in ("requests", "tokens"):
            reset = h[f"x-ratelimit-reset-{kind}"]
            assert reset.endswith("s") and (reset == "1m0s" or int(reset[:-1]) <= 60), reset


def test_a_streamed_success_carries_the_headers_too(gt: GatewayThread) -> None:
    client = openai.OpenAI(base_url=gt.base_url, api_key=BOTH, max_retries=0)
    with client.chat.completions.with_streaming_response.create(
        model="local-o/model-o", messages=MSG, max_tokens=10, stream=True
    ) as raw:
        assert raw.headers["x-ratelimit-remaining-requests"] == "2"
        assert raw.headers["x-ratelimit-remaining-tokens"] == str(1000 - CALL_TOKENS)
        assert "[DONE]" in raw.read().decode()


def test_the_anthropic_route_sends_them_and_only_for_the_limits_the_key_has(gt: GatewayThread) -> None:
    r = httpx.post(
        f"{gt.url}/v1/messages",
        json={"model": "local-o/model-o", "max_tokens": 10, "messages": MSG},
        headers={"x-api-key": RPM_ONLY, "anthropic-version": "2023-06-01"},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    assert (r.headers["x-ratelimit-limit-requests"], r.headers["x-ratelimit-remaining-requests"]) == (
        "5",
        "4",
    )
    assert not any(h.endswith("-tokens") for h in r.headers if h.startswith("x-ratelimit"))


def test_a_key_without_limits_gets_no_rate_limit_headers(gt: GatewayThread) -> None:
    client = openai.OpenAI(base_url=gt.base_url, api_key=FREE, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="local-o/model-o", messages=MSG, max_tokens=10
    )
    assert raw.status_code == 200
    assert not [h for h in raw.headers if h.lower().startswith("x-ratelimit")]


def test_a_stream_whose_headers_go_out_before_its_first_token_carries_them(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    """A slow first token: the 200 headers go out early (before the route is known), the rate-limit
    headers with them."""
    gt = make_gateway(
        {
            "api_keys": [{"name": "both", "key": BOTH, "rpm": 3, "tpm": 1000}],
            "server": {"stream_keepalive_s": 0.2},
        }
    )
    fakes["o"].set_behaviour("model-o", "slow-ttft-2000")
    try:
        client = openai.OpenAI(base_url=gt.base_url, api_key=BOTH, max_retries=0)
        with client.chat.completions.with_streaming_response.create(
            model="local-o/model-o", messages=MSG, max_tokens=10, stream=True
        ) as raw:
            assert "x-omniroute-provider" not in raw.headers  # the early headers
            assert raw.headers["x-ratelimit-remaining-requests"] == "2"
            assert raw.headers["x-ratelimit-limit-tokens"] == "1000"
            assert "[DONE]" in raw.read().decode()
    finally:
        fakes["o"].set_behaviour("model-o", "")
