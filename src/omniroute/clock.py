"""Time: the :class:`Clock` protocol, the process clock and a fake one.

Everything that reads the time or waits — the engine, the resilience ladder, routing state, the
background writers — takes a :class:`Clock` instead of calling ``time`` or ``asyncio.sleep``, so tests
and the simulator run on :class:`FakeClock` and never sleep to wait for a cooldown, a breaker reset or
a TTL. Routing state stores wall-clock deadlines (epoch seconds) because replicas share them
(STORE-2); durations are measured on the monotonic clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time as _time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """A source of time. ``time()`` is wall-clock epoch seconds, ``monotonic()`` is seconds from an
    arbitrary origin that never goes backwards, ``sleep(seconds)`` waits that long on this clock."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The process clock (``time.time`` / ``time.monotonic`` / ``asyncio.sleep``)."""

    __slots__ = ()

    def time(self) -> float:
        return _time.time()

    def monotonic(self) -> float:
        return _time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


class FakeClock:
    """A clock that moves only when told to; both readings advance together.

    ``start`` is the initial epoch time in seconds (default 2023-11-14T22:13:20Z). :meth:`sleep`
    returns once :meth:`advance` has moved the clock past its wake-up time (a sleep of 0 or less just
    yields to the event loop), so a test can drive a cooldown or a retry wait without waiting.
    """

    __slots__ = ("_mono", "_seq", "_sleepers", "_wall")

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._wall = float(start)
        self._mono = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def time(self) -> float:
        return self._wall

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._mono + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """How many :meth:`sleep` calls are waiting (cancelled ones included until the next advance)."""
        return len(self._sleepers)

    def advance(self, seconds: float) -> float:
        """Move both clocks forward by ``seconds`` (must be ≥ 0), wake every sleeper whose time has
        come (earliest first) and return the new wall time. Raises :class:`ValueError` if negative."""
        if seconds < 0:
            raise ValueError("FakeClock cannot go backwards")
        self._wall += seconds
        self._mono += seconds
        self._wake()
        return self._wall

    def set(self, epoch_s: float) -> None:
        """Jump the wall clock to ``epoch_s`` (the monotonic clock moves by the same amount if later)."""
        if epoch_s > self._wall:
            self._mono += epoch_s - self._wall
        self._wall = float(epoch_s)
        self._wake()

    def _wake(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
