"""In-process :class:`~omniroute.state.base.RoutingState` (STORE-1 default backend).

Plain dicts. Every method runs to completion without awaiting, so on one event loop each call is
atomic — the property the protocol demands. The transition rules come from
:mod:`omniroute.state.transitions`, shared with any other backend.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from omniroute.clock import Clock, SystemClock
from omniroute.state import transitions as t
from omniroute.state.records import (
    BreakerRecord,
    BreakerState,
    Change,
    CooldownRecord,
    LockKey,
    LockoutRecord,
    ProbeVerdict,
    QuotaSnapshot,
    WindowStats,
)

__all__ = ["DEFAULT_WINDOW_SIZE", "MemoryRoutingState"]

DEFAULT_WINDOW_SIZE = 100
"""Samples kept per candidate latency/error window (STORE-2 "latency/error windows")."""

_CLOSED = BreakerState.CLOSED
_EMPTY_STATS = WindowStats()  # frozen: one shared instance for every key without samples
_SWEEP_EVERY = 1024  # expired generic records are purged every N writes so TTL'd keys never pile up


class _Window:
    """Last N samples of one candidate with lazily cached statistics."""

    __slots__ = ("_stats", "last_at", "samples")

    def __init__(self, size: int) -> None:
        self.samples: deque[tuple[float, bool, float | None]] = deque(maxlen=size)
        self.last_at: float | None = None
        self._stats: WindowStats | None = None

    def add(self, now: float, latency_ms: float, ok: bool, ttft_ms: float | None) -> None:
        self.samples.append((latency_ms, ok, ttft_ms))
        self.last_at = now
        self._stats = None

    def stats(self) -> WindowStats:
        if self._stats is None:
            self._stats = _compute_stats(self.samples, self.last_at)
        return self._stats


def _p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _compute_stats(samples: Iterable[tuple[float, bool, float | None]], last_at: float | None) -> WindowStats:
    items = list(samples)
    if not items:
        return WindowStats()
    lat = [s[0] for s in items if s[1]]
    ttft = [s[2] for s in items if s[1] and s[2] is not None]
    failures = sum(1 for s in items if not s[1])
    mean = stddev = p95 = None
    if lat:
        mean = sum(lat) / len(lat)
        stddev = math.sqrt(sum((x - mean) ** 2 for x in lat) / len(lat))
        p95 = _p95(lat)
    return WindowStats(
        count=len(items),
        error_rate=failures / len(items),
        mean_ms=mean,
        p95_ms=p95,
        stddev_ms=stddev,
        p95_ttft_ms=_p95([x for x in ttft if x is not None]) if ttft else None,
        last_at=last_at,
    )


class MemoryRoutingState:
    """Routing state held in this process's memory.

    ``clock`` measures TTLs of generic records (default :class:`SystemClock`); ``window_size`` is the
    number of samples per latency/error window (default 100).
    """

    def __init__(self, clock: Clock | None = None, *, window_size: int = DEFAULT_WINDOW_SIZE) -> None:
        self._clock: Clock = clock or SystemClock()
        self._window_size = window_size
        self._breakers: dict[str, BreakerRecord] = {}
        self._closed: dict[str, BreakerRecord] = {}
        self._cooldowns: dict[str, CooldownRecord] = {}
        self._lockouts: dict[LockKey, LockoutRecord] = {}
        self._windows: dict[str, _Window] = {}
        self._quotas: dict[str, QuotaSnapshot] = {}
        self._inflight: dict[str, int] = {}
        self._counters: dict[str, int] = {}
        self._kv: dict[str, tuple[str | bytes, float | None]] = {}
        self._writes = 0

    # -- breaker -----------------------------------------------------------------------------
    def _breaker(self, provider: str) -> BreakerRecord:
        rec = self._breakers.get(provider)
        if rec is None:
            rec = self._closed.get(provider)
            if rec is None:  # one immutable default per provider, not one per read
                rec = self._closed[provider] = BreakerRecord(provider=provider)
        return rec

    def _put_breaker(self, before: BreakerRecord, after: BreakerRecord) -> Change[BreakerRecord]:
        if after is not before:
            self._breakers[after.provider] = after
        return Change(before, after)

    async def get_breakers(self, providers: Iterable[str]) -> dict[str, BreakerRecord]:
        return {p: self._breaker(p) for p in providers}

    async def all_breakers(self) -> dict[str, BreakerRecord]:
        return dict(self._breakers)

    async def breaker_failure(
        self,
        provider: str,
        now: float,
        *,
        failure_threshold: int,
        reset_timeout_s: float,
        max_multiplier: float,
        reason: str,
    ) -> Change[BreakerRecord]:
        before = self._breaker(provider)
        after = t.breaker_on_failure(
            before,
            now,
            failure_threshold=failure_threshold,
            reset_timeout_s=reset_timeout_s,
            max_multiplier=max_multiplier,
            reason=reason,
        )
        return self._put_breaker(before, after)

    async def breaker_success(
        self, provider: str, now: float, *, reset_timeout_s: float
    ) -> Change[BreakerRecord]:
        before = self._breaker(provider)
        return self._put_breaker(before, t.breaker_on_success(before, now, reset_timeout_s=reset_timeout_s))

    async def breaker_claim_probe(
        self, provider: str, now: float, *, half_open_probes: int, probe_lease_s: float
    ) -> tuple[ProbeVerdict, Change[BreakerRecord]]:
        before = self._breaker(provider)
        verdict, after = t.breaker_on_claim(
            before, now, half_open_probes=half_open_probes, probe_lease_s=probe_lease_s
        )
        return verdict, self._put_breaker(before, after)

    async def breaker_release_probe(self, provider: str, now: float) -> Change[BreakerRecord]:
        before = self._breaker(provider)
        return self._put_breaker(before, t.breaker_on_release(before, now))

    async def reset_breakers(self, provider: str | None = None) -> None:
        if provider is None:
            self._breakers.clear()
        else:
            self._breakers.pop(provider, None)

    # -- cooldown ----------------------------------------------------------------------------
    def _cooldown(self, connection_id: str) -> CooldownRecord:
        rec = self._cooldowns.get(connection_id)
        return rec if rec is not None else CooldownRecord(connection_id=connection_id)

    def _put_cooldown(self, before: CooldownRecord, after: CooldownRecord) -> Change[CooldownRecord]:
        if after is not before:
            if after.is_default:
                self._cooldowns.pop(after.connection_id, None)
            else:
                self._cooldowns[after.connection_id] = after
        return Change(before, after)

    async def get_cooldowns(self, connection_ids: Iterable[str]) -> dict[str, CooldownRecord]:
        found: dict[str, CooldownRecord] = {}
        for cid in connection_ids:
            rec = self._cooldowns.get(cid)
            if rec is not None:
                found[cid] = rec
        return found

    async def all_cooldowns(self) -> dict[str, CooldownRecord]:
        return dict(self._cooldowns)

    async def cooldown_extend(
        self,
        connection_id: str,
        now: float,
        *,
        provider: str,
        hint_s: float | None,
        base_s: float,
        max_s: float,
        max_hint_s: float,
        reason: str,
        last_error: str,
    ) -> Change[CooldownRecord]:
        before = self._cooldown(connection_id)
        after = t.cooldown_on_limit(
            before,
            now,
            provider=provider,
            hint_s=hint_s,
            base_s=base_s,
            max_s=max_s,
            max_hint_s=max_hint_s,
            reason=reason,
            last_error=last_error,
        )
        return self._put_cooldown(before, after)

    async def cooldown_success(self, connection_id: str) -> Change[CooldownRecord]:
        before = self._cooldowns.get(connection_id)
        if before is None:  # the hot path: nothing to clear, no allocation
            rec = CooldownRecord(connection_id=connection_id)
            return Change(rec, rec)
        return self._put_cooldown(before, t.cooldown_on_success(before))

    async def mark_invalid(
        self, connection_id: str, now: float, *, provider: str, reason: str
    ) -> Change[CooldownRecord]:
        before = self._cooldown(connection_id)
        return self._put_cooldown(
            before, t.cooldown_on_invalid(before, now, provider=provider, reason=reason)
        )

    async def mark_valid(self, connection_id: str) -> Change[CooldownRecord]:
        before = self._cooldown(connection_id)
        return self._put_cooldown(before, t.cooldown_on_valid(before))

    async def reset_cooldowns(self, *, connection: str | None = None, provider: str | None = None) -> None:
        if connection is None and provider is None:
            self._cooldowns.clear()
            return
        for cid, rec in list(self._cooldowns.items()):
            if (connection is None or cid == connection) and (provider is None or rec.provider == provider):
                del self._cooldowns[cid]

    # -- lockout -----------------------------------------------------------------------------
    async def get_lockouts(self, keys: Iterable[LockKey]) -> dict[LockKey, LockoutRecord]:
        if not self._lockouts:
            return {}
        found: dict[LockKey, LockoutRecord] = {}
        for key in keys:
            rec = self._lockouts.get(key)
            if rec is not None:
                found[key] = rec
        return found

    async def all_lockouts(self) -> list[LockoutRecord]:
        return list(self._lockouts.values())

    async def lockout_extend(
        self,
        key: LockKey,
        now: float,
        *,
        base_s: float,
        max_s: float,
        until: float | None,
        hint_s: float | None,
        max_hint_s: float,
        reason: str,
    ) -> Change[LockoutRecord | None]:
        key = LockKey(*key)
        before = self._lockouts.get(key)
        after = t.lockout_on_failure(
            before,
            key,
            now,
            base_s=base_s,
            max_s=max_s,
            until=until,
            hint_s=hint_s,
            max_hint_s=max_hint_s,
            reason=reason,
        )
        self._lockouts[key] = after
        return Change(before, after)

    async def lockout_clear(self, key: LockKey) -> Change[LockoutRecord | None]:
        before = self._lockouts.pop(LockKey(*key), None) if self._lockouts else None
        return Change(before, None)

    async def reset_lockouts(self, *, provider: str | None = None, connection: str | None = None) -> None:
        if provider is None and connection is None:
            self._lockouts.clear()
            return
        for key in list(self._lockouts):
            if (provider is None or key.provider == provider) and (
                connection is None or key.connection == connection
            ):
                del self._lockouts[key]

    # -- bulk ladder read ----------------------------------------------------------------------
    async def get_ladder_records(
        self, providers: Iterable[str], connection_ids: Iterable[str], lock_keys: Iterable[LockKey]
    ) -> tuple[dict[str, BreakerRecord], dict[str, CooldownRecord], dict[LockKey, LockoutRecord]]:
        b, c, lk = self._breakers, self._cooldowns, self._lockouts
        return (
            {p: rb for p in providers if (rb := b.get(p)) is not None} if b else {},
            {i: rc for i in connection_ids if (rc := c.get(i)) is not None} if c else {},
            {k: rl for k in lock_keys if (rl := lk.get(k)) is not None} if lk else {},
        )

    def success_is_noop(self, provider: str, connection_id: str, model: str) -> bool:
        rb = self._breakers.get(provider)
        if rb is not None and (rb.failures or rb.state is not _CLOSED):
            return False
        rc = self._cooldowns.get(connection_id)
        if rc is not None and (rc.until or rc.backoff_level or rc.reason):  # cf. cooldown_on_success
            return False
        lk = self._lockouts
        return not lk or LockKey(provider, connection_id, model) not in lk

    # -- windows -----------------------------------------------------------------------------
    async def record_sample(
        self, key: str, now: float, *, latency_ms: float, ok: bool, ttft_ms: float | None = None
    ) -> None:
        win = self._windows.get(key)
        if win is None:
            win = self._windows[key] = _Window(self._window_size)
        win.add(now, latency_ms, ok, ttft_ms)

    async def get_window_stats(self, keys: Iterable[str]) -> dict[str, WindowStats]:
        empty = _EMPTY_STATS
        if not self._windows:
            return dict.fromkeys(keys, empty)
        out: dict[str, WindowStats] = {}
        for key in keys:
            win = self._windows.get(key)
            out[key] = win.stats() if win is not None else empty
        return out

    # -- quota -------------------------------------------------------------------------------
    async def set_quota(self, connection_id: str, snapshot: QuotaSnapshot) -> None:
        self._quotas[connection_id] = snapshot

    async def get_quota(self, connection_id: str) -> QuotaSnapshot | None:
        return self._quotas.get(connection_id)

    async def get_quotas(self, connection_ids: Iterable[str]) -> dict[str, QuotaSnapshot]:
        q = self._quotas
        return {i: r for i in connection_ids if (r := q.get(i)) is not None} if q else {}

    # -- in-flight ---------------------------------------------------------------------------
    async def incr_inflight(self, connection_id: str) -> int:
        n = self._inflight.get(connection_id, 0) + 1
        self._inflight[connection_id] = n
        return n

    async def decr_inflight(self, connection_id: str) -> int:
        n = self._inflight.get(connection_id, 0) - 1
        if n <= 0:
            self._inflight.pop(connection_id, None)
            return 0
        self._inflight[connection_id] = n
        return n

    async def get_inflight(self, connection_ids: Iterable[str]) -> dict[str, int]:
        busy = self._inflight
        if not busy:
            return dict.fromkeys(connection_ids, 0)
        return {cid: busy.get(cid, 0) for cid in connection_ids}

    # -- generic -----------------------------------------------------------------------------
    async def incr_counter(self, key: str, amount: int = 1) -> int:
        n = self._counters.get(key, 0) + amount
        self._counters[key] = n
        return n

    async def get_counter(self, key: str) -> int:
        return self._counters.get(key, 0)

    def _get_kv(self, key: str) -> str | bytes | None:
        item = self._kv.get(key)
        if item is None:
            return None
        value, expires = item
        if expires is not None and expires <= self._clock.time():
            del self._kv[key]
            return None
        return value

    def _set_kv(self, key: str, value: str | bytes, ttl_s: float | None) -> None:
        expires = None if ttl_s is None else self._clock.time() + ttl_s
        self._kv[key] = (value, expires)
        self._writes += 1
        if self._writes % _SWEEP_EVERY == 0:
            now = self._clock.time()
            for k in [k for k, (_, e) in self._kv.items() if e is not None and e <= now]:
                del self._kv[k]

    async def get_record(self, key: str) -> str | None:
        value = self._get_kv(key)
        if isinstance(value, bytes):
            return value.decode()
        return value

    async def set_record(self, key: str, value: str, ttl_s: float | None = None) -> None:
        self._set_kv(key, value, ttl_s)

    async def delete_record(self, key: str) -> None:
        self._kv.pop(key, None)

    async def get_json(self, key: str) -> Any | None:
        value = self._get_kv(key)
        if value is None:
            return None
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None

    async def set_json(self, key: str, value: Any, ttl_s: float | None = None) -> None:
        self._set_kv(key, orjson.dumps(value), ttl_s)


if TYPE_CHECKING:
    from omniroute.state.base import RoutingState

    def _conforms(state: MemoryRoutingState) -> RoutingState:  # mypy proves the protocol is met
        return state
