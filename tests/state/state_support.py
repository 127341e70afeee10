"""Constants and helpers shared by the routing-state tests (STORE-1/2).

Redis comes from ``OMNIROUTE_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); every test uses a
fresh random key prefix and deletes its keys afterwards. Redis-backed tests skip when it is down.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from collections.abc import Callable

import pytest

from omniroute.state import (
    BreakerRecord,
    Change,
    CooldownRecord,
    LockKey,
    LockoutRecord,
    RedisRoutingState,
    RoutingState,
)

T0 = 1_700_000_000.0
REDIS_URL = os.environ.get("OMNIROUTE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_HOST = urllib.parse.urlsplit(REDIS_URL).hostname or "127.0.0.1"
REDIS_PORT = urllib.parse.urlsplit(REDIS_URL).port or 6379
DEAD_REDIS_URL = "redis://127.0.0.1:1/0"
"""A Redis nobody listens on: connections are refused at once."""


def _redis_up() -> bool:
    try:
        with socket.create_connection((REDIS_HOST, REDIS_PORT), timeout=0.5):
            return True
    except OSError:
        return False


REDIS_UP = _redis_up()
needs_redis = pytest.mark.skipif(not REDIS_UP, reason=f"no Redis at {REDIS_URL}")

Factory = Callable[..., RedisRoutingState]
"""``make(clock=None, **kw)`` → a RedisRoutingState ("replica") on the test's shared prefix."""


async def fail(state: RoutingState, now: float = T0, threshold: int = 3) -> Change[BreakerRecord]:
    """One counted failure with threshold 3, reset 30 s, cap ×16."""
    return await state.breaker_failure(
        "p", now, failure_threshold=threshold, reset_timeout_s=30.0, max_multiplier=16.0, reason="500 boom"
    )


async def extend(
    state: RoutingState, hint_s: float | None, reason: str, cid: str = "c1"
) -> Change[CooldownRecord]:
    """Cool connection ``cid`` of provider ``p`` down for ``hint_s`` (base 3 s, cap 300 s)."""
    return await state.cooldown_extend(
        cid,
        T0,
        provider="p",
        hint_s=hint_s,
        base_s=3,
        max_s=300,
        max_hint_s=1800,
        reason=reason,
        last_error=reason,
    )


async def lock(state: RoutingState, key: LockKey, now: float = T0) -> Change[LockoutRecord | None]:
    """Lock ``key`` with base 120 s, cap 1800 s."""
    return await state.lockout_extend(
        key, now, base_s=120.0, max_s=1800.0, until=None, hint_s=None, max_hint_s=86400.0, reason="q"
    )
