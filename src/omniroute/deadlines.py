"""Request-body deadlines: a 408 for a client that announces a body and stops sending it.

One timer serves every request whose body is being read, instead of one ``asyncio.timeout`` per
request: entering and leaving a timeout scope cost more than everything else in reading a small
body (PERF-2, profiled with ``bench``). The timer runs only while some body is being read, ticks
every ``tick_s`` seconds, and cancels the reading task of each request past its deadline. It runs on
the event loop's real time, not the gateway's clock: it bounds a read from a real client socket.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from omniroute.errors import RequestTimeout

T = TypeVar("T")

BODY_TIMEOUT_S = 30.0
"""Seconds a client has to deliver the body it announced (then 408)."""


class BodyDeadlines:
    """Bounded waits for request bodies, shared by every surface of one gateway (one event loop).

    ``timeout_s`` is the allowance per request in seconds; a request is cut at most ``tick_s``
    seconds after its deadline.
    """

    def __init__(self, timeout_s: float = BODY_TIMEOUT_S, tick_s: float = 0.5) -> None:
        self.timeout_s = timeout_s
        self.tick_s = tick_s
        self._reading: dict[asyncio.Task[object], float] = {}
        self._expired: set[asyncio.Task[object]] = set()
        self._timer: asyncio.TimerHandle | None = None

    async def run(self, read: Callable[[], Awaitable[T]]) -> T:
        """Await ``read()`` within the allowance; raises :class:`RequestTimeout` (408) past it."""
        task = asyncio.current_task()
        if task is None:  # not inside a task: nothing to cancel, so no deadline
            return await read()
        loop = asyncio.get_running_loop()
        self._reading[task] = loop.time() + self.timeout_s
        if self._timer is None:
            self._timer = loop.call_later(self.tick_s, self._tick, loop)
        try:
            return await read()
        except asyncio.CancelledError:
            if task not in self._expired:
                raise
            task.uncancel()
            raise RequestTimeout(f"The request body did not arrive within {self.timeout_s:g} s.") from None
        finally:
            del self._reading[task]
            self._expired.discard(task)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        for task, deadline in self._reading.items():
            if deadline <= now and task not in self._expired:
                self._expired.add(task)
                task.cancel()
        if self._reading:
            self._timer = loop.call_later(self.tick_s, self._tick, loop)
