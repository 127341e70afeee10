"""Time: the :class:`Clock` protocol, the process clock and a fake one.

Everything that reads the time or waits — the engine, the resilience ladder, routing state, the
background writers, the store — takes a :class:`Clock` instead of calling ``time`` or
``asyncio.sleep``, so tests and the simulator run on :class:`FakeClock` and never sleep to wait for a
cooldown, a breaker reset or a TTL. Routing state stores wall-clock deadlines (epoch seconds) because
replicas share them (STORE-2); durations are measured on the monotonic clock.

What stays on the event loop's real time, because it guards a real socket rather than a routing
rule: the upstream client's connect/TTFT/idle/total timeouts, the request-body deadline and the
stream keep-alives on the client connection. ruff's banned-api rule (TID251 in ``pyproject.toml``)
keeps direct ``time``/``asyncio.sleep`` calls out of the rest of ``src``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time as _time
from collections.abc import Awaitable, Collection
from typing import Any, Protocol, TypeVar

__all__ = ["Clock", "FakeClock", "SystemClock", "wait_any"]

T = TypeVar("T")


class Clock(Protocol):
    """A source of time. ``time()`` is wall-clock epoch seconds, ``monotonic()`` is seconds from an
    arbitrary origin that never goes backwards, ``sleep(seconds)`` waits that long on this clock."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The process clock (``time.time`` / ``time.monotonic`` / ``asyncio.sleep``).

    ``monotonic()`` also times requests for the latency and overhead figures: on Linux and macOS
    (and on Windows from Python 3.13) it is the same clock as ``time.perf_counter``, with
    nanosecond resolution."""

    __slots__ = ()

    def time(self) -> float:
        return _time.time()

    def monotonic(self) -> float:
        return _time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


async def wait_any(clock: Clock, futures: Collection[asyncio.Future[Any]], timeout_s: float) -> None:
    """Return once one of ``futures`` is done or ``timeout_s`` seconds have passed on ``clock``:
    ``asyncio.wait(futures, timeout=timeout_s, return_when=FIRST_COMPLETED)`` on an injected clock.
    The futures are left as they are (never cancelled); the caller checks which are done."""
    timer = asyncio.ensure_future(clock.sleep(timeout_s))
    try:
        await asyncio.wait({timer, *futures}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()


class FakeClock:
    """A clock that moves only when told to; both readings advance together.

    ``start`` is the initial epoch time in seconds (default 2023-11-14T22:13:20Z). :meth:`sleep`
    returns once :meth:`advance` has moved the clock past its wake-up time (a sleep of 0 or less just
    yields to the event loop), so a test can drive a cooldown or a retry wait without waiting.
    :meth:`run` drives a whole workload on virtual time, jumping from one wake-up to the next.
    """

    __slots__ = ("_mono", "_seq", "_sleepers", "_wall", "_watchers")

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._wall = float(start)
        self._mono = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._watchers: list[asyncio.Future[None]] = []

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
        watchers, self._watchers = self._watchers, []
        for w in watchers:
            if not w.done():
                w.set_result(None)
        await fut

    @property
    def sleepers(self) -> int:
        """How many :meth:`sleep` calls are waiting (cancelled ones not counted)."""
        return sum(1 for *_, fut in self._sleepers if not fut.done())

    @property
    def next_wake(self) -> float | None:
        """The monotonic time at which the earliest waiting :meth:`sleep` returns; ``None`` if none."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)  # cancelled while asleep
        return self._sleepers[0][0] if self._sleepers else None

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

    async def wait_for_sleepers(self, count: int) -> None:
        """Return once at least ``count`` :meth:`sleep` calls are waiting (at once if they are).

        After :meth:`advance` woke periodic tasks (a poll loop, a batch writer), waiting until as many
        sleepers as before are back tells a test that each finished its step and went back to sleep."""
        while self.sleepers < count:
            watcher: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._watchers.append(watcher)
            await watcher

    async def run(self, aw: Awaitable[T], *, timeout_s: float | None = None) -> T:
        """Await ``aw`` on virtual time: whenever the event loop has nothing left to run, jump to the
        earliest sleeper's wake-up (a discrete-event simulation). Returns what ``aw`` returns and
        raises what it raises; :class:`TimeoutError` once ``timeout_s`` seconds of virtual time
        would pass first.

        Only for work that waits on this clock alone — no sockets, threads or loop timers, which the
        jump cannot see — on asyncio's own event loop (idleness is read from its ready queue).
        Raises :class:`RuntimeError` when ``aw`` waits and no sleeper is left to wake it. ``aw`` is
        cancelled whenever it does not finish."""
        task = asyncio.ensure_future(aw)
        loop = asyncio.get_running_loop()
        limit = None if timeout_s is None else self._mono + timeout_s
        try:
            while True:
                await asyncio.sleep(0)
                while loop._ready:  # type: ignore[attr-defined]  # asyncio's queue of runnable callbacks
                    await asyncio.sleep(0)
                if task.done():
                    return task.result()
                wake = self.next_wake
                if wake is None:
                    raise RuntimeError("FakeClock.run: the work waits on something other than this clock")
                if limit is not None and wake > limit:
                    raise TimeoutError(f"FakeClock.run: not done within {timeout_s:g} s of virtual time")
                # exactly to the wake-up time: advancing by the difference could fall short by a rounding
                self._wall += wake - self._mono
                self._mono = wake
                self._wake()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _wake(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._mono:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
