"""The in-process RoutingState backend (STORE-1, STORE-2 contract, RESIL-1/2/3 atomic updates)."""

from __future__ import annotations

import pytest

from omniroute.state import (
    BreakerRecord,
    Change,
    FakeClock,
    LockKey,
    MemoryRoutingState,
    RoutingState,
    SystemClock,
)

T0 = 1_700_000_000.0


async def fail(state: MemoryRoutingState, now: float = T0) -> Change[BreakerRecord]:
    """One counted failure with threshold 3, reset 30 s, cap ×16."""
    return await state.breaker_failure(
        "p", now, failure_threshold=3, reset_timeout_s=30.0, max_multiplier=16.0, reason="500 boom"
    )


def make() -> tuple[MemoryRoutingState, FakeClock]:
    clock = FakeClock(T0)
    return MemoryRoutingState(clock), clock


def test_memory_state_satisfies_the_protocol() -> None:
    """STORE-1: the memory backend is a RoutingState."""
    state: RoutingState = MemoryRoutingState()
    assert state is not None


def test_fake_clock_moves_only_when_told() -> None:
    """Tests use a fake clock: wall and monotonic advance together, never backwards."""
    clock = FakeClock(100.0)
    assert clock.time() == 100.0
    assert clock.advance(2.5) == 102.5
    assert clock.monotonic() == 2.5
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert SystemClock().time() > T0


async def test_success_is_noop_only_while_no_tier_holds_a_record() -> None:
    """RESIL-1/2/3: the success fast check answers True exactly when the three success updates would
    change nothing: a failure count, a cooldown or a lock of that model makes it False."""
    state, _ = make()
    assert state.success_is_noop("p", "c1", "m1")
    await fail(state)
    assert not state.success_is_noop("p", "c1", "m1")
    assert (await state.breaker_success("p", T0, reset_timeout_s=30.0)).changed
    assert state.success_is_noop("p", "c1", "m1")  # a stored CLOSED record with no failures
    await state.cooldown_extend(
        "c1",
        T0,
        provider="p",
        hint_s=5.0,
        base_s=3.0,
        max_s=300.0,
        max_hint_s=1800.0,
        reason="rate limited (429)",
        last_error="slow down",
    )
    assert not state.success_is_noop("p", "c1", "m1")
    assert state.success_is_noop("p", "c2", "m1")
    assert (await state.cooldown_success("c1")).changed
    assert state.success_is_noop("p", "c1", "m1")  # the record keeps only its last error
    key = LockKey("p", "c1", "m1")
    await state.lockout_extend(
        key, T0, base_s=120.0, max_s=1800.0, until=None, hint_s=None, max_hint_s=86400.0, reason="q"
    )
    assert not state.success_is_noop("p", "c1", "m1")
    assert state.success_is_noop("p", "c1", "m2")
    await state.lockout_clear(key)
    assert state.success_is_noop("p", "c1", "m1")
