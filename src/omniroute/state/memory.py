"""In-process routing state (STORE-1 default backend): the primitives of
:class:`~omniroute.state.primitives.StatePrimitives` over plain dicts.

Every method runs to completion without awaiting, so on one event loop each call is atomic — the
property the contract demands. The domain operations come from
:class:`~omniroute.state.base.RoutingState`.

Memory is bounded: the tables that grow with the model names clients send — latency/error windows,
counters, lockouts and byte records — keep at most ``max_entries`` entries each (default
:data:`DEFAULT_MAX_ENTRIES`) and evict the least recently written one beyond that, counted in
:attr:`MemoryRoutingState.evictions` (exported as ``omniroute_state_evictions_total``). Breakers,
cooldowns and quota snapshots are one per provider or connection: bounded by the configuration.
"""

from __future__ import annotations

import itertools
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from omniroute.clock import Clock, SystemClock
from omniroute.state.base import RoutingState
from omniroute.state.primitives import BREAKER, COOLDOWN, LOCKOUT, QUOTA, Kind, LocalRecords, Query
from omniroute.state.records import WindowStats
from omniroute.state.windows import DEFAULT_WINDOW_SIZE, EMPTY_STATS, Sample, compute_stats

__all__ = ["BOUNDED_TABLES", "DEFAULT_MAX_ENTRIES", "MemoryRoutingState", "memory_state_of"]

K = TypeVar("K")
R = TypeVar("R")
T = TypeVar("T")

DEFAULT_MAX_ENTRIES = 100_000
"""Entries kept per bounded table (windows, counters, lockouts, byte records) before the least
recently written is evicted: at ~1 KB per window, about 100 MB at worst."""

BOUNDED_TABLES = ("windows", "counters", "lockouts", "records")
"""The tables :attr:`MemoryRoutingState.evictions` and :meth:`MemoryRoutingState.entry_counts` name."""

_SWEEP_EVERY = 1024  # expired byte records are purged every N writes so TTL'd keys never pile up


class _Window:
    """Last N samples of one candidate with lazily cached statistics."""

    __slots__ = ("last_at", "samples", "stats_cache")

    def __init__(self, size: int) -> None:
        self.samples: deque[Sample] = deque(maxlen=size)
        self.last_at: float | None = None
        self.stats_cache: WindowStats | None = None

    def stats(self) -> WindowStats:
        if self.stats_cache is None:
            self.stats_cache = compute_stats(self.samples, self.last_at)
        return self.stats_cache


