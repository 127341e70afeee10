"""Per-key rate limits (API-8): the moving window refuses with OpenAI's headers, limits come from the
key or the defaults, and an unreachable Redis leaves the counting to this process."""

from __future__ import annotations

import pytest

from omniroute.accounting.ratelimit import RateLimits
from omniroute.errors import KeyRateLimited


async def test_key_limits_win_over_the_defaults() -> None:
    rl = RateLimits(None, rpm=100, tpm=1000)
    assert rl.limits_for({"id": "a", "rpm": 5}) == (5, 1000)
    assert rl.limits_for({"id": "b"}) == (100, 1000)
    assert rl.limits_for(None) == (None, None)


async def test_a_dead_redis_falls_back_to_counting_in_memory() -> None:
    rl = RateLimits("redis://127.0.0.1:1/0?prefix=dead", rpm=2)
    key = {"id": "k"}
    await rl.hit(key, 10)
    await rl.hit(key, 10)
    with pytest.raises(KeyRateLimited) as exc:
        await rl.hit(key, 10)
    assert exc.value.status == 429 and exc.value.headers["x-ratelimit-limit-requests"] == "2"
    assert exc.value.headers["x-ratelimit-remaining-requests"] == "0"
    assert 1 <= int(exc.value.headers["retry-after"]) <= 60


async def test_a_call_larger_than_the_token_limit_is_refused_as_too_large() -> None:
    rl = RateLimits(None, tpm=100)
    with pytest.raises(KeyRateLimited, match="Request too large") as exc:
        await rl.hit({"id": "k"}, 101)
    assert exc.value.type == "tokens" and exc.value.headers["x-ratelimit-limit-tokens"] == "100"
