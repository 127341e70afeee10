"""The quota provider: how much upstream quota a connection has left and when it resets (COMBO-3
fill-first / reset-aware / reset-window / headroom, AUTO-3 ``quota``).

Two sources, combined by taking the tighter one:

* the :class:`~omniroute.state.records.QuotaSnapshot` that ``Resilience.record_success`` stores in
  :class:`~omniroute.state.base.RoutingState` from upstream rate-limit headers
  (``x-ratelimit-remaining-*`` / ``x-ratelimit-limit-*`` / ``x-ratelimit-reset-*``,
  ``anthropic-ratelimit-*``; RESIL-2 hints);
* optional per-connection limits from config (``connectionLimits: {<connection id>: {requests: N,
  window_s: S}}`` in the combo → global combo-defaults cascade), counted in RoutingState per fixed
  window.

No data → :data:`NEUTRAL`: strategies give such a connection a neutral score, never a penalty.
A snapshot whose reset time has passed describes a window that is over: the connection counts as
untouched again. A snapshot without a reset time goes stale after :data:`SNAPSHOT_MAX_AGE_S`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from omniroute.state.base import RoutingState
from omniroute.state.records import QuotaSnapshot

__all__ = [
    "NEUTRAL",
    "SNAPSHOT_MAX_AGE_S",
    "ConnectionLimit",
    "QuotaInfo",
    "QuotaProvider",
    "StateQuotaProvider",
    "parse_limits",
]

SNAPSHOT_MAX_AGE_S = 3600.0
"""A header snapshot with no reset time is trusted for this long (s)."""


@dataclass(frozen=True, slots=True)
class QuotaInfo:
    """What is known about one connection's quota.

    ``remaining``: fraction in [0, 1] (1 = untouched, 0 = spent), ``None`` without data;
    ``reset_at``: epoch s when the binding window resets, ``None`` when unknown;
    ``source``: ``headers``, ``config``, ``headers+config`` or ``none``.
    """

    remaining: float | None = None
    reset_at: float | None = None
    source: str = "none"

    @property
    def known(self) -> bool:
        """True when some source reported a remaining fraction."""
        return self.remaining is not None

    @property
    def limit_reached(self) -> bool:
        """True when the quota is spent (remaining 0) — until ``reset_at``."""
        return self.remaining is not None and self.remaining <= 0.0

    @property
    def utilisation(self) -> float | None:
        """``1 − remaining`` (the max utilisation over the reported dimensions), or ``None``."""
        return None if self.remaining is None else 1.0 - self.remaining


NEUTRAL = QuotaInfo()
"""The answer for a connection nobody reported on."""


@dataclass(frozen=True, slots=True)
class ConnectionLimit:
    """An operator-declared limit: at most ``requests`` served per fixed window of ``window_s`` s."""

    requests: int
    window_s: float


class QuotaProvider(Protocol):
    """Per-connection quota for the quota-aware strategies (COMBO-3)."""

    async def get(self, connection_id: str, now: float) -> QuotaInfo:
        """The connection's quota at ``now`` (epoch s); :data:`NEUTRAL` without data."""
        ...

    async def note_served(self, connection_id: str, now: float) -> None:
        """One request was served by the connection (counts against a configured limit)."""
        ...


def parse_limits(raw: Any) -> dict[str, ConnectionLimit]:
    """``{conn_id: {requests, window_s}}`` → limits; malformed entries are skipped (validated at the
    management API)."""
    out: dict[str, ConnectionLimit] = {}
    if not isinstance(raw, Mapping):
        return out
    for conn, spec in raw.items():
        if not isinstance(spec, Mapping):
            continue
        try:
            requests = int(spec.get("requests", 0))
            window_s = float(spec.get("window_s", 0))
        except (TypeError, ValueError):
            continue
        if requests > 0 and window_s > 0:
            out[str(conn)] = ConnectionLimit(requests, window_s)
    return out


def _from_snapshot(snap: QuotaSnapshot, now: float) -> QuotaInfo:
    if snap.reset_at is not None and snap.reset_at <= now:
        return QuotaInfo(1.0, None, "headers")  # that window is over
    if snap.reset_at is None and now - snap.observed_at > SNAPSHOT_MAX_AGE_S:
        return NEUTRAL
    return QuotaInfo(max(0.0, min(1.0, snap.remaining_fraction)), snap.reset_at, "headers")


def _tighter(a: QuotaInfo, b: QuotaInfo) -> QuotaInfo:
    if not a.known:
        return b
    if not b.known:
        return a
    assert a.remaining is not None and b.remaining is not None
    low, high = (a, b) if a.remaining <= b.remaining else (b, a)
    return QuotaInfo(low.remaining, low.reset_at or high.reset_at, f"{a.source}+{b.source}")


class StateQuotaProvider:
    """:class:`QuotaProvider` over :class:`RoutingState` header snapshots and configured limits."""

    __slots__ = ("limits", "state")

    def __init__(self, state: RoutingState, limits: Mapping[str, ConnectionLimit] | None = None) -> None:
        self.state = state
        self.limits = dict(limits or {})

    @staticmethod
    def _counter_key(connection_id: str, window: int) -> str:
        return f"quota:served:{connection_id}:{window}"

    async def get(self, connection_id: str, now: float) -> QuotaInfo:
        snap = await self.state.get_quota(connection_id)
        info = _from_snapshot(snap, now) if snap is not None else NEUTRAL
        limit = self.limits.get(connection_id)
        if limit is not None:
            window = int(now // limit.window_s)
            used = await self.state.get_counter(self._counter_key(connection_id, window))
            remaining = max(0.0, 1.0 - used / limit.requests)
            info = _tighter(info, QuotaInfo(remaining, (window + 1) * limit.window_s, "config"))
        return info

    async def note_served(self, connection_id: str, now: float) -> None:
        limit = self.limits.get(connection_id)
        if limit is not None:
            await self.state.incr_counter(self._counter_key(connection_id, int(now // limit.window_s)))
