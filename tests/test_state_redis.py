"""The Redis RoutingState backends (STORE-2): the memory backend's behaviour, over both backends, plus
atomicity across two "replicas" sharing one Redis (RESIL-1/2/3) and degradation to local state.

Redis comes from ``OMNIROUTE_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); every test uses
a fresh random key prefix and deletes its keys afterwards. Redis-backed tests skip when it is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis

from omniroute.state import (
    BreakerRecord,
    BreakerState,
    Change,
    CooldownRecord,
    FakeClock,
    LockKey,
    LockoutRecord,
    MemoryRoutingState,
    ProbeVerdict,
    QuotaSnapshot,
    RedisRoutingState,
    ResilientRoutingState,
    RoutingState,
    breaker_view,
)
from omniroute.state.redis import ENV_REDIS_PREFIX, split_prefix

T0 = 1_700_000_000.0
REDIS_URL = os.environ.get("OMNIROUTE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
_HOST = urllib.parse.urlsplit(REDIS_URL).hostname or "127.0.0.1"
_PORT = urllib.parse.urlsplit(REDIS_URL).port or 6379


def _redis_up() -> bool:
    try:
        with socket.create_connection((_HOST, _PORT), timeout=0.5):
            return True
    except OSError:
        return False


REDIS_UP = _redis_up()
needs_redis = pytest.mark.skipif(not REDIS_UP, reason=f"no Redis at {REDIS_URL}")

Factory = Callable[..., RedisRoutingState]


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


@pytest.fixture(params=["memory", "redis"])
async def backend(request: pytest.FixtureRequest, replicas: Factory) -> tuple[RoutingState, FakeClock]:
    """The same behaviour, two backends (the memory tests, run over Redis too)."""
    clock = FakeClock(T0)
    if request.param == "memory":
        return MemoryRoutingState(clock), clock
    if not REDIS_UP:
        pytest.skip(f"no Redis at {REDIS_URL}")
    return replicas(clock), clock


async def fail(state: RoutingState, now: float = T0, threshold: int = 3) -> Change[BreakerRecord]:
    """One counted failure with threshold 3, reset 30 s, cap ×16."""
    return await state.breaker_failure(
        "p", now, failure_threshold=threshold, reset_timeout_s=30.0, max_multiplier=16.0, reason="500 boom"
    )


async def extend(
    state: RoutingState, hint_s: float | None, reason: str, cid: str = "c1"
) -> Change[CooldownRecord]:
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
    return await state.lockout_extend(
        key, now, base_s=120.0, max_s=1800.0, until=None, hint_s=None, max_hint_s=86400.0, reason="q"
    )


# -- the memory backend's behaviour, over both backends -----------------------------------------


def test_both_backends_satisfy_the_protocol() -> None:
    """STORE-2: the Redis backends are RoutingStates (mypy checks it; this checks construction)."""
    states: list[RoutingState] = [
        RedisRoutingState(url=REDIS_URL),
        ResilientRoutingState.from_url(REDIS_URL),
    ]
    assert all(s is not None for s in states)


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


# -- two replicas sharing one Redis --------------------------------------------------------------


@needs_redis
async def test_probe_claims_are_atomic_across_two_replicas(replicas: Factory) -> None:
    """RESIL-1 + STORE-2: 20 concurrent claims split over two replicas → exactly one probe."""
    a, b = replicas(FakeClock(T0)), replicas(FakeClock(T0))
    for _ in range(3):
        await fail(a)
    assert (await b.get_breakers(["p"]))["p"].state is BreakerState.OPEN
    later = T0 + 31
    results = await asyncio.gather(
        *(
            (a if i % 2 else b).breaker_claim_probe("p", later, half_open_probes=1, probe_lease_s=60)
            for i in range(20)
        )
    )
    verdicts = [v for v, _ in results]
    assert verdicts.count(ProbeVerdict.PROBE) == 1 and verdicts.count(ProbeVerdict.REJECT) == 19
    assert (await a.get_breakers(["p"]))["p"].probes_in_flight(later) == 1


@needs_redis
async def test_concurrent_failures_from_two_replicas_are_all_counted(replicas: Factory) -> None:
    """RESIL-1 + STORE-2: no lost update — 40 concurrent failures from two replicas count 40."""
    a, b = replicas(), replicas()
    await asyncio.gather(*(fail(a if i % 2 else b, threshold=1000) for i in range(40)))
    rec = (await a.get_breakers(["p"]))["p"]
    assert rec.failures == 40 and rec.state is BreakerState.CLOSED


@needs_redis
async def test_cooldown_deadlines_only_move_later_under_concurrent_extends(replicas: Factory) -> None:
    """RESIL-2 + STORE-2: concurrent extends from two replicas keep the latest deadline, and no
    single update ever moves a deadline earlier."""
    a, b = replicas(), replicas()
    hints = [float(h) for h in range(1, 41)]
    random.Random(7).shuffle(hints)
    changes = await asyncio.gather(
        *(extend(a if i % 2 else b, h, f"hint {h:g}") for i, h in enumerate(hints))
    )
    assert all(c.after.until >= c.before.until for c in changes)
    rec = (await b.get_cooldowns(["c1"]))["c1"]
    assert rec.until == T0 + 40 and rec.reason == "hint 40"


@needs_redis
async def test_round_robin_tickets_are_unique_across_replicas(replicas: Factory) -> None:
    """COMBO-3 round-robin over STORE-2: 50 concurrent increments from two replicas → tickets 1..50."""
    a, b = replicas(), replicas()
    tickets = await asyncio.gather(*((a if i % 2 else b).incr_counter("rr") for i in range(50)))
    assert sorted(tickets) == list(range(1, 51))


@needs_redis
async def test_every_record_kind_is_shared(replicas: Factory) -> None:
    """STORE-2: what one replica writes, the other reads — cooldowns, locks, windows, quota, records."""
    clock = FakeClock(T0)
    a, b = replicas(clock), replicas(clock)
    await extend(a, 30.0, "429")
    await lock(a, LockKey("p", "c1", "m"))
    await a.record_sample("k", T0, latency_ms=12.0, ok=True)
    await a.set_quota("c1", QuotaSnapshot(remaining_fraction=0.1, reset_at=None, observed_at=T0))
    await a.set_json("lkgp:s", {"provider": "p"}, ttl_s=60)
    assert (await b.all_cooldowns())["c1"].until == T0 + 30
    assert [r.key for r in await b.all_lockouts()] == [LockKey("p", "c1", "m")]
    assert (await b.get_window_stats(["k"]))["k"].mean_ms == 12.0
    quota = await b.get_quota("c1")
    assert quota is not None and quota.remaining_fraction == 0.1
    assert await b.get_json("lkgp:s") == {"provider": "p"}


@needs_redis
async def test_window_stats_match_the_memory_backend(replicas: Factory) -> None:
    """STORE-2: the Redis window computes exactly the memory backend's statistics."""
    mem, red = MemoryRoutingState(FakeClock(T0), window_size=20), replicas(window_size=20)
    rng = random.Random(3)
    for i in range(57):
        ok = rng.random() > 0.2
        ttft = rng.uniform(1, 50) if rng.random() > 0.3 else None
        lat = rng.uniform(10, 900)
        for s in (mem, red):
            await s.record_sample("k", T0 + i, latency_ms=lat, ok=ok, ttft_ms=ttft)
    assert await red.get_window_stats(["k"]) == await mem.get_window_stats(["k"])


