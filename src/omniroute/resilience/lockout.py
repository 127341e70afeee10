"""Tier 3 of the ladder: model lockout per (provider, connection, model) (RESIL-3).

Owns which failures lock a model on one connection (quota, billing, permission-to-model,
model-not-found), the daily-quota deadline (next local midnight) and the calls into
:class:`~omniroute.state.base.RoutingState`. Other models on the same connection stay usable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import time as dtime

from omniroute.errors import ModelUnavailable, QuotaExhausted, UpstreamError
from omniroute.resilience._fmt import reset_note, with_status
from omniroute.resilience.events import TransitionLog
from omniroute.state.base import RoutingState
from omniroute.state.records import Change, LockKey, LockoutRecord

__all__ = ["LockoutSettings", "ModelLockout", "lockout_cause", "next_local_midnight"]


@dataclass(frozen=True, slots=True)
class LockoutSettings:
    """Lockout knobs (config ``resilience.lockout``), seconds.

    ``base_s`` of ``base·2^n`` (RESIL-3, default 120 = 2 min); ``max_s`` caps it (RESIL-3, default
    1800 = 30 min); ``max_hint_s`` caps an upstream reset hint that is longer than the backoff (not in
    SPEC; OmniRoute honours long upstream resets; default 86400 = 24 h).
    """

    base_s: float = 120.0
    max_s: float = 1800.0
    max_hint_s: float = 86400.0


def next_local_midnight(now: float) -> float:
    """Epoch seconds of the next 00:00 local time after ``now`` (RESIL-3 daily quota; DST-safe)."""
    today = datetime.fromtimestamp(now).date()
    return datetime.combine(today + timedelta(days=1), dtime()).timestamp()


def lockout_cause(err: UpstreamError, now: float = 0.0, max_hint_s: float | None = None) -> str:
    """Cause text of a lock, e.g. ``quota exhausted (402)``, ``daily quota (429)``,
    ``model unavailable (404)``; names the upstream's reset when its hint is longer than
    ``max_hint_s`` (``quota exhausted (403, resets 2026-12-09T00:00:00Z)``, RESIL-13)."""
    if isinstance(err, QuotaExhausted) and err.until_midnight:
        what = "daily quota"
    elif isinstance(err, ModelUnavailable):
        what = "model unavailable"
    else:
        what = "quota exhausted"
    return with_status(what, err, reset_note(err, now, max_hint_s))


class ModelLockout:
    """Per-(provider, connection, model) lockout over a :class:`RoutingState` (RESIL-3); transitions
    are appended to ``log`` when one is given."""

    __slots__ = ("log", "settings", "state")

    def __init__(
        self, state: RoutingState, settings: LockoutSettings | None = None, log: TransitionLog | None = None
    ) -> None:
        self.state = state
        self.settings = settings or LockoutSettings()
        self.log = log

    def _logged(self, change: Change[LockoutRecord | None], now: float) -> Change[LockoutRecord | None]:
        if self.log is not None and change.changed:
            self.log.lockout(change, now)
        return change

    async def on_failure(
        self, key: LockKey, err: UpstreamError, now: float
    ) -> Change[LockoutRecord | None] | None:
        """QuotaExhausted/ModelUnavailable: lock for ``min(base·2^n, max)`` (or until the next local
        midnight for a daily quota); ``None`` for errors this tier does not own."""
        if not isinstance(err, QuotaExhausted | ModelUnavailable):
            return None
        s = self.settings
        daily = isinstance(err, QuotaExhausted) and err.until_midnight
        change = await self.state.lockout_extend(
            key,
            now,
            base_s=s.base_s,
            max_s=s.max_s,
            until=next_local_midnight(now) if daily else None,
            hint_s=err.retry_after_s,
            max_hint_s=s.max_hint_s,
            reason=lockout_cause(err, now, s.max_hint_s),
        )
        return self._logged(change, now)

    async def on_success(self, key: LockKey, now: float) -> Change[LockoutRecord | None]:
        """The model answered on this connection: drop its lock and escalation level."""
        return self._logged(await self.state.lockout_clear(key), now)
