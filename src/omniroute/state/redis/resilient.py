"""Redis routing state that degrades to in-process state instead of failing requests (STORE-2:
"Redis unavailable → degrade to local state with a warning, never fail requests").

:class:`ResilientRoutingState` implements the primitives by sending each one to a
:class:`~omniroute.state.redis.backend.RedisRoutingState` while Redis answers and to an in-process
fallback (:class:`~omniroute.state.memory.MemoryRoutingState`) otherwise. Since every domain
operation is exactly one primitive call, each operation runs wholly on one side. State written to the
fallback while degraded stays local (it is not merged back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from redis.exceptions import RedisError

from omniroute.clock import Clock
from omniroute.state.base import RoutingState
from omniroute.state.memory import DEFAULT_MAX_ENTRIES, MemoryRoutingState
from omniroute.state.primitives import Kind, Query
from omniroute.state.records import WindowStats
from omniroute.state.redis.backend import DEFAULT_TIMEOUT_S, FAILURES, UNAVAILABLE, RedisRoutingState

__all__ = ["ResilientRoutingState"]

log = logging.getLogger("omniroute.state")

K = TypeVar("K")
R = TypeVar("R")
T = TypeVar("T")


class ResilientRoutingState(RoutingState):
    """Redis routing state that degrades to in-process state instead of failing (STORE-2).

    Every call goes to ``primary`` while Redis answers. A connection error or timeout trips it:
    one warning is logged (repeats at most every ``warn_every_s`` seconds), that call and every later
    one are served by ``fallback`` (default: a :class:`MemoryRoutingState` on the primary's clock), and
    a background task calls :meth:`reconnect` every ``retry_after_s`` seconds of the primary's clock
    until Redis answers. Any other Redis error serves just that call from the fallback. In-flight
    counts are balanced across the switch: a decrement goes to the backend that counted the
    increment, and decrements owed to Redis while it was down are replayed when it is back.
    """

    def __init__(
        self,
        primary: RedisRoutingState,
        fallback: RoutingState | None = None,
        *,
        retry_after_s: float = 5.0,
        warn_every_s: float = 60.0,
    ) -> None:
        self.primary = primary
        self.clock: Clock = primary.clock
        self.fallback: RoutingState = fallback or MemoryRoutingState(primary.clock)
        self.retry_after_s = retry_after_s
        self.warn_every_s = warn_every_s
        self._degraded = False
        self.local = None  # while degraded: the fallback's records, which then answer exactly
        self._last_warn: float | None = None
        self._retry_task: asyncio.Task[None] | None = None
        self._reconnecting = asyncio.Lock()
        self._closed = False
        self._held: dict[str, int] = {}  # this replica's increments counted in Redis, per connection
        self._owed: dict[str, int] = {}  # decrements Redis missed while it was down

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str | None = None,
        clock: Clock | None = None,
        retry_after_s: float = 5.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> ResilientRoutingState:
        """A resilient state over ``RedisRoutingState(url=url, prefix=prefix, …)``; the local fallback
        keeps at most ``max_entries`` entries per bounded table."""
        primary = RedisRoutingState(
            url=url, prefix=prefix, clock=clock, connect_timeout_s=timeout_s, timeout_s=timeout_s
        )
        fallback = MemoryRoutingState(primary.clock, max_entries=max_entries)
        return cls(primary, fallback, retry_after_s=retry_after_s)

    @property
    def degraded(self) -> bool:
        """True while calls are served from the in-process fallback."""
        return self._degraded

    async def ready(self) -> bool:
        """Readiness of the shared state (OBS-4): ``False`` while degraded, else a live ``PING``."""
        if self._degraded:
            return False
        error = await self.primary.check()
        if error is None:
            return True
        self._trip(error)
        return False

    async def reconnect(self) -> bool:
        """Try Redis once, now: when it answers, replay the in-flight decrements it missed and send
        calls to it again. Returns whether calls go to Redis; never raises. The background task does
        this every ``retry_after_s`` seconds while degraded."""
        async with self._reconnecting:
            if not self._degraded:
                return True
            if not await self.primary.ping():
                if self._should_warn():
                    log.warning("Redis routing state still unavailable; serving local state")
                return False
            try:
                await self._replay_owed()
            except FAILURES:
                return False
            self._degraded, self.local = False, None
            log.warning("Redis routing state reachable again; shared state resumed")
            return True

    async def aclose(self) -> None:
        """Stop the reconnect task and close the Redis connection pool."""
        self._closed = True
        task, self._retry_task = self._retry_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.primary.aclose()

    # -- degradation -------------------------------------------------------------------------
    def _should_warn(self) -> bool:
        now = self.clock.monotonic()
        if self._last_warn is None or now - self._last_warn >= self.warn_every_s:
            self._last_warn = now
            return True
        return False

    def _trip(self, exc: BaseException) -> None:
        if not self._degraded:
            self._degraded, self.local = True, self.fallback.local
            if self._should_warn():
                log.warning(
                    "Redis routing state unavailable (%s: %s); serving routing state from "
                    "this process and retrying Redis every %g s",
                    type(exc).__name__,
                    exc,
                    self.retry_after_s,
                )
        if not self._closed and (self._retry_task is None or self._retry_task.done()):
            self._retry_task = asyncio.get_running_loop().create_task(self._retry())

    async def _retry(self) -> None:
        while self._degraded and not self._closed:
            await self.clock.sleep(self.retry_after_s)
            await self.reconnect()

    async def _replay_owed(self) -> None:
        for cid in list(self._owed):
            while self._owed.get(cid, 0) > 0:
                await self.primary.decr_inflight(cid)
                self._owed[cid] -= 1
            self._owed.pop(cid, None)

    def _on_error(self, exc: RedisError) -> None:
        if self._should_warn():
            log.warning("Redis routing state call failed (%s); served locally", exc)

    async def _run(self, op: Callable[[RoutingState], Awaitable[T]]) -> T:
        if not self._degraded:
            try:
                return await op(self.primary)
            except UNAVAILABLE as exc:
                self._trip(exc)
            except RedisError as exc:
                self._on_error(exc)
        return await op(self.fallback)

    # -- typed records -------------------------------------------------------------------------
    async def read(self, *queries: Query) -> tuple[dict[Any, Any], ...]:
        listed = [(kind, list(keys)) for kind, keys in queries]  # a retry on the fallback re-reads them
        return await self._run(lambda s: s.read(*listed))

    async def scan(self, kind: Kind[K, R]) -> dict[K, R]:
        return await self._run(lambda s: s.scan(kind))

    async def update(self, kind: Kind[K, R], key: K, rule: Callable[[R | None], tuple[T, R | None]]) -> T:
        return await self._run(lambda s: s.update(kind, key, rule))

    async def put(self, kind: Kind[K, R], key: K, record: R) -> None:
        await self._run(lambda s: s.put(kind, key, record))

    async def remove(self, kind: Kind[Any, Any], match: Mapping[str, str]) -> None:
        await self._run(lambda s: s.remove(kind, match))

    # -- windows, counters, byte records -------------------------------------------------------
    async def record_sample(
        self, key: str, now: float, *, latency_ms: float, ok: bool, ttft_ms: float | None = None
    ) -> None:
        await self._run(lambda s: s.record_sample(key, now, latency_ms=latency_ms, ok=ok, ttft_ms=ttft_ms))

    async def get_window_stats(self, keys: Iterable[str]) -> dict[str, WindowStats]:
        wanted = list(keys)
        return await self._run(lambda s: s.get_window_stats(wanted))

    async def incr_counter(self, key: str, amount: int = 1) -> int:
        return await self._run(lambda s: s.incr_counter(key, amount))

    async def get_counter(self, key: str) -> int:
        return await self._run(lambda s: s.get_counter(key))

    async def get_bytes(self, key: str) -> bytes | None:
        return await self._run(lambda s: s.get_bytes(key))

    async def set_bytes(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        await self._run(lambda s: s.set_bytes(key, value, ttl_s))

    async def delete_record(self, key: str) -> None:
        await self._run(lambda s: s.delete_record(key))

    # -- in-flight (balanced across a switch, see the class docstring) ----------------------------
    async def incr_inflight(self, connection_id: str) -> int:
        if not self._degraded:
            try:
                n = await self.primary.incr_inflight(connection_id)
            except UNAVAILABLE as exc:
                self._trip(exc)
            except RedisError as exc:
                self._on_error(exc)
            else:
                self._held[connection_id] = self._held.get(connection_id, 0) + 1
                return n
        return await self.fallback.incr_inflight(connection_id)

    async def decr_inflight(self, connection_id: str) -> int:
        held = self._held.get(connection_id, 0)
        if held <= 0:  # the increment was counted locally
            return await self.fallback.decr_inflight(connection_id)
        if held == 1:
            del self._held[connection_id]
        else:
            self._held[connection_id] = held - 1
        if not self._degraded:
            try:
                return await self.primary.decr_inflight(connection_id)
            except UNAVAILABLE as exc:
                self._trip(exc)
            except RedisError as exc:
                self._on_error(exc)
        self._owed[connection_id] = self._owed.get(connection_id, 0) + 1
        return (await self.get_inflight([connection_id]))[connection_id]

    async def get_inflight(self, connection_ids: Iterable[str]) -> dict[str, int]:
        ids = list(connection_ids)
        local = await self.fallback.get_inflight(ids)
        if not self._degraded:
            try:
                shared = await self.primary.get_inflight(ids)
            except UNAVAILABLE as exc:
                self._trip(exc)
            except RedisError as exc:
                self._on_error(exc)
            else:
                return {c: shared.get(c, 0) + local.get(c, 0) for c in ids}
        return {c: local.get(c, 0) + self._held.get(c, 0) for c in ids}