class MemoryRoutingState(RoutingState):
    """Routing state held in this process's memory.

    ``clock`` measures TTLs of byte records (default :class:`SystemClock`); ``window_size`` is the
    number of samples per latency/error window (default 100); ``max_entries`` bounds each table that
    grows with traffic (see the module docstring; the config's ``state_max_entries``). Raises
    ``ValueError`` for ``max_entries < 1``.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        window_size: int = DEFAULT_WINDOW_SIZE,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._clock: Clock = clock or SystemClock()
        self._window_size = window_size
        self.max_entries = max_entries
        self.evictions: dict[str, int] = dict.fromkeys(BOUNDED_TABLES, 0)
        """Entries evicted per bounded table since start."""
        tables: defaultdict[Kind[Any, Any], dict[Any, Any]] = defaultdict(dict)
        self._tables = tables
        self.local: LocalRecords = (tables[BREAKER], tables[COOLDOWN], tables[LOCKOUT], tables[QUOTA])
        self._windows: dict[str, _Window] = {}
        self._inflight: dict[str, int] = {}
        self._counters: dict[str, int] = {}
        self._kv: dict[str, tuple[bytes, float | None]] = {}
        self._writes = 0

    def _bound(self, table: dict[Any, Any], name: str) -> None:
        """Evict the least recently written entries of ``table`` beyond :attr:`max_entries` (writes
        re-insert their key, so the first key in order is the least recently written)."""
        extra = len(table) - self.max_entries
        if extra > 0:
            for key in list(itertools.islice(table, extra)):
                del table[key]
            self.evictions[name] += extra

    def entry_counts(self) -> dict[str, int]:
        """Entries held now per bounded table (``omniroute_state_entries``)."""
        return {
            "windows": len(self._windows),
            "counters": len(self._counters),
            "lockouts": len(self._tables[LOCKOUT]),
            "records": len(self._kv),
        }

    # -- typed records -------------------------------------------------------------------------
    async def read(self, *queries: Query) -> tuple[dict[Any, Any], ...]:
        tables = self._tables
        out = []
        for kind, keys in queries:
            table = tables[kind]
            out.append({k: r for k in keys if (r := table.get(k)) is not None} if table else {})
        return tuple(out)

    async def scan(self, kind: Kind[K, R]) -> dict[K, R]:
        return dict(self._tables[kind])

    async def update(self, kind: Kind[K, R], key: K, rule: Callable[[R | None], tuple[T, R | None]]) -> T:
        table: dict[K, R] = self._tables[kind]
        before = table.get(key)
        result, after = rule(before)
        if after is not before:
            if after is None:
                del table[key]
            elif kind is LOCKOUT:  # keyed by model: bounded, most recently written last
                table.pop(key, None)
                table[key] = after
                self._bound(table, "lockouts")
            else:
                table[key] = after
        return result

    async def put(self, kind: Kind[K, R], key: K, record: R) -> None:
        table = self._tables[kind]
        if kind is LOCKOUT:
            table.pop(key, None)
            table[key] = record
            self._bound(table, "lockouts")
        else:
            table[key] = record

    async def remove(self, kind: Kind[Any, Any], match: Mapping[str, str]) -> None:
        table = self._tables[kind]
        if not match:
            table.clear()
            return
        for key, rec in list(table.items()):
            if all(getattr(rec, field) == value for field, value in match.items()):
                del table[key]

    # -- windows -----------------------------------------------------------------------------
    async def record_sample(
        self, key: str, now: float, *, latency_ms: float, ok: bool, ttft_ms: float | None = None
    ) -> None:
        windows = self._windows
        win = windows.pop(key, None)  # re-inserted below: most recently written last
        if win is None:
            win = windows[key] = _Window(self._window_size)
            if len(windows) > self.max_entries:
                self._bound(windows, "windows")
        else:
            windows[key] = win
        # inlined _Window.add: this runs after every attempt
        win.samples.append((latency_ms, ok, ttft_ms))
        win.last_at = now
        win.stats_cache = None

    async def get_window_stats(self, keys: Iterable[str]) -> dict[str, WindowStats]:
        empty = EMPTY_STATS
        if not self._windows:
            return dict.fromkeys(keys, empty)
        out: dict[str, WindowStats] = {}
        for key in keys:
            win = self._windows.get(key)
            out[key] = win.stats() if win is not None else empty
        return out

    # -- counters ----------------------------------------------------------------------------
    async def incr_counter(self, key: str, amount: int = 1) -> int:
        counters = self._counters
        n = counters.pop(key, 0) + amount
        counters[key] = n
        if len(counters) > self.max_entries:
            self._bound(counters, "counters")
        return n

    async def get_counter(self, key: str) -> int:
        return self._counters.get(key, 0)

    # -- byte records --------------------------------------------------------------------------
    async def get_bytes(self, key: str) -> bytes | None:
        item = self._kv.get(key)
        if item is None:
            return None
        value, expires = item
        if expires is not None and expires <= self._clock.time():
            del self._kv[key]
            return None
        return value

    async def set_bytes(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        now = self._clock.time()
        self._kv.pop(key, None)
        self._kv[key] = (value, None if ttl_s is None else now + ttl_s)
        if len(self._kv) > self.max_entries:
            self._bound(self._kv, "records")
        self._writes += 1
        if self._writes % _SWEEP_EVERY == 0:
            for k in [k for k, (_, e) in self._kv.items() if e is not None and e <= now]:
                del self._kv[k]

    async def delete_record(self, key: str) -> None:
        self._kv.pop(key, None)

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


def memory_state_of(state: object) -> MemoryRoutingState | None:
    """The in-process state behind ``state``: itself, the local fallback of a Redis state that
    degrades to memory (its ``fallback`` attribute), or ``None``."""
    if isinstance(state, MemoryRoutingState):
        return state
    fallback = getattr(state, "fallback", None)
    return fallback if isinstance(fallback, MemoryRoutingState) else None
