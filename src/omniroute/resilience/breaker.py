"""Tier 1 of the ladder: the provider circuit breaker (RESIL-1).

Owns which failures count against a provider and how breaker updates are sent to the
:class:`~omniroute.state.base.RoutingState` (the transition rules themselves are in
:mod:`omniroute.state.transitions`, applied atomically by the state).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from omniroute.errors import (
    ConnectionFailed,
    ContentFiltered,
    ContextOverflow,
    ResponseTooLarge,
    StreamBroken,
    Timeout,
    UpstreamBadRequest,
    UpstreamError,
)
from omniroute.resilience._fmt import short
from omniroute.resilience.events import TransitionLog
from omniroute.state.base import RoutingState
from omniroute.state.records import BreakerRecord, Change, ProbeVerdict

__all__ = ["COUNTED_STATUSES", "BreakerSettings", "CircuitBreaker", "is_counted"]

COUNTED_STATUSES = frozenset({408, 500, 502, 503, 504})
"""HTTP statuses that count as provider failures (RESIL-1; 429 and other 4xx deliberately not)."""

_COUNTED_CLASSES = (Timeout, ConnectionFailed, StreamBroken, ResponseTooLarge)
_NEVER_COUNTED = (
    UpstreamBadRequest,
    ContextOverflow,
    ContentFiltered,
)  # the request's fault, not the provider's


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """Breaker knobs (config ``resilience.circuit_breaker``).

    ``failure_threshold`` consecutive counted failures open it (RESIL-1, default 5);
    ``reset_timeout_s`` seconds OPEN before a probe (RESIL-1; default 10, not SPEC's 30, so that a
    recovered provider is probed soon enough for RESIL-11); ``half_open_probes`` probes admitted while
    HALF_OPEN (RESIL-1, default 1); ``max_multiplier`` caps the doubling of the reset timeout per
    re-open (RESIL-1 "capped ×16"); ``max_reset_timeout_s`` caps it absolutely (RESIL-11, default 10:
    one probe every 10 s at most during an outage of any length; never below ``reset_timeout_s``);
    ``probe_lease_s`` seconds after which an unreported probe slot frees itself (not in SPEC; guards
    against abandoned probes); ``counted_statuses`` (RESIL-1).
    """

    failure_threshold: int = 5
    reset_timeout_s: float = 10.0
    half_open_probes: int = 1
    max_multiplier: float = 16.0
    max_reset_timeout_s: float = 10.0
    probe_lease_s: float = 120.0
    counted_statuses: frozenset[int] = COUNTED_STATUSES

    @property
    def effective_multiplier(self) -> float:
        """The cap of the re-open doubling as a multiple of ``reset_timeout_s``: ``max_multiplier``,
        lowered so the window never exceeds ``max_reset_timeout_s`` (and never below ×1)."""
        return max(1.0, min(self.max_multiplier, self.max_reset_timeout_s / self.reset_timeout_s))


def is_counted(err: UpstreamError, settings: BreakerSettings | None = None) -> bool:
    """Whether ``err`` counts against its provider's breaker (RESIL-1): timeouts, connection errors,
    broken streams, oversized answers (``upstream_limits``) and upstream statuses 408/500/502/503/504
    — never 429, never the request's own fault (bad request, context overflow, content filter)."""
    if isinstance(err, _NEVER_COUNTED):
        return False
    if isinstance(err, _COUNTED_CLASSES):
        return True
    statuses = settings.counted_statuses if settings is not None else COUNTED_STATUSES
    return err.upstream_status in statuses


def failure_reason(err: UpstreamError) -> str:
    """Short cause text stored with a breaker or cooldown, e.g. ``503 Service Unavailable``."""
    status = err.upstream_status or err.kind
    return short(f"{status} {err.message}")


class CircuitBreaker:
    """Per-provider breaker over a :class:`RoutingState` (RESIL-1). Times are epoch seconds; every
    state transition is appended to ``log`` when one is given."""

    __slots__ = ("log", "settings", "state")

    def __init__(
        self, state: RoutingState, settings: BreakerSettings | None = None, log: TransitionLog | None = None
    ) -> None:
        self.state = state
        self.settings = settings or BreakerSettings()
        self.log = log

    def _logged(self, change: Change[BreakerRecord], now: float) -> Change[BreakerRecord]:
        if self.log is not None and change.changed:
            self.log.breaker(change, now)
        return change

    async def records(self, providers: Iterable[str]) -> dict[str, BreakerRecord]:
        """Stored records of ``providers``; read the state a caller sees with
        :func:`~omniroute.state.records.breaker_view`."""
        return await self.state.get_breakers(providers)

    async def on_success(self, provider: str, now: float) -> Change[BreakerRecord]:
        """A call to ``provider`` succeeded: reset the count, or close after a probe."""
        change = await self.state.breaker_success(
            provider, now, reset_timeout_s=self.settings.reset_timeout_s
        )
        return self._logged(change, now)

    async def on_failure(self, provider: str, err: UpstreamError, now: float) -> Change[BreakerRecord] | None:
        """Record ``err`` if it is counted (:func:`is_counted`); ``None`` when it is not."""
        if not is_counted(err, self.settings):
            return None
        s = self.settings
        change = await self.state.breaker_failure(
            provider,
            now,
            failure_threshold=s.failure_threshold,
            reset_timeout_s=s.reset_timeout_s,
            max_multiplier=s.effective_multiplier,
            reason=failure_reason(err),
        )
        return self._logged(change, now)

    async def claim_probe(self, provider: str, now: float) -> tuple[ProbeVerdict, Change[BreakerRecord]]:
        """Atomically claim a half-open probe slot (exactly ``half_open_probes`` winners)."""
        verdict, change = await self.state.breaker_claim_probe(
            provider,
            now,
            half_open_probes=self.settings.half_open_probes,
            probe_lease_s=self.settings.probe_lease_s,
        )
        return verdict, self._logged(change, now)

    async def release_probe(self, provider: str, now: float) -> Change[BreakerRecord]:
        """Give a claimed probe slot back (abandoned or inconclusive attempt)."""
        return self._logged(await self.state.breaker_release_probe(provider, now), now)
