"""The Redis RoutingState backends (STORE-2): atomicity across two "replicas" sharing one Redis
(RESIL-1/2/3), key layout and prefixes, and degradation to local state. The behaviour every backend
shares is tested in ``test_state_operations.py`` and ``test_state_primitives.py``.

Redis comes from ``OMNIROUTE_TEST_REDIS_URL`` (see ``state_support``); Redis-backed tests skip when it
is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import uuid

import pytest
import redis.asyncio as aioredis
from state_support import (
    DEAD_REDIS_URL,
    REDIS_HOST,
    REDIS_PORT,
    REDIS_UP,
    REDIS_URL,
    T0,
    Factory,
    extend,
    fail,
    lock,
    needs_redis,
)

from omniroute.state import (
    BreakerState,
    FakeClock,
    LockKey,
    MemoryRoutingState,
    ProbeVerdict,
    QuotaSnapshot,
    RedisRoutingState,
    ResilientRoutingState,
    RoutingState,
)
from omniroute.state.redis import ENV_REDIS_PREFIX, split_prefix
from omniroute.state.redis.backend import MAX_CONNECTIONS


def test_both_backends_satisfy_the_protocol() -> None:
    """STORE-2: the Redis backends are RoutingStates (mypy checks it; this checks construction)."""
    states: list[RoutingState] = [
        RedisRoutingState(url=REDIS_URL),
        ResilientRoutingState.from_url(REDIS_URL),
    ]
    assert all(s is not None for s in states)


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
    state = ResilientRoutingState.from_url(DEAD_REDIS_URL, clock=FakeClock(T0))
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
        assert "Redis routing state unavailable" in warnings[0].getMessage()
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
        up_reader, up_writer = await asyncio.open_connection(REDIS_HOST, REDIS_PORT)
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
    """STORE-2: shared while up; local (with a warning) while down; shared again once Redis answers a
    retry, which waits ``retry_after_s`` on the injected clock — and in-flight counts taken in Redis
    before the outage are given back afterwards."""
    proxy = _Proxy()
    await proxy.start()
    clock = FakeClock(T0)
    direct = replicas()
    primary = RedisRoutingState(url=f"redis://127.0.0.1:{proxy.port}/0", prefix=direct.prefix, clock=clock)
    state = ResilientRoutingState(primary, retry_after_s=5.0)
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
            assert state.degraded  # back, but nothing is retried before the retry period
            assert clock.sleepers == 1  # the retry waits on the injected clock
            clock.advance(5.0)
            assert await state.reconnect()
        assert not state.degraded and await state.ready()
        assert caplog.text.count("reachable again") == 1
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


@needs_redis
async def test_more_concurrent_calls_than_pool_connections_stay_on_redis(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Under load a replica keeps sharing its state: calls beyond the connection pool's size wait for a
    free connection instead of failing with "Too many connections" and degrading to in-process state."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    state = ResilientRoutingState.from_url(REDIS_URL, prefix=prefix, clock=FakeClock(T0), timeout_s=5.0)
    other = RedisRoutingState(url=REDIS_URL, prefix=prefix)
    calls = 3 * MAX_CONNECTIONS
    try:
        with caplog.at_level(logging.WARNING, logger="omniroute.state"):
            counts = await asyncio.gather(*(state.incr_counter("burst") for _ in range(calls)))
        assert sorted(counts) == list(range(1, calls + 1))
        assert not state.degraded
        assert not [r for r in caplog.records if "unavailable" in r.getMessage()]
        assert await other.get_counter("burst") == calls  # the other replica sees every increment
    finally:
        await other.clear()
        await other.aclose()
        await state.aclose()


@needs_redis
async def test_a_success_sees_breaker_cooldown_and_lockout_records_another_replica_wrote(
    replicas: Factory,
) -> None:
    """A success on one replica resets what any replica recorded: with no record it resets nothing,
    and a breaker failure, a cooldown or a lockout written by another replica each make it reset."""
    clock = FakeClock(T0)
    a, b = replicas(clock), replicas(clock)
    assert await a.success_resets_nothing("p", "c1", "m1")
    await fail(b)
    assert not await a.success_resets_nothing("p", "c1", "m1")
    await b.breaker_success("p", T0, reset_timeout_s=30.0)
    assert await a.success_resets_nothing("p", "c1", "m1")
    await extend(b, 10.0, "429")
    assert not await a.success_resets_nothing("p", "c1", "m1")
    assert await a.success_resets_nothing("p", "c2", "m1")
    await lock(b, LockKey("p", "c2", "m1"))
    assert not await a.success_resets_nothing("p", "c2", "m1")
    assert await a.success_resets_nothing("p", "c2", "m2")
    await lock(b, LockKey("p", "c3", "*"))  # a lock of every model on the connection
    assert not await a.success_resets_nothing("p", "c3", "m2")
