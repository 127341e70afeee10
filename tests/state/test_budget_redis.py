"""Key budgets in Redis (API-8): two replicas' reservations share one counter, settlement swaps the
estimate for the real cost, and the UTC day boundary of the injected clock starts a new period.
Skipped when Redis is down."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from state_support import REDIS_URL, needs_redis

from omniroute.accounting.budget import Budgets, Reservation
from omniroute.clock import FakeClock
from omniroute.errors import BudgetExceeded
from omniroute.state.redis import RedisRoutingState

pytestmark = needs_redis

START = datetime(2026, 12, 2, 23, 59, tzinfo=UTC).timestamp()


@pytest.fixture
async def replicas() -> AsyncIterator[tuple[FakeClock, Budgets, Budgets]]:
    prefix = f"budget-{uuid.uuid4().hex[:10]}"
    clock = FakeClock(START)
    states = [RedisRoutingState(url=REDIS_URL, prefix=prefix, clock=clock) for _ in range(2)]
    yield clock, Budgets(clock, lambda: None, states[0]), Budgets(clock, lambda: None, states[1])
    await states[0].clear()
    for s in states:
        await s.aclose()


def key(**extra: Any) -> dict[str, Any]:
    return {"id": "k1", "budget_usd": 1.0, "budget_period": "daily", "spent_usd": 0.0, **extra}


async def test_two_replicas_never_reserve_more_than_the_cap(
    replicas: tuple[FakeClock, Budgets, Budgets],
) -> None:
    _, a, b = replicas
    got = await asyncio.gather(*(r.reserve(key(), 0.3) for r in (a, b) * 10), return_exceptions=True)
    held = [g for g in got if isinstance(g, Reservation)]
    assert len(held) == 3 and all(isinstance(g, BudgetExceeded) for g in got if g not in held)
    refused = next(g for g in got if isinstance(g, BudgetExceeded))
    assert refused.status == 402 and refused.extra["budget"]["resets_at"] == "2026-12-03T00:00:00Z"
    for r in held:
        assert a.settle(r, 0.1) == 0.0  # settled in Redis: nothing left for the database to release
    await a.drain()
    assert isinstance(await b.reserve(key(), 0.7), Reservation)  # 0.3 spent + 0.7 fits
    with pytest.raises(BudgetExceeded, match=r"spent \$0\.3 of its \$1 daily budget"):
        await b.reserve(key(), 0.01)


async def test_the_utc_day_boundary_starts_a_new_period(replicas: tuple[FakeClock, Budgets, Budgets]) -> None:
    clock, a, _ = replicas
    a.settle(await a.reserve(key(), 0.5), 1.5)
    await a.drain()
    with pytest.raises(BudgetExceeded):
        await a.reserve(key(), 0.1)
    clock.advance(61)  # 00:00:01 UTC
    assert isinstance(await a.reserve(key(), 0.9), Reservation)


async def test_a_new_counter_starts_from_the_stored_spend_of_this_period(
    replicas: tuple[FakeClock, Budgets, Budgets],
) -> None:
    _, a, _ = replicas
    stored = key(spent_usd=0.95, period_start=datetime(2026, 12, 2, tzinfo=UTC).timestamp())
    with pytest.raises(BudgetExceeded, match=r"spent \$0\.95"):
        await a.reserve(stored, 0.1)


async def test_a_reservation_nothing_settles_is_released_after_its_hold(
    replicas: tuple[FakeClock, Budgets, Budgets],
) -> None:
    clock, a, b = replicas
    a.hold_s = b.hold_s = 60.0
    held = await a.reserve(key(budget_period="total"), 0.9)  # its process "dies": never settled
    with pytest.raises(BudgetExceeded, match=r"\$0\.9 is reserved"):
        await b.reserve(key(budget_period="total"), 0.5)
    clock.advance(61)
    later = await b.reserve(key(budget_period="total"), 0.5)
    assert isinstance(later, Reservation)
    assert held is not None
    a.settle(held, 0.2)  # a late settlement charges the cost but releases nothing twice
    await a.drain()
    assert isinstance(await b.reserve(key(budget_period="total"), 0.3), Reservation)  # 0.2 + 0.5 + 0.3
    with pytest.raises(BudgetExceeded):
        await b.reserve(key(budget_period="total"), 0.01)


async def test_a_changed_budget_period_restarts_an_existing_counter_from_the_stored_spend(
    replicas: tuple[FakeClock, Budgets, Budgets],
) -> None:
    clock, a, _ = replicas
    a.settle(await a.reserve(key(), 0.5), 0.9)  # the Redis counter of today holds $0.9
    await a.drain()
    with pytest.raises(BudgetExceeded):
        await a.reserve(key(), 0.2)
    # the key's period changed and the usage log puts only $0.1 in its new current period
    changed = key(spent_usd=0.1, period_start=clock.time() - 1)
    await a.restart_period(changed)
    assert isinstance(await a.reserve(changed, 0.2), Reservation)
