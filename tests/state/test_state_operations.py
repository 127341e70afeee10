"""The routing-state operations (RESIL-1/2/3, STORE-1/2) — breakers, probe claims, cooldowns, locks,
resets, bulk reads, windows, in-flight counts, counters, records, quota — with the same behaviour on
every backend in ``conftest.BACKENDS``."""

from __future__ import annotations

import asyncio

import pytest
from state_support import T0, extend, fail, lock

from omniroute.state import (
    BreakerRecord,
    BreakerState,
    FakeClock,
    LockKey,
    ProbeVerdict,
    QuotaSnapshot,
    RoutingState,
    breaker_view,
)


async def test_breaker_opens_at_threshold_and_reports_change(backend: tuple[RoutingState, FakeClock]) -> None:
    """RESIL-1: the failure op counts atomically and opens at the threshold."""
    state, _ = backend
    for _ in range(2):
        change = await fail(state)
        assert change.after.state is BreakerState.CLOSED
    change = await fail(state)
    assert change.before.state is BreakerState.CLOSED
    assert change.after.state is BreakerState.OPEN
    assert change.after.opened_at == T0
    assert change.after.next_probe_at == T0 + 30
    assert (await state.all_breakers())["p"].state is BreakerState.OPEN


async def test_twenty_concurrent_probe_claims_yield_exactly_one_probe(
    backend: tuple[RoutingState, FakeClock],
) -> None:
    """RESIL-1: claiming a half-open probe slot is atomic — 20 concurrent claims, one winner."""
    state, _ = backend
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


async def test_probe_lease_expires_so_an_abandoned_probe_cannot_wedge_the_breaker(
    backend: tuple[RoutingState, FakeClock],
) -> None:
    """RESIL-1: an unreported probe slot frees itself after the lease."""
    state, _ = backend
    for _ in range(3):
        await fail(state)
    v1, _ = await state.breaker_claim_probe("p", T0 + 31, half_open_probes=1, probe_lease_s=60)
    v2, _ = await state.breaker_claim_probe("p", T0 + 40, half_open_probes=1, probe_lease_s=60)
    v3, _ = await state.breaker_claim_probe("p", T0 + 92, half_open_probes=1, probe_lease_s=60)
    assert (v1, v2, v3) == (ProbeVerdict.PROBE, ProbeVerdict.REJECT, ProbeVerdict.PROBE)


async def test_release_gives_the_slot_back(backend: tuple[RoutingState, FakeClock]) -> None:
    """RESIL-1: a released probe slot can be claimed again."""
    state, _ = backend
    for _ in range(3):
        await fail(state)
    now = T0 + 31
    claim = await state.breaker_claim_probe("p", now, half_open_probes=1, probe_lease_s=60)
    assert claim[0] is ProbeVerdict.PROBE
    await state.breaker_release_probe("p", now)
    claim = await state.breaker_claim_probe("p", now, half_open_probes=1, probe_lease_s=60)
    assert claim[0] is ProbeVerdict.PROBE


async def test_probe_success_closes_and_probe_failure_reopens_doubled(
    backend: tuple[RoutingState, FakeClock],
) -> None:
    """RESIL-1: a failed probe re-opens with the timeout doubled; a successful one closes."""
    state, _ = backend
    for _ in range(3):
        await fail(state)
    await state.breaker_claim_probe("p", T0 + 31, half_open_probes=1, probe_lease_s=60)
    reopened = await fail(state, T0 + 32)
    assert reopened.after.state is BreakerState.OPEN and reopened.after.reset_timeout_s == 60
    await state.breaker_claim_probe("p", T0 + 93, half_open_probes=1, probe_lease_s=60)
    closed = await state.breaker_success("p", T0 + 94, reset_timeout_s=30.0)
    assert closed.after == BreakerRecord(provider="p", reset_timeout_s=30.0)
    await fail(state, T0 + 95)
    await state.reset_breakers("p")
    assert (await state.get_breakers(["p"]))["p"] == BreakerRecord(provider="p")
    await fail(state, T0 + 96)
    await state.reset_breakers()
    assert await state.all_breakers() == {}


async def test_closed_breaker_admits_without_claim(backend: tuple[RoutingState, FakeClock]) -> None:
    """RESIL-1: a closed breaker needs no probe."""
    state, _ = backend
    verdict, change = await state.breaker_claim_probe("p", T0, half_open_probes=1, probe_lease_s=60)
    assert verdict is ProbeVerdict.ADMIT
    assert not change.changed
    assert breaker_view(change.after, T0) is BreakerState.CLOSED
    assert await state.get_breakers([]) == {}


async def test_cooldown_deadline_is_max_of_old_and_new(backend: tuple[RoutingState, FakeClock]) -> None:
    """RESIL-2: one atomic op keeps the later deadline."""
    state, _ = backend
    await extend(state, 10.0, "rate limited (429)")
    change = await extend(state, 1.0, "x")
    assert change.after.until == T0 + 10
    assert change.after.reason == "rate limited (429)"
    backoff = await extend(state, None, "overloaded", cid="c2")
    assert backoff.after.until == T0 + 3 and backoff.after.backoff_level == 1
    assert set(await state.get_cooldowns(["c1", "c2", "c3"])) == {"c1", "c2"}


async def test_cooldown_success_clears_deadline_but_keeps_invalid_mark(
    backend: tuple[RoutingState, FakeClock],
) -> None:
    """RESIL-2: success resets backoff; 401 marks stay until mark_valid."""
    state, _ = backend
    await extend(state, 10.0, "429")
    await state.mark_invalid("c1", T0, provider="p", reason="401 bad key")
    cleared = await state.cooldown_success("c1")
    assert cleared.after.until == 0.0 and cleared.after.invalid
    valid = await state.mark_valid("c1")
    assert not valid.after.invalid
    assert (await state.all_cooldowns())["c1"].last_error == "401 bad key"