@needs_redis
async def test_inflight_is_summed_over_replicas_and_a_dead_replica_stops_counting(
    replicas: Factory,
) -> None:
    """PROV-3/AUTO-3 over STORE-2: counts add up over replicas; a decrement never takes another
    replica's count below its own zero; a replica whose hash expired (it died) no longer counts."""
    a, b = replicas(), replicas()
    assert await a.incr_inflight("c") == 1
    assert await b.incr_inflight("c") == 2
    assert await b.get_inflight(["c", "d"]) == {"c": 2, "d": 0}
    assert await b.decr_inflight("c") == 1
    assert await b.decr_inflight("c") == 1  # b is at 0; a's attempt still counts
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        await client.delete(a.key("inflight", a.replica_id))  # what the TTL does to a dead replica
        ttl = await client.pttl(b.key("inflight", b.replica_id))
    finally:
        await client.aclose()
    assert ttl == -2  # b's hash is gone once empty
    assert await b.get_inflight(["c"]) == {"c": 0}


@needs_redis
async def test_records_get_a_redis_ttl_as_garbage_collection(replicas: Factory) -> None:
    """STORE-2: records with ttl_s also expire inside Redis, so TTL'd keys never pile up."""
    state = replicas()
    await state.set_record("sticky", "x", ttl_s=30)
    await state.set_record("forever", "y")
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        assert 0 < await client.pttl(state.key("record", "sticky")) <= 30_000
        assert await client.pttl(state.key("record", "forever")) == -1
    finally:
        await client.aclose()


@needs_redis
async def test_prefixes_isolate_deployments_and_clear_removes_only_their_keys(replicas: Factory) -> None:
    """STORE-2: keys are ``omniroute:{prefix}:…``; another prefix sees nothing; clear() is scoped."""
    a = replicas()
    other = RedisRoutingState(url=f"{REDIS_URL}?prefix=other-{uuid.uuid4().hex[:8]}")
    try:
        assert a.namespace == f"omniroute:{{{a.prefix}}}:"
        await a.incr_counter("x")
        await other.incr_counter("x")
        assert await other.get_counter("x") == 1
        assert await other.clear() == 1
        assert await a.get_counter("x") == 1
    finally:
        await other.clear()
        await other.aclose()


