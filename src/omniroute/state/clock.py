"""Time sources for routing state: the :class:`Clock` protocol, the real clock and a fake one.

Routing state stores wall-clock deadlines (epoch seconds) because they are shared between replicas
(STORE-2); latency is measured on the monotonic clock. Tests and the simulator (BEYOND-1) inject
:class:`FakeClock` so no test ever sleeps.
"""

from __future__ import annotations

import time as _time
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    """A source of time. ``time()`` is wall-clock epoch seconds, ``monotonic()`` is seconds from an
    arbitrary origin that never goes backwards."""

    def time(self) -> float: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The process clock (``time.time`` / ``time.monotonic``)."""

    __slots__ = ()

    def time(self) -> float:
        return _time.time()

    def monotonic(self) -> float:
        return _time.monotonic()


class FakeClock:
    """A clock that moves only when told to; both readings advance together.

    ``start`` is the initial epoch time in seconds (default 2023-11-14T22:13:20Z).
    """

    __slots__ = ("_mono", "_wall")

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._wall = float(start)
        self._mono = 0.0

    def time(self) -> float:
        return self._wall

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> float:
        """Move both clocks forward by ``seconds`` (must be ≥ 0); returns the new wall time."""
        if seconds < 0:
            raise ValueError("FakeClock cannot go backwards")
        self._wall += seconds
        self._mono += seconds
        return self._wall

    def set(self, epoch_s: float) -> None:
        """Jump the wall clock to ``epoch_s`` (the monotonic clock moves by the same amount if later)."""
        if epoch_s > self._wall:
            self._mono += epoch_s - self._wall
        self._wall = float(epoch_s)
