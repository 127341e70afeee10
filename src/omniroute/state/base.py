"""The :class:`RoutingState` protocol: everything routing remembers between requests (STORE-1/2).

Owns the contract, not an implementation: breakers per provider (RESIL-1), cooldown and validity
per connection (RESIL-2), model lockouts per (provider, connection, model) (RESIL-3), rolling
latency/error windows per candidate key (AUTO-3), quota snapshots per connection, in-flight counts per
connection, and generic counters/records/JSON for strategies (round-robin counters, decks, LKGP).

Contract for every backend: **one method call is one atomic operation** on the shared state —
callers never read, compute and write back across two calls. Mutating methods apply the pure rules of
:mod:`omniroute.state.transitions` atomically and return a :class:`Change` (before/after) so callers
can log transitions without another read. Times are epoch seconds passed in as ``now`` (so tests
and the simulator use a fake clock); TTLs of generic records are measured by the backend's own clock
(the injected :class:`Clock` in memory, the server clock in Redis).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from omniroute.clock import Clock, FakeClock, SystemClock
from omniroute.state.records import (
    BreakerRecord,
    Change,
    CooldownRecord,
    LockKey,
    LockoutRecord,
    ProbeVerdict,
    QuotaSnapshot,
    WindowStats,
)

__all__ = ["Clock", "FakeClock", "RoutingState", "SystemClock"]


class RoutingState(Protocol):
    """Shared routing state. All methods are coroutines; each is atomic (see module docstring)."""

    # -- RESIL-1 provider circuit breaker ------------------------------------------------------
    async def get_breakers(self, providers: Iterable[str]) -> dict[str, BreakerRecord]:
        """Breaker records for ``providers`` (a default CLOSED record for unknown ones)."""
        ...

    async def all_breakers(self) -> dict[str, BreakerRecord]:
        """Every stored breaker record, by provider id."""
        ...

    async def breaker_failure(
        self,
        provider: str,
        now: float,
        *,
        failure_threshold: int,
        reset_timeout_s: float,
        max_multiplier: float,
        reason: str,
    ) -> Change[BreakerRecord]:
        """Record one counted failure (:func:`~omniroute.state.transitions.breaker_on_failure`)."""
        ...

    async def breaker_success(
        self, provider: str, now: float, *, reset_timeout_s: float
    ) -> Change[BreakerRecord]:
        """Record one success (:func:`~omniroute.state.transitions.breaker_on_success`)."""
        ...

    async def breaker_claim_probe(
        self, provider: str, now: float, *, half_open_probes: int, probe_lease_s: float
    ) -> tuple[ProbeVerdict, Change[BreakerRecord]]:
        """Atomically claim a half-open probe slot: of N concurrent claims for one slot exactly one
        gets ``PROBE`` (:func:`~omniroute.state.transitions.breaker_on_claim`)."""
        ...

    async def breaker_release_probe(self, provider: str, now: float) -> Change[BreakerRecord]:
        """Give one probe slot back (abandoned or inconclusive probe)."""
        ...

    async def reset_breakers(self, provider: str | None = None) -> None:
        """Forget the breaker of ``provider`` (all when ``None``): back to CLOSED, count 0."""
        ...

    # -- RESIL-2 connection cooldown and validity ----------------------------------------------
    async def get_cooldowns(self, connection_ids: Iterable[str]) -> dict[str, CooldownRecord]:
        """Cooldown records of ``connection_ids`` (only those that have one)."""
        ...

    async def all_cooldowns(self) -> dict[str, CooldownRecord]:
        """Every stored cooldown record, by connection id."""
        ...

    async def cooldown_extend(
        self,
        connection_id: str,
        now: float,
        *,
        provider: str,
        hint_s: float | None,
        base_s: float,
        max_s: float,
        max_hint_s: float,
        reason: str,
        last_error: str,
    ) -> Change[CooldownRecord]:
        """Cool the connection down (:func:`~omniroute.state.transitions.cooldown_on_limit`);
        the deadline only moves later."""
        ...

    async def cooldown_success(self, connection_id: str) -> Change[CooldownRecord]:
        """Clear deadline and backoff level after a success (the ``invalid`` mark stays)."""
        ...

    async def mark_invalid(
        self, connection_id: str, now: float, *, provider: str, reason: str
    ) -> Change[CooldownRecord]:
        """Mark the connection's credentials invalid (401/403) with ``reason``."""
        ...

    async def mark_valid(self, connection_id: str) -> Change[CooldownRecord]:
        """Clear the ``invalid`` mark (operator fix or token refresh)."""
        ...

    async def reset_cooldowns(self, *, connection: str | None = None, provider: str | None = None) -> None:
        """Forget cooldown, backoff and invalid marks of one connection, of every connection of one
        provider, or of all connections when both are ``None``."""
        ...

    # -- RESIL-3 model lockout -----------------------------------------------------------------
    async def get_lockouts(self, keys: Iterable[LockKey]) -> dict[LockKey, LockoutRecord]:
        """Lockout records for ``keys`` (only those that have one; may be expired)."""
        ...

    async def all_lockouts(self) -> list[LockoutRecord]:
        """Every stored lockout record."""
        ...

    async def lockout_extend(
        self,
        key: LockKey,
        now: float,
        *,
        base_s: float,
        max_s: float,
        until: float | None,
        hint_s: float | None,
        max_hint_s: float,
        reason: str,
    ) -> Change[LockoutRecord | None]:
        """Lock (or extend the lock of) a model on a connection
        (:func:`~omniroute.state.transitions.lockout_on_failure`)."""
        ...

    async def lockout_clear(self, key: LockKey) -> Change[LockoutRecord | None]:
        """Remove the lock and its escalation level (the model answered successfully)."""
        ...

    async def reset_lockouts(self, *, provider: str | None = None, connection: str | None = None) -> None:
        """Remove locks matching ``provider`` and/or ``connection`` (all when both are ``None``)."""
        ...

    # -- bulk read of the ladder (RESIL-1/2/3) --------------------------------------------------
    async def get_ladder_records(
        self, providers: Iterable[str], connection_ids: Iterable[str], lock_keys: Iterable[LockKey]
    ) -> tuple[dict[str, BreakerRecord], dict[str, CooldownRecord], dict[LockKey, LockoutRecord]]:
        """``(breakers, cooldowns, lockouts)`` of the given ids in one read: **stored** breaker records
        only (a provider absent from the map is CLOSED with no failures), cooldown and lockout records
        only for ids that have one (lockouts may be expired). Duplicated ids are fine. A backend may
        skip iterating an argument whose kind it has no record of (so lazy iterables cost nothing
        then); the per-request ladder filter (:meth:`Resilience.filter`) reads through this."""
        ...

    def success_is_noop(self, provider: str, connection_id: str, model: str) -> bool:
        """``True`` when a success on ``(provider, connection_id, model)`` is known to change no
        breaker, cooldown or lockout record right now (RESIL-1/2/3): no such record is held, or only
        a CLOSED breaker with no failures. Synchronous and cheap (it runs after every successful
        attempt); a backend that cannot tell without a round trip answers ``False`` and callers then
        make the atomic updates (:meth:`breaker_success`, :meth:`cooldown_success`,
        :meth:`lockout_clear`), whose result is the same in the no-op case."""
        ...

    # -- latency / error windows (AUTO-3, AUTO-5) ------------------------------------------------
    async def record_sample(
        self, key: str, now: float, *, latency_ms: float, ok: bool, ttft_ms: float | None = None
    ) -> None:
        """Append one attempt outcome to the rolling window (last N samples) of candidate ``key``."""
        ...

    async def get_window_stats(self, keys: Iterable[str]) -> dict[str, WindowStats]:
        """Window statistics for every key in ``keys`` (empty stats for unknown keys)."""
        ...

    # -- quota snapshots -----------------------------------------------------------------------
    async def set_quota(self, connection_id: str, snapshot: QuotaSnapshot) -> None:
        """Store the latest quota snapshot of a connection (replaces the previous one)."""
        ...

    async def get_quota(self, connection_id: str) -> QuotaSnapshot | None:
        """The latest quota snapshot of a connection, or ``None``."""
        ...

    async def get_quotas(self, connection_ids: Iterable[str]) -> dict[str, QuotaSnapshot]:
        """Latest quota snapshots of ``connection_ids`` in one read (only those that have one)."""
        ...

    # -- in-flight counts (AUTO-3 connectionDensity, PROV-3 max_concurrent) ----------------------
    async def incr_inflight(self, connection_id: str) -> int:
        """One more attempt in flight on the connection; returns the new count."""
        ...

    async def decr_inflight(self, connection_id: str) -> int:
        """One attempt fewer (never below 0); returns the new count."""
        ...

    async def get_inflight(self, connection_ids: Iterable[str]) -> dict[str, int]:
        """In-flight counts of ``connection_ids`` (0 when unknown)."""
        ...

    # -- generic counters and records for strategies ------------------------------------------
    async def incr_counter(self, key: str, amount: int = 1) -> int:
        """Atomically add ``amount`` to integer counter ``key`` (created at 0); returns the new value."""
        ...

    async def get_counter(self, key: str) -> int:
        """Current value of counter ``key`` (0 when absent)."""
        ...

    async def get_record(self, key: str) -> str | None:
        """String record ``key``, or ``None`` when absent or expired."""
        ...

    async def set_record(self, key: str, value: str, ttl_s: float | None = None) -> None:
        """Store string record ``key``; it expires after ``ttl_s`` seconds when given."""
        ...

    async def delete_record(self, key: str) -> None:
        """Remove record ``key`` (string or JSON); no error when absent."""
        ...

    async def get_json(self, key: str) -> Any | None:
        """JSON record ``key`` decoded (a fresh copy), or ``None`` when absent or expired."""
        ...

    async def set_json(self, key: str, value: Any, ttl_s: float | None = None) -> None:
        """Store a JSON-serialisable ``value`` under ``key``, optionally expiring after ``ttl_s``."""
        ...