async def test_cooldown_success_is_free_when_nothing_is_stored(
    backend: tuple[RoutingState, FakeClock],
) -> None:
    """RESIL-2: success on a healthy connection changes nothing."""
    state, _ = backend
    change = await state.cooldown_success("c1")
    assert not change.changed
    assert await state.all_cooldowns() == {}


async def test_reset_cooldowns_by_provider_and_connection(backend: tuple[RoutingState, FakeClock]) -> None:
    """RESIL-2: resets target one connection, one provider's connections, or all."""
    state, _ = backend
    await state.mark_invalid("a1", T0, provider="a", reason="401")
    await state.mark_invalid("a2", T0, provider="a", reason="401")
    await state.mark_invalid("b1", T0, provider="b", reason="401")
    await state.reset_cooldowns(connection="a1")
    assert set(await state.all_cooldowns()) == {"a2", "b1"}
    await state.reset_cooldowns(provider="a")
    assert set(await state.all_cooldowns()) == {"b1"}
    await state.reset_cooldowns()
    assert await state.all_cooldowns() == {}


async def test_lockouts_are_per_provider_connection_model(backend: tuple[RoutingState, FakeClock]) -> None:
    """RESIL-3: a lock on one model leaves other models of the connection alone."""
    state, _ = backend
    key = LockKey("p", "c1", "m1")
    await lock(state, key)
    found = await state.get_lockouts([key, LockKey("p", "c1", "m2")])
    assert list(found) == [key]
    assert found[key].until == T0 + 120
    again = await lock(state, key, T0 + 121)  # escalates: base·2^1
    assert again.after is not None and again.after.until == T0 + 121 + 240
    cleared = await state.lockout_clear(key)
    assert cleared.before is not None and cleared.after is None
    assert await state.get_lockouts([key]) == {}
    assert (await state.lockout_clear(key)).before is None


async def test_bulk_reads_return_only_stored_records(backend: tuple[RoutingState, FakeClock]) -> None:
    """One read for the ladder (RESIL-1/2/3) and one for quotas: only ids that have a record, with
    the values the single-kind reads give; duplicated ids and lazy iterables are fine."""
    state, _ = backend
    assert await state.get_ladder_records([], [], []) == ({}, {}, {})
    await fail(state)
    await state.mark_invalid("c1", T0, provider="p", reason="401 bad key")
    key = LockKey("p", "c1", "m1")
    await lock(state, key)
    breakers, cooldowns, locks = await state.get_ladder_records(
        iter(["p", "q", "p"]), iter(["c1", "c2"]), iter([key, LockKey("p", "c2", "m1")])
    )
    assert breakers == {"p": (await state.get_breakers(["p"]))["p"]} and breakers["p"].failures == 1
    assert cooldowns == await state.get_cooldowns(["c1"]) and cooldowns["c1"].invalid
    assert locks == await state.get_lockouts([key])
    snap = QuotaSnapshot(remaining_fraction=0.5, reset_at=T0 + 60, observed_at=T0)
    await state.set_quota("c1", snap)
    assert await state.get_quotas(["c1", "c2", "c1"]) == {"c1": snap}
    assert await state.get_quotas([]) == {}


async def test_reset_lockouts_by_provider_and_connection(backend: tuple[RoutingState, FakeClock]) -> None:
    """RESIL-3: resets target a provider, a connection, both, or everything."""
    state, _ = backend
    for key in (LockKey("p", "c1", "m"), LockKey("p", "c2", "m"), LockKey("q", "c1", "m")):
        await lock(state, key)
    await state.reset_lockouts(provider="p", connection="c1")
    assert {r.key for r in await state.all_lockouts()} == {LockKey("p", "c2", "m"), LockKey("q", "c1", "m")}
    await state.reset_lockouts(connection="c1")
    assert {r.key for r in await state.all_lockouts()} == {LockKey("p", "c2", "m")}
    await state.reset_lockouts()
    assert await state.all_lockouts() == []


async def test_window_keeps_last_n_samples_and_computes_stats(
    backend: tuple[RoutingState, FakeClock],
) -> None:
    """STORE-2 latency/error windows: last N samples, p95, stddev, error rate."""
    state, _ = backend
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


async def test_inflight_counts_never_go_negative(backend: tuple[RoutingState, FakeClock]) -> None:
    """AUTO-3 connectionDensity: in-flight counts per connection."""
    state, _ = backend
    assert await state.incr_inflight("c") == 1
    assert await state.incr_inflight("c") == 2
    assert await state.decr_inflight("c") == 1
    assert await state.decr_inflight("c") == 0
    assert await state.decr_inflight("c") == 0
    assert await state.get_inflight(["c", "d"]) == {"c": 0, "d": 0}


async def test_counters_records_and_json_with_ttl(backend: tuple[RoutingState, FakeClock]) -> None:
    """STORE-2: generic counters, string records and JSON records (TTL on the injected clock)."""
    state, clock = backend
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
    await state.set_record("bad-json", "{not json")
    assert await state.get_json("bad-json") is None
    await state.set_record("gone", "x", ttl_s=0)
    assert await state.get_record("gone") is None


async def test_quota_snapshot_round_trip(backend: tuple[RoutingState, FakeClock]) -> None:
    """AUTO-3 quota: the latest snapshot per connection."""
    state, _ = backend
    snap = QuotaSnapshot(remaining_fraction=0.5, reset_at=T0 + 60, observed_at=T0)
    await state.set_quota("c", snap)
    assert await state.get_quota("c") == snap
    assert await state.get_quota("other") is None
