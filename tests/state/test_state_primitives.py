"""The backend contract (STORE-1/2): every primitive of ``StatePrimitives`` behaves the same on every
backend in ``conftest.BACKENDS``, so the domain operations written once on top of them do too."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from state_support import T0

from omniroute.state import (
    BreakerRecord,
    BreakerState,
    CooldownRecord,
    FakeClock,
    LockKey,
    LockoutRecord,
    QuotaSnapshot,
    RoutingState,
)
from omniroute.state.primitives import BREAKER, COOLDOWN, KINDS, LOCKOUT, QUOTA
from omniroute.state.windows import DEFAULT_WINDOW_SIZE, EMPTY_STATS, compute_stats

Backend = tuple[RoutingState, FakeClock]

P = BreakerRecord(provider="p", failures=2, last_error="500")
C = CooldownRecord(connection_id="c1", provider="p", until=T0 + 30, backoff_level=1, reason="429")
KEY = LockKey("p", "c1", "m")
L = LockoutRecord(*KEY, until=T0 + 120, level=1, reason="q")
Q = QuotaSnapshot(remaining_fraction=0.25, reset_at=T0 + 60, observed_at=T0)


async def test_read_returns_only_stored_records_of_each_kind_in_one_call(backend: Backend) -> None:
    """A read names several kinds and gets, per kind in order, only the keys that hold a record;
    duplicated keys, lazy iterables and empty queries are fine."""
    state, _ = backend
    assert await state.read() == ()
    assert await state.read((BREAKER, []), (COOLDOWN, iter([]))) == ({}, {})
    await state.put(BREAKER, "p", P)
    await state.put(COOLDOWN, "c1", C)
    await state.put(LOCKOUT, KEY, L)
    await state.put(QUOTA, "c1", Q)
    found = await state.read(
        (BREAKER, iter(["p", "q", "p"])),
        (COOLDOWN, ["c2", "c1"]),
        (LOCKOUT, (k for k in [KEY, LockKey("p", "c2", "m")])),
        (QUOTA, ["c1"]),
    )
    assert found == ({"p": P}, {"c1": C}, {KEY: L}, {"c1": Q})


async def test_put_replaces_and_scan_lists_every_record_of_one_kind(backend: Backend) -> None:
    """``put`` is a blind write that replaces; ``scan`` returns every record of a kind by key (lock
    keys come back as ``LockKey``) and nothing of other kinds."""
    state, _ = backend
    other = LockKey("q", "c2", "m2")
    await state.put(LOCKOUT, KEY, L)
    await state.put(LOCKOUT, other, replace(L, provider="q", connection="c2", model="m2"))
    await state.put(LOCKOUT, KEY, replace(L, level=3))
    await state.put(BREAKER, "p", P)
    locks = await state.scan(LOCKOUT)
    assert set(locks) == {KEY, other} and all(isinstance(k, LockKey) for k in locks)
    assert locks[KEY].level == 3
    assert await state.scan(BREAKER) == {"p": P}
    assert await state.scan(QUOTA) == {}


async def test_update_creates_changes_and_deletes_and_returns_the_rule_result(backend: Backend) -> None:
    """``update`` hands the rule the stored record (``None`` when absent), stores its second result
    (``None`` deletes) and returns its first."""
    state, _ = backend
    seen: list[BreakerRecord | None] = []

    def bump(rec: BreakerRecord | None) -> tuple[int, BreakerRecord]:
        seen.append(rec)
        base = rec or BreakerRecord(provider="p")
        return base.failures + 1, replace(base, failures=base.failures + 1)

    assert await state.update(BREAKER, "p", bump) == 1
    assert await state.update(BREAKER, "p", bump) == 2
    assert seen[0] is None and seen[-1] == BreakerRecord(provider="p", failures=1)
    assert (await state.read((BREAKER, ["p"])))[0]["p"].failures == 2
    gone = await state.update(BREAKER, "p", lambda rec: (rec, None))
    assert gone is not None and gone.failures == 2
    assert await state.scan(BREAKER) == {}
    assert await state.update(BREAKER, "p", lambda rec: (rec, rec)) is None  # absent stays absent
    assert await state.scan(BREAKER) == {}


async def test_concurrent_updates_of_one_key_are_never_lost(backend: Backend) -> None:
    """Atomic read-modify-write: 30 concurrent updates of one record all count, and each saw a
    different predecessor (they took effect one after the other)."""
    state, _ = backend

    def bump(rec: CooldownRecord | None) -> tuple[int, CooldownRecord]:
        base = rec or CooldownRecord(connection_id="c1")
        return base.backoff_level, replace(base, backoff_level=base.backoff_level + 1)

    seen = await asyncio.gather(*(state.update(COOLDOWN, "c1", bump) for _ in range(30)))
    assert sorted(seen) == list(range(30))
    assert (await state.scan(COOLDOWN))["c1"].backoff_level == 30


async def test_remove_deletes_the_records_whose_fields_match(backend: Backend) -> None:
    """``remove`` matches on record fields (all must equal); an empty match removes the whole kind and
    other kinds are untouched."""
    state, _ = backend
    for p, c, m in (("p", "c1", "m"), ("p", "c2", "m"), ("q", "c1", "m")):
        await state.put(LOCKOUT, LockKey(p, c, m), LockoutRecord(p, c, m, until=T0 + 60))
    await state.put(BREAKER, "p", P)
    await state.remove(LOCKOUT, {"provider": "p", "connection": "c1"})
    assert set(await state.scan(LOCKOUT)) == {LockKey("p", "c2", "m"), LockKey("q", "c1", "m")}
    await state.remove(LOCKOUT, {"connection": "c1"})
    assert set(await state.scan(LOCKOUT)) == {LockKey("p", "c2", "m")}
    await state.remove(LOCKOUT, {})
    assert await state.scan(LOCKOUT) == {}
    assert await state.scan(BREAKER) == {"p": P}


async def test_local_records_are_absent_or_exactly_the_stored_ones(backend: Backend) -> None:
    """``local`` is ``None`` for a backend whose records live elsewhere; otherwise one live mapping per
    kind that always equals what the coroutines read."""
    state, _ = backend
    await state.put(BREAKER, "p", P)
    await state.update(COOLDOWN, "c1", lambda rec: (None, C))
    await state.put(LOCKOUT, KEY, L)
    await state.put(QUOTA, "c1", Q)
    await state.remove(BREAKER, {"provider": "p"})
    if state.local is None:
        return
    assert len(state.local) == len(KINDS)
    for kind, records in zip(KINDS, state.local, strict=True):
        assert dict(records) == await state.scan(kind)


async def test_counters_add_atomically_from_zero(backend: Backend) -> None:
    """Counters start at 0, take negative amounts, and concurrent increments are all counted."""
    state, _ = backend
    assert await state.get_counter("n") == 0
    await asyncio.gather(*(state.incr_counter("n") for _ in range(20)))
    assert await state.incr_counter("n", -5) == 15
    assert await state.get_counter("n") == 15


async def test_byte_records_expire_on_the_injected_clock(backend: Backend) -> None:
    """Byte records keep any bytes; a TTL runs on the backend's clock (here a fake one), a rewrite
    replaces value and TTL, a TTL of 0 stores nothing, delete is idempotent."""
    state, clock = backend
    await state.set_bytes("b", b"\x00\xff", ttl_s=10)
    await state.set_bytes("kept", b"x", ttl_s=10)
    await state.set_bytes("kept", b"y")  # no TTL any more
    clock.advance(9.9)
    assert await state.get_bytes("b") == b"\x00\xff"
    clock.advance(0.1)
    assert await state.get_bytes("b") is None
    assert await state.get_bytes("kept") == b"y"
    await state.set_bytes("now", b"z", ttl_s=0)
    assert await state.get_bytes("now") is None
    await state.delete_record("kept")
    await state.delete_record("kept")
    assert await state.get_bytes("kept") is None


async def test_windows_keep_the_last_n_samples(backend: Backend) -> None:
    """A window holds the last ``DEFAULT_WINDOW_SIZE`` samples and reports ``compute_stats`` of them;
    a key without samples reports the empty statistics."""
    state, _ = backend
    samples = [(float(i % 37), i % 5 != 0, float(i % 7) if i % 3 else None) for i in range(130)]
    for i, (lat, ok, ttft) in enumerate(samples):
        await state.record_sample("k", T0 + i, latency_ms=lat, ok=ok, ttft_ms=ttft)
    stats = await state.get_window_stats(["k", "none", "k"])
    assert stats == {"k": compute_stats(samples[-DEFAULT_WINDOW_SIZE:], T0 + 129), "none": EMPTY_STATS}


async def test_domain_operations_store_what_the_primitives_read(backend: Backend) -> None:
    """The domain layer keeps no state of its own: what a breaker failure, a cooldown and a lock write
    is what the primitives read back, and defaults (CLOSED, usable) are never stored."""
    state, _ = backend
    await state.breaker_success("p", T0, reset_timeout_s=30.0)
    await state.cooldown_success("c1")
    await state.lockout_clear(KEY)
    assert await state.read((BREAKER, ["p"]), (COOLDOWN, ["c1"]), (LOCKOUT, [KEY])) == ({}, {}, {})
    failed = await state.breaker_failure(
        "p", T0, failure_threshold=1, reset_timeout_s=30.0, max_multiplier=16.0, reason="500"
    )
    assert failed.after.state is BreakerState.OPEN
    assert (await state.read((BREAKER, ["p"])))[0] == {"p": failed.after}
