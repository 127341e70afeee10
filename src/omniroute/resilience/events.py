"""The resilience transitions log: a bounded, in-process record of breaker, cooldown, credential and
lockout transitions (shown under ``events`` in ``GET /api/resilience``; OPS-3 dashboard).

Owns turning a state :class:`~omniroute.state.records.Change` into a human event. The log is per
process (each replica keeps its own); the state it describes may be shared.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from omniroute.resilience._fmt import iso
from omniroute.state.records import BreakerRecord, BreakerState, Change, CooldownRecord, LockoutRecord

__all__ = ["DEFAULT_EVENT_LOG_SIZE", "TransitionEvent", "TransitionLog"]

DEFAULT_EVENT_LOG_SIZE = 200
"""Events kept (the most recent ones)."""


@dataclass(frozen=True, slots=True)
class TransitionEvent:
    """One transition: ``time`` epoch s, ``kind`` (``breaker``, ``cooldown``, ``credentials``,
    ``lockout``, ``reset``), ``subject`` (provider, connection id or ``provider/model@connection``),
    ``from_``/``to`` states and the ``reason``."""

    time: float
    kind: str
    subject: str
    from_: str
    to: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "time_iso": iso(self.time),
            "kind": self.kind,
            "subject": self.subject,
            "from": self.from_,
            "to": self.to,
            "reason": self.reason,
        }


class TransitionLog:
    """Bounded deque of :class:`TransitionEvent` (oldest dropped first)."""

    __slots__ = ("_events",)

    def __init__(self, maxlen: int = DEFAULT_EVENT_LOG_SIZE) -> None:
        self._events: deque[TransitionEvent] = deque(maxlen=maxlen)

    def add(self, now: float, kind: str, subject: str, from_: str, to: str, reason: str) -> None:
        self._events.append(TransitionEvent(now, kind, subject, from_, to, reason))

    def to_list(self) -> list[dict[str, Any]]:
        """Events oldest first, JSON-ready."""
        return [e.to_dict() for e in self._events]

    def __len__(self) -> int:
        return len(self._events)

    def breaker(self, change: Change[BreakerRecord], now: float) -> None:
        """Log a breaker state change (RESIL-1), if any."""
        b, a = change.before, change.after
        reopened = (
            a.state is BreakerState.OPEN and b.state is BreakerState.OPEN and a.opened_at != b.opened_at
        )
        if b.state is a.state and not reopened:
            return
        from_ = BreakerState.HALF_OPEN.value if reopened else b.state.value
        if a.state is BreakerState.OPEN:
            if from_ == BreakerState.CLOSED.value:
                why = f"{a.failures} consecutive failures (last: {a.last_error})"
            else:
                why = f"probe failed: {a.last_error}"
            reason = f"{why}; next probe in {a.reset_timeout_s:g} s"
        elif a.state is BreakerState.HALF_OPEN:
            reason = "reset timeout elapsed; probe admitted"
        else:
            reason = "probe succeeded"
        self.add(now, "breaker", a.provider, from_, a.state.value, reason)

    def cooldown(self, change: Change[CooldownRecord], now: float) -> None:
        """Log a connection cooldown or credential transition (RESIL-2), if any."""
        b, a = change.before, change.after
        cid = a.connection_id
        if a.invalid != b.invalid:
            if a.invalid:
                self.add(now, "credentials", cid, "valid", "invalid", a.invalid_reason)
            else:
                self.add(now, "credentials", cid, "invalid", "valid", "credentials restored")
        if a.until > b.until and a.until > now:
            from_ = f"cooling until {iso(b.until)}" if b.until > now else "ready"
            self.add(now, "cooldown", cid, from_, f"cooling until {iso(a.until)}", a.reason)
        elif b.until > now and a.until <= now:
            self.add(now, "cooldown", cid, f"cooling until {iso(b.until)}", "ready", "success")

    def lockout(self, change: Change[LockoutRecord | None], now: float) -> None:
        """Log a model lock or unlock (RESIL-3), if any."""
        b, a = change.before, change.after
        if a is not None and (b is None or a.until > b.until) and a.until > now:
            from_ = f"locked until {iso(b.until)}" if b is not None and b.until > now else "unlocked"
            subject = f"{a.provider}/{a.model}@{a.connection}"
            self.add(now, "lockout", subject, from_, f"locked until {iso(a.until)}", a.reason)
        elif a is None and b is not None and b.until > now:
            subject = f"{b.provider}/{b.model}@{b.connection}"
            self.add(now, "lockout", subject, f"locked until {iso(b.until)}", "unlocked", "success")
