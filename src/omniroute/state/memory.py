"""In-process routing state (STORE-1 default backend): the primitives of
:class:`~omniroute.state.primitives.StatePrimitives` over plain dicts.

Every method runs to completion without awaiting, so on one event loop each call is atomic — the
property the contract demands. The domain operations come from
:class:`~omniroute.state.base.RoutingState`.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from omniroute.clock import Clock, SystemClock
from omniroute.state.base import RoutingState
from omniroute.state.primitives import BREAKER, COOLDOWN, LOCKOUT, QUOTA, Kind, LocalRecords, Query
from omniroute.state.records import WindowStats
from omniroute.state.windows import DEFAULT_WINDOW_SIZE, EMPTY_STATS, Sample, compute_stats

__all__ = ["MemoryRoutingState"]

K = TypeVar("K")
R = TypeVar("R")
T = TypeVar("T")

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
    number of samples per latency/error window (default 100).
    """

    def __init__(self, clock: Clock | None = None, *, window_size: int = DEFAULT_WINDOW_SIZE) -> None:
        self._clock: Clock = clock or SystemClock()
        self._window_size = window_size
        tables: defaultdict[Kind[Any, Any], dict[Any, Any]] = defaultdict(dict)
        self._tables = tables
        self.local: LocalRecords = (tables[BREAKER], tables[COOLDOWN], tables[LOCKOUT], tables[QUOTA])
        self._windows: dict[str, _Window] = {}
        self._inflight: dict[str, int] = {}
        self._counters: dict[str, int] = {}
        self._kv: dict[str, tuple[bytes, float | None]] = {}
        self._writes = 0

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
            else:
                table[key] = after
        return result

    async def put(self, kind: Kind[K, R], key: K, record: R) -> None:
        self._tables[kind][key] = record

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
        win = self._windows.get(key)
        if win is None:
            win = self._windows[key] = _Window(self._window_size)
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
        n = self._counters.get(key, 0) + amount
        self._counters[key] = n
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
        self._kv[key] = (value, None if ttl_s is None else now + ttl_s)
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
