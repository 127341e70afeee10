"""The in-process RoutingState backend (STORE-1, STORE-2 contract, RESIL-1/2/3 atomic updates)."""

from __future__ import annotations

import asyncio

import pytest

from omniroute.state import (
    BreakerRecord,
    BreakerState,
    Change,
    CooldownRecord,
    FakeClock,
    LockKey,
    MemoryRoutingState,
    ProbeVerdict,
    QuotaSnapshot,
    RoutingState,
    SystemClock,
    breaker_view,
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


async def test_breaker_opens_at_threshold_and_reports_change() -> None:
    """RESIL-1: the failure op counts atomically and opens at the threshold."""
    state, _ = make()
    for _ in range(2):
        change = await fail(state)
        assert change.after.state is BreakerState.CLOSED
    change = await fail(state)
    assert change.before.state is BreakerState.CLOSED
    assert change.after.state is BreakerState.OPEN
    assert change.after.opened_at == T0
    assert change.after.next_probe_at == T0 + 30


async def test_twenty_concurrent_probe_claims_yield_exactly_one_probe() -> None:
    """RESIL-1: claiming a half-open probe slot is atomic — 20 concurrent claims, one winner."""
    state, _ = make()
    for _ in range(3):
        await fail(state)
    later = T0 + 31
    results = await asyncio.gather(
        *(state.breaker_claim_probe("p", later, half_open_probes=1, probe_lease_s=60) for _ in range(20))
    )
    verdicts = [v for v, _ in results]
    assert verdicts.count(ProbeVerdict.PROBE) == 1
    assert verdicts.count(ProbeVerdict.REJECT) == 19
    rec = (await state.get_breakers(["p"]))["p"]
    assert rec.state is BreakerState.HALF_OPEN
    assert rec.probes_in_flight(later) == 1


async def test_probe_lease_expires_so_an_abandoned_probe_cannot_wedge_the_breaker() -> None:
    """RESIL-1: an unreported probe slot frees itself after the lease."""
    state, _ = make()
    for _ in range(3):
        await fail(state)
    v1, _ = await state.breaker_claim_probe("p", T0 + 31, half_open_probes=1, probe_lease_s=60)
    v2, _ = await state.breaker_claim_probe("p", T0 + 40, half_open_probes=1, probe_lease_s=60)
    v3, _ = await state.breaker_claim_probe("p", T0 + 92, half_open_probes=1, probe_lease_s=60)
    assert (v1, v2, v3) == (ProbeVerdict.PROBE, ProbeVerdict.REJECT, ProbeVerdict.PROBE)


async def test_release_gives_the_slot_back() -> None:
    """RESIL-1: a released probe slot can be claimed again."""
    state, _ = make()
    for _ in range(3):
        await fail(state)
    now = T0 + 31
    assert (await state.breaker_claim_probe("p", now, half_open_probes=1, probe_lease_s=60))[
        0
    ] is ProbeVerdict.PROBE
    await state.breaker_release_probe("p", now)
    assert (await state.breaker_claim_probe("p", now, half_open_probes=1, probe_lease_s=60))[
        0
    ] is ProbeVerdict.PROBE


async def test_closed_breaker_admits_without_claim() -> None:
    """RESIL-1: a closed breaker needs no probe."""
    state, _ = make()
    verdict, change = await state.breaker_claim_probe("p", T0, half_open_probes=1, probe_lease_s=60)
    assert verdict is ProbeVerdict.ADMIT
    assert not change.changed
    assert breaker_view(change.after, T0) is BreakerState.CLOSED


async def test_cooldown_deadline_is_max_of_old_and_new() -> None:
    """RESIL-2: one atomic op keeps the later deadline."""
    state, _ = make()

    async def extend(hint_s: float, reason: str) -> Change[CooldownRecord]:
        return await state.cooldown_extend(
            "c1",
            T0,
            provider="p",
            hint_s=hint_s,
            base_s=3,
            max_s=300,
            max_hint_s=1800,
            reason=reason,
            last_error="",
        )

    await extend(10.0, "rate limited (429)")
    change = await extend(1.0, "x")
    assert change.after.until == T0 + 10
    assert change.after.reason == "rate limited (429)"


async def test_cooldown_success_is_free_when_nothing_is_stored() -> None:
    """RESIL-2: success on a healthy connection changes nothing."""
    state, _ = make()
    change = await state.cooldown_success("c1")
    assert not change.changed
    assert await state.all_cooldowns() == {}


async def test_reset_cooldowns_by_provider_and_connection() -> None:
    """RESIL-2: resets target one connection, one provider's connections, or all."""
    state, _ = make()
    await state.mark_invalid("a1", T0, provider="a", reason="401")
    await state.mark_invalid("a2", T0, provider="a", reason="401")
    await state.mark_invalid("b1", T0, provider="b", reason="401")
    await state.reset_cooldowns(connection="a1")
    assert set(await state.all_cooldowns()) == {"a2", "b1"}
    await state.reset_cooldowns(provider="a")
    assert set(await state.all_cooldowns()) == {"b1"}
    await state.reset_cooldowns()
    assert await state.all_cooldowns() == {}


async def test_lockouts_are_per_provider_connection_model() -> None:
    """RESIL-3: a lock on one model leaves other models of the connection alone."""
    state, _ = make()
    key = LockKey("p", "c1", "m1")
    await state.lockout_extend(
        key, T0, base_s=120.0, max_s=1800.0, until=None, hint_s=None, max_hint_s=86400.0, reason="q"
    )
    found = await state.get_lockouts([key, LockKey("p", "c1", "m2")])
    assert list(found) == [key]
    assert found[key].until == T0 + 120
    cleared = await state.lockout_clear(key)
    assert cleared.before is not None and cleared.after is None
    assert await state.get_lockouts([key]) == {}


async def test_window_keeps_last_n_samples_and_computes_stats() -> None:
    """STORE-2 latency/error windows: last N samples, p95, stddev, error rate."""
    state = MemoryRoutingState(FakeClock(T0), window_size=100)
    for i in range(150):
        await state.record_sample("k", T0 + i, latency_ms=float(i), ok=True, ttft_ms=float(i) / 2)
    for _ in range(25):
        await state.record_sample("k", T0 + 200, latency_ms=0.0, ok=False)
    stats = (await state.get_window_stats(["k", "unknown"]))["k"]
    assert stats.count == 100
    assert stats.error_rate == pytest.approx(0.25)
    # the 75 successes left are latencies 75..149
    assert stats.p95_ms == 146.0
    assert stats.mean_ms == pytest.approx(112.0)
    assert stats.stddev_ms == pytest.approx(21.65, abs=0.01)
    assert stats.p95_ttft_ms == 73.0
    assert stats.last_at == T0 + 200
    empty = (await state.get_window_stats(["unknown"]))["unknown"]
    assert empty.count == 0 and empty.p95_ms is None


async def test_inflight_counts_never_go_negative() -> None:
    """AUTO-3 connectionDensity: in-flight counts per connection."""
    state, _ = make()
    assert await state.incr_inflight("c") == 1
    assert await state.incr_inflight("c") == 2
    assert await state.decr_inflight("c") == 1
    assert await state.decr_inflight("c") == 0
    assert await state.decr_inflight("c") == 0
    assert await state.get_inflight(["c", "d"]) == {"c": 0, "d": 0}


async def test_counters_records_and_json_with_ttl() -> None:
    """STORE-2: generic counters, string records and JSON records (TTL on the backend clock)."""
    state, clock = make()
    assert await state.incr_counter("rr:combo") == 1
    assert await state.incr_counter("rr:combo", 5) == 6
    assert await state.get_counter("rr:combo") == 6
    assert await state.get_counter("missing") == 0
    await state.set_record("lkgp:s1", "openai", ttl_s=10)
    await state.set_json("deck:c", {"order": [2, 0, 1]})
    assert await state.get_record("lkgp:s1") == "openai"
    deck = await state.get_json("deck:c")
    assert deck == {"order": [2, 0, 1]}
    deck["order"].append(9)
    assert await state.get_json("deck:c") == {"order": [2, 0, 1]}  # a fresh copy each time
    clock.advance(10)
    assert await state.get_record("lkgp:s1") is None
    await state.delete_record("deck:c")
    assert await state.get_json("deck:c") is None


async def test_quota_snapshot_round_trip() -> None:
    """AUTO-3 quota: the latest snapshot per connection."""
    state, _ = make()
    snap = QuotaSnapshot(remaining_fraction=0.5, reset_at=T0 + 60, observed_at=T0)
    await state.set_quota("c", snap)
    assert await state.get_quota("c") == snap
    assert await state.get_quota("other") is None
    assert QuotaSnapshot.from_dict(snap.to_dict()) == snap


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
