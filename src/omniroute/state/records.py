"""The value records that routing state stores (RESIL-1/2/3, STORE-2), immutable and JSON-ready.

Every record is a frozen dataclass so a backend can hand it out without copying; ``to_dict`` /
``from_dict`` give the flat JSON form a shared backend (Redis) stores. Times are epoch seconds,
latencies milliseconds. The rules that change records live in :mod:`omniroute.state.transitions`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = [
    "BreakerRecord",
    "BreakerState",
    "Change",
    "CooldownRecord",
    "LockKey",
    "LockoutRecord",
    "ProbeVerdict",
    "QuotaDimension",
    "QuotaSnapshot",
    "WindowStats",
    "breaker_view",
]


class BreakerState(StrEnum):
    """Provider circuit-breaker states (RESIL-1)."""

    CLOSED = "CLOSED"
    OPEN = "OPEN"
    HALF_OPEN = "HALF_OPEN"


class ProbeVerdict(StrEnum):
    """Answer of an atomic probe claim (RESIL-1): ``ADMIT`` (breaker closed, no probe needed),
    ``PROBE`` (a half-open probe slot was claimed for this attempt) or ``REJECT``."""

    ADMIT = "admit"
    PROBE = "probe"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class BreakerRecord:
    """One provider's breaker (RESIL-1).

    ``failures`` counts consecutive counted failures; ``opened_at`` is when it last opened (epoch s);
    ``reset_timeout_s`` is the current OPEN duration (base, doubled per re-open, capped);
    ``probes`` holds the lease deadlines (epoch s) of half-open probes in flight; ``last_error``
    is the failure that last moved it.
    """

    provider: str
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    opened_at: float | None = None
    reset_timeout_s: float = 0.0
    probes: tuple[float, ...] = ()
    last_error: str = ""

    @property
    def next_probe_at(self) -> float | None:
        """When an OPEN breaker admits its first probe (epoch s); ``None`` unless OPEN."""
        if self.state is not BreakerState.OPEN or self.opened_at is None:
            return None
        return self.opened_at + self.reset_timeout_s

    def probes_in_flight(self, now: float) -> int:
        """Probe leases not yet expired at ``now``."""
        return sum(1 for p in self.probes if p > now)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["state"] = self.state.value
        d["probes"] = list(self.probes)
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> BreakerRecord:
        return BreakerRecord(
            provider=str(d["provider"]),
            state=BreakerState(d.get("state", "CLOSED")),
            failures=int(d.get("failures", 0)),
            opened_at=None if d.get("opened_at") is None else float(d["opened_at"]),
            reset_timeout_s=float(d.get("reset_timeout_s", 0.0)),
            probes=tuple(float(p) for p in d.get("probes", ())),
            last_error=str(d.get("last_error", "")),
        )


def breaker_view(rec: BreakerRecord, now: float) -> BreakerState:
    """The state a reader sees at ``now``: an OPEN breaker whose reset timeout elapsed is HALF_OPEN
    (the stored state moves when the first probe is claimed) (RESIL-1)."""
    if rec.state is BreakerState.OPEN:
        nxt = rec.next_probe_at
        if nxt is not None and now >= nxt:
            return BreakerState.HALF_OPEN
    return rec.state


@dataclass(frozen=True, slots=True)
class CooldownRecord:
    """One connection's cooldown and validity (RESIL-2, PROV-3 runtime state).

    ``until`` is ``rate_limited_until`` (epoch s, 0 = none); ``reason`` names the cause of the
    current deadline (e.g. ``rate limited (429)``); ``invalid`` marks dead credentials with
    ``invalid_reason`` since ``invalid_since``; ``last_error`` is the last failure text recorded;
    ``reset_at`` (epoch s, 0 = none) is the upstream's own reset when its wait hint was longer than
    the cooldown cap, so ``until`` is earlier than the real reset (RESIL-13); ``model`` names the one
    model the cooldown holds back when it was caused by a rate limit scoped to a model
    (:func:`omniroute.resilience.classify.cooldown_scope`), ``""`` when it holds the whole connection.
    """

    connection_id: str
    provider: str = ""
    until: float = 0.0
    backoff_level: int = 0
    reason: str = ""
    invalid: bool = False
    invalid_reason: str = ""
    invalid_since: float = 0.0
    last_error: str = ""
    reset_at: float = 0.0
    model: str = ""

    def holds(self, model: str, now: float) -> bool:
        """True while the cooldown holds back ``model`` on this connection at ``now`` (epoch s)."""
        return self.until > now and (not self.model or self.model == model)

    def cooling(self, now: float) -> bool:
        """True while ``until`` is in the future."""
        return self.until > now

    @property
    def is_default(self) -> bool:
        """Nothing worth storing or showing."""
        return self.until == 0.0 and self.backoff_level == 0 and not self.invalid and not self.last_error

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> CooldownRecord:
        return CooldownRecord(
            connection_id=str(d["connection_id"]),
            provider=str(d.get("provider", "")),
            until=float(d.get("until", 0.0)),
            backoff_level=int(d.get("backoff_level", 0)),
            reason=str(d.get("reason", "")),
            invalid=bool(d.get("invalid", False)),
            invalid_reason=str(d.get("invalid_reason", "")),
            invalid_since=float(d.get("invalid_since", 0.0)),
            last_error=str(d.get("last_error", "")),
            reset_at=float(d.get("reset_at", 0.0)),
            model=str(d.get("model", "")),
        )


class LockKey(NamedTuple):
    """Key of a model lockout: ``(provider, connection, model)`` (RESIL-3)."""

    provider: str
    connection: str
    model: str

    def as_str(self) -> str:
        """Flat form ``provider\\x1fconnection\\x1fmodel`` for key-value backends."""
        return "\x1f".join(self)


@dataclass(frozen=True, slots=True)
class LockoutRecord:
    """A model locked on one connection until ``until`` (epoch s); ``level`` is the ``n`` of
    ``base·2^n`` for the next lock; ``reason`` e.g. ``quota exhausted (402)`` (RESIL-3)."""

    provider: str
    connection: str
    model: str
    until: float = 0.0
    level: int = 0
    reason: str = ""

    @property
    def key(self) -> LockKey:
        return LockKey(self.provider, self.connection, self.model)

    def active(self, now: float) -> bool:
        return self.until > now

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> LockoutRecord:
        return LockoutRecord(
            provider=str(d["provider"]),
            connection=str(d["connection"]),
            model=str(d["model"]),
            until=float(d.get("until", 0.0)),
            level=int(d.get("level", 0)),
            reason=str(d.get("reason", "")),
        )


@dataclass(frozen=True, slots=True)
class QuotaDimension:
    """One rate-limit dimension reported by an upstream (``requests``, ``tokens``, ``input-tokens``…):
    ``remaining`` and ``limit`` in its own unit, ``reset_at`` epoch s when known."""

    name: str
    remaining: float | None = None
    limit: float | None = None
    reset_at: float | None = None

    @property
    def fraction(self) -> float | None:
        """``remaining / limit`` clamped to [0, 1]; ``None`` without both numbers."""
        if self.remaining is None or not self.limit or self.limit <= 0:
            return None
        return max(0.0, min(1.0, self.remaining / self.limit))


@dataclass(frozen=True, slots=True)
class QuotaSnapshot:
    """Remaining upstream quota of one connection, read from response headers (AUTO-3 ``quota``,
    COMBO-3 reset-aware/reset-window/headroom).

    ``remaining_fraction`` is the minimum over dimensions (0 = exhausted, 1 = untouched);
    ``reset_at`` is when the binding dimension resets (epoch s) or ``None``; ``observed_at`` epoch s.
    """

    remaining_fraction: float
    reset_at: float | None
    observed_at: float
    dimensions: tuple[QuotaDimension, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "remaining_fraction": self.remaining_fraction,
            "reset_at": self.reset_at,
            "observed_at": self.observed_at,
            "dimensions": [asdict(d) for d in self.dimensions],
        }

    @staticmethod
    def from_dict(d: dict[str, Any]) -> QuotaSnapshot:
        return QuotaSnapshot(
            remaining_fraction=float(d["remaining_fraction"]),
            reset_at=None if d.get("reset_at") is None else float(d["reset_at"]),
            observed_at=float(d.get("observed_at", 0.0)),
            dimensions=tuple(QuotaDimension(**x) for x in d.get("dimensions", ())),
        )


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Rolling statistics over the last N attempts of one candidate (AUTO-3 latencyInv, stability,
    reliability; AUTO-5 latency/sla-aware). Latencies in ms over successful samples only; ``None``
    when there is no successful sample. ``error_rate`` is failures / ``count`` (0 when empty)."""

    count: int = 0
    error_rate: float = 0.0
    mean_ms: float | None = None
    p95_ms: float | None = None
    stddev_ms: float | None = None
    p95_ttft_ms: float | None = None
    last_at: float | None = None


R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Change(Generic[R]):
    """What one atomic update did: the record ``before`` and ``after`` it (equal when nothing
    changed). Callers log transitions from it without a second read."""

    before: R
    after: R

    @property
    def changed(self) -> bool:
        return self.before != self.after