def test_prefix_comes_from_argument_url_env_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """STORE-2: prefix precedence argument > ``?prefix=`` > OMNIROUTE_REDIS_PREFIX > ``default``;
    the parameter is removed from the URL redis-py sees."""
    assert split_prefix("redis://h:6379/0?prefix=blue&db=2") == ("redis://h:6379/0?db=2", "blue")
    assert split_prefix("redis://h:6379/0") == ("redis://h:6379/0", None)
    monkeypatch.delenv(ENV_REDIS_PREFIX, raising=False)
    assert RedisRoutingState(url="redis://h/0").prefix == "default"
    monkeypatch.setenv(ENV_REDIS_PREFIX, "env")
    assert RedisRoutingState(url="redis://h/0").prefix == "env"
    assert RedisRoutingState(url="redis://h/0?prefix=url").prefix == "url"
    assert RedisRoutingState(url="redis://h/0?prefix=url", prefix="arg").prefix == "arg"
    with pytest.raises(ValueError):
        RedisRoutingState(url="redis://h/0", prefix="a{b}")
    with pytest.raises(ValueError):
        RedisRoutingState()


# -- degradation -------------------------------------------------------------------------------


async def test_unreachable_redis_degrades_to_local_state_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """STORE-2: Redis down → every call succeeds from in-process state, one warning, not ready."""
    state = ResilientRoutingState.from_url("redis://127.0.0.1:1/0", clock=FakeClock(T0))
    try:
        with caplog.at_level(logging.WARNING, logger="omniroute.state"):
            for _ in range(3):
                await fail(state)
            assert (await state.get_breakers(["p"]))["p"].state is BreakerState.OPEN
            await extend(state, 5.0, "429")
            assert (await state.all_cooldowns())["c1"].until == T0 + 5
            assert await state.incr_inflight("c") == 1
            assert await state.decr_inflight("c") == 0
            assert await state.incr_counter("rr") == 1
            await state.set_json("j", [1])
            assert await state.get_json("j") == [1]
            assert state.degraded
            assert await state.ready() is False
            assert not state.success_is_noop("p", "c1", "m")  # the local breaker counts failures
            assert state.success_is_noop("q", "c9", "m")
        warnings = [r for r in caplog.records if "unavailable" in r.getMessage()]
        assert len(warnings) == 1
        assert "STORE-2" in warnings[0].getMessage()
    finally:
        await state.aclose()


class _Proxy:
    """A TCP proxy in front of Redis that a test can take down and bring back (same port)."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for w in self._writers:
            w.close()
        self._writers.clear()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(_HOST, _PORT)
        self._writers += [writer, up_writer]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))


@needs_redis
async def test_degrades_when_redis_drops_and_resumes_when_it_is_back(
    replicas: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    """STORE-2: shared while up; local (with a warning) while down; shared again after the retry
    backoff — and in-flight counts taken in Redis before the outage are given back afterwards."""
    proxy = _Proxy()
    await proxy.start()
    direct = replicas()
    primary = RedisRoutingState(url=f"redis://127.0.0.1:{proxy.port}/0", prefix=direct.prefix)
    state = ResilientRoutingState(primary, retry_after_s=0.05)
    try:
        await extend(state, 30.0, "before")
        assert await state.incr_inflight("c") == 1
        assert (await direct.get_cooldowns(["c1"]))["c1"].reason == "before"
        await proxy.stop()
        with caplog.at_level(logging.WARNING, logger="omniroute.state"):
            await extend(state, 60.0, "during", cid="c2")  # served locally
            assert state.degraded and await state.ready() is False
            assert "c2" in await state.all_cooldowns()
            assert await state.decr_inflight("c") == 0  # owed to Redis
            assert await direct.get_cooldowns(["c2"]) == {}
            await proxy.start()
            for _ in range(100):
                if not state.degraded:
                    break
                await asyncio.sleep(0.02)
        assert not state.degraded and await state.ready()
        assert "reachable again" in caplog.text
        await extend(state, 90.0, "after", cid="c3")
        assert set(await direct.get_cooldowns(["c1", "c2", "c3"])) == {"c1", "c3"}
        assert await direct.get_inflight(["c"]) == {"c": 0}  # the owed decrement was replayed
    finally:
        await state.aclose()
        with contextlib.suppress(AssertionError, RuntimeError):
            await proxy.stop()


async def test_other_redis_errors_serve_that_call_locally(replicas: Factory) -> None:
    """STORE-2 "never fail requests": a non-connection Redis error (here a wrong-type key) is
    answered from local state for that call without degrading."""
    if not REDIS_UP:
        pytest.skip(f"no Redis at {REDIS_URL}")
    primary = replicas()
    state = ResilientRoutingState(primary)
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        await client.rpush(primary.key("counter", "broken"), "x")
        assert await state.incr_counter("broken") == 1
        assert not state.degraded
    finally:
        await client.aclose()
        await state.aclose()


@needs_redis
async def test_redis_success_is_noop_always_defers_to_the_atomic_updates(replicas: Factory) -> None:
    """RESIL-1/2/3 across replicas: only a read of Redis can tell whether a success resets anything,
    so the synchronous fast check never answers True for the shared backend."""
    state = replicas(FakeClock(T0))
    assert not state.success_is_noop("p", "c1", "m")
    resilient = ResilientRoutingState(replicas(FakeClock(T0)))
    try:
        assert not resilient.success_is_noop("p", "c1", "m")
    finally:
        await resilient.aclose()
