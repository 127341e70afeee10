"""Fixtures of the routing-state tests: Redis "replicas" on a private key prefix, and ``backend``, the
one list of backends every contract test runs on (STORE-1/2).

To check a new backend against the shared contract, add its name to :data:`BACKENDS` and a branch that
builds it in :func:`backend`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from state_support import DEAD_REDIS_URL, REDIS_UP, REDIS_URL, T0, Factory

from omniroute.state import (
    FakeClock,
    MemoryRoutingState,
    RedisRoutingState,
    ResilientRoutingState,
    RoutingState,
)

BACKENDS = ("memory", "redis", "resilient", "degraded")
"""``memory`` in-process; ``redis`` one replica; ``resilient`` the degrading wrapper while Redis answers;
``degraded`` the same wrapper with Redis unreachable (every call served by its in-process fallback)."""


@pytest.fixture
async def replicas() -> AsyncIterator[Factory]:
    """``make(clock=None, **kw)`` → a RedisRoutingState on one shared random prefix (a "replica");
    the prefix's keys are deleted afterwards."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    made: list[RedisRoutingState] = []

    def make(clock: FakeClock | None = None, **kw: Any) -> RedisRoutingState:
        state = RedisRoutingState(url=REDIS_URL, prefix=prefix, clock=clock, **kw)
        made.append(state)
        return state

    yield make
    if made:
        await made[0].clear()
    for state in made:
        await state.aclose()


@pytest.fixture(params=BACKENDS)
async def backend(
    request: pytest.FixtureRequest, replicas: Factory
) -> AsyncIterator[tuple[RoutingState, FakeClock]]:
    """The same behaviour on every backend, each on a fake clock at ``T0``."""
    clock = FakeClock(T0)
    if request.param == "memory":
        yield MemoryRoutingState(clock), clock
        return
    if request.param == "degraded":
        dead = ResilientRoutingState(RedisRoutingState(url=DEAD_REDIS_URL, clock=clock))
        yield dead, clock
        await dead.aclose()
        return
    if not REDIS_UP:
        pytest.skip(f"no Redis at {REDIS_URL}")
    if request.param == "redis":
        yield replicas(clock), clock
        return
    resilient = ResilientRoutingState(replicas(clock))
    yield resilient, clock
    await resilient.aclose()
