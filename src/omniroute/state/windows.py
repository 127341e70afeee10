"""Rolling latency/error windows: the statistics every backend computes the same way (AUTO-3, AUTO-5).

A window holds the last N attempt outcomes of one candidate key as :data:`Sample` tuples; backends
store the samples their own way (a deque, a capped Redis list) and summarise them with
:func:`compute_stats`, so two backends fed the same samples report equal :class:`WindowStats`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from omniroute.state.records import WindowStats

__all__ = ["DEFAULT_WINDOW_SIZE", "EMPTY_STATS", "Sample", "compute_stats"]

DEFAULT_WINDOW_SIZE = 100
"""Samples kept per candidate latency/error window (STORE-2 "latency/error windows")."""

EMPTY_STATS = WindowStats()
"""The statistics of a key without samples (frozen, so one shared instance serves every such key)."""

Sample = tuple[float, bool, float | None]
"""One attempt outcome, oldest first in a window: ``(latency_ms, ok, ttft_ms or None)``."""


def _p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def compute_stats(samples: Iterable[Sample], last_at: float | None) -> WindowStats:
    """Summarise ``samples`` (oldest first): error rate over all of them; mean, population standard
    deviation and nearest-rank p95 of the latency over the successful ones (ms); p95 TTFT over the
    successful ones that have a TTFT. ``last_at`` (epoch s) is when the newest sample was taken."""
    items = list(samples)
    if not items:
        return EMPTY_STATS
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
