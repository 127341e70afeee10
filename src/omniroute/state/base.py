"""The :class:`RoutingState`: everything routing remembers between requests (STORE-1/2), written once
on top of the backend primitives of :mod:`omniroute.state.primitives`.

Owns the domain operations, not their storage: breakers per provider (RESIL-1), cooldown and validity
per connection (RESIL-2), model lockouts per (provider, connection, model) (RESIL-3), quota snapshots
per connection, and strings/JSON for strategies (decks, LKGP); rolling latency/error windows
(AUTO-3), in-flight counts and counters are primitives callers use directly.

Contract: **one method call is one atomic operation** on the shared state — each operation below is
exactly one primitive call, so callers never read, compute and write back across two calls.
Mutating methods apply the pure rules of :mod:`omniroute.state.transitions` through
:meth:`~StatePrimitives.update` and return a :class:`Change` (before/after) so callers can log
transitions without another read. Times are epoch seconds passed in as ``now`` (so tests and the
simulator use a fake clock); TTLs of records are measured by the backend's injected :class:`Clock`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import orjson

from omniroute.clock import Clock, FakeClock, SystemClock
from omniroute.state import transitions as t
from omniroute.state.primitives import BREAKER, COOLDOWN, LOCKOUT, QUOTA, StatePrimitives
from omniroute.state.records import (
    BreakerRecord,
    BreakerState,
    Change,
    CooldownRecord,
    LockKey,
    LockoutRecord,
    ProbeVerdict,
    QuotaSnapshot,
)

__all__ = ["Clock", "FakeClock", "LadderRecords", "RoutingState", "SystemClock"]

R = TypeVar("R")

LadderRecords = tuple[dict[str, BreakerRecord], dict[str, CooldownRecord], dict[LockKey, LockoutRecord]]
"""``(breakers, cooldowns, lockouts)`` as :meth:`RoutingState.get_ladder_records` returns them."""

_CLOSED = BreakerState.CLOSED


def _keep(before: R | None, base: R, after: R) -> R | None:
    """What an update stores: the record read (``before``, possibly absent) when the rule returned
    the record it was given (``base``, the default for an absent one), else the new record."""
    return before if after is base else after


def _cooldown_kept(
    before: CooldownRecord | None, base: CooldownRecord, after: CooldownRecord
) -> CooldownRecord | None:
    """A cooldown record that holds nothing worth keeping is deleted rather than stored."""
    return before if after is base else (None if after.is_default else after)


def _clear_lock(rec: LockoutRecord | None) -> tuple[Change[LockoutRecord | None], None]:
    return Change(rec, None), None


class RoutingState(StatePrimitives):
    """Shared routing state: the domain operations over a backend's primitives. Subclass it and
    implement :class:`StatePrimitives` to add a backend. All methods except :meth:`success_is_noop`
    are awaitable; each is atomic (see module docstring)."""

    __slots__ = ()

    # -- RESIL-1 provider circuit breaker ------------------------------------------------------
    async def _breaker(
        self, provider: str, rule: Callable[[BreakerRecord], BreakerRecord]
    ) -> Change[BreakerRecord]:
        default = BreakerRecord(provider=provider)

        def step(rec: BreakerRecord | None) -> tuple[Change[BreakerRecord], BreakerRecord | None]:
            base = default if rec is None else rec
            after = rule(base)
            return Change(base, after), _keep(rec, base, after)

        return await self.update(BREAKER, provider, step)

    async def get_breakers(self, providers: Iterable[str]) -> dict[str, BreakerRecord]:
        """Breaker records for ``providers`` (a default CLOSED record for unknown ones)."""
        ids = list(providers)
        (stored,) = await self.read((BREAKER, ids))
        return {p: stored.get(p) or BreakerRecord(provider=p) for p in ids}

    async def all_breakers(self) -> dict[str, BreakerRecord]:
        """Every stored breaker record, by provider id."""
        return await self.scan(BREAKER)

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

        def rule(rec: BreakerRecord) -> BreakerRecord:
            return t.breaker_on_failure(
                rec,
                now,
                failure_threshold=failure_threshold,
                reset_timeout_s=reset_timeout_s,
                max_multiplier=max_multiplier,
                reason=reason,
            )

        return await self._breaker(provider, rule)

    async def breaker_success(
        self, provider: str, now: float, *, reset_timeout_s: float
    ) -> Change[BreakerRecord]:
        """Record one success (:func:`~omniroute.state.transitions.breaker_on_success`)."""
        return await self._breaker(
            provider, lambda rec: t.breaker_on_success(rec, now, reset_timeout_s=reset_timeout_s)
        )

    async def breaker_claim_probe(
        self, provider: str, now: float, *, half_open_probes: int, probe_lease_s: float
    ) -> tuple[ProbeVerdict, Change[BreakerRecord]]:
        """Atomically claim a half-open probe slot: of N concurrent claims for one slot exactly one
        gets ``PROBE`` (:func:`~omniroute.state.transitions.breaker_on_claim`)."""
        default = BreakerRecord(provider=provider)

        def step(
            rec: BreakerRecord | None,
        ) -> tuple[tuple[ProbeVerdict, Change[BreakerRecord]], BreakerRecord | None]:
            base = default if rec is None else rec
            verdict, after = t.breaker_on_claim(
                base, now, half_open_probes=half_open_probes, probe_lease_s=probe_lease_s
            )
            return (verdict, Change(base, after)), _keep(rec, base, after)

        return await self.update(BREAKER, provider, step)

    async def breaker_release_probe(self, provider: str, now: float) -> Change[BreakerRecord]:
        """Give one probe slot back (abandoned or inconclusive probe)."""
        return await self._breaker(provider, lambda rec: t.breaker_on_release(rec, now))

    async def reset_breakers(self, provider: str | None = None) -> None:
        """Forget the breaker of ``provider`` (all when ``None``): back to CLOSED, count 0."""
        await self.remove(BREAKER, {} if provider is None else {"provider": provider})

    # -- RESIL-2 connection cooldown and validity ----------------------------------------------
    async def _cooldown(
        self, connection_id: str, rule: Callable[[CooldownRecord], CooldownRecord]
    ) -> Change[CooldownRecord]:
        default = CooldownRecord(connection_id=connection_id)

        def step(rec: CooldownRecord | None) -> tuple[Change[CooldownRecord], CooldownRecord | None]:
            base = default if rec is None else rec
            after = rule(base)
            return Change(base, after), _cooldown_kept(rec, base, after)

        return await self.update(COOLDOWN, connection_id, step)

    async def get_cooldowns(self, connection_ids: Iterable[str]) -> dict[str, CooldownRecord]:
        """Cooldown records of ``connection_ids`` (only those that have one)."""
        (found,) = await self.read((COOLDOWN, connection_ids))
        return found

    async def all_cooldowns(self) -> dict[str, CooldownRecord]:
        """Every stored cooldown record, by connection id."""
        return await self.scan(COOLDOWN)

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
        model: str = "",
    ) -> Change[CooldownRecord]:
        """Cool the connection down, or only ``model`` on it
        (:func:`~omniroute.state.transitions.cooldown_on_limit`); the deadline only moves later."""

        def rule(rec: CooldownRecord) -> CooldownRecord:
            return t.cooldown_on_limit(
                rec,
                now,
                provider=provider,
                hint_s=hint_s,
                base_s=base_s,
                max_s=max_s,
                max_hint_s=max_hint_s,
                reason=reason,
                last_error=last_error,
                model=model,
            )

        return await self._cooldown(connection_id, rule)

    async def cooldown_success(self, connection_id: str, model: str | None = None) -> Change[CooldownRecord]:
        """Clear deadline and backoff level after a success of ``model`` (the ``invalid`` mark stays;
        a cooldown that holds another model stays)."""
        return await self._cooldown(connection_id, lambda rec: t.cooldown_on_success(rec, model))

    async def mark_invalid(
        self, connection_id: str, now: float, *, provider: str, reason: str
    ) -> Change[CooldownRecord]:
        """Mark the connection's credentials invalid (401/403) with ``reason``."""
        return await self._cooldown(
            connection_id, lambda rec: t.cooldown_on_invalid(rec, now, provider=provider, reason=reason)
        )

    async def mark_valid(self, connection_id: str) -> Change[CooldownRecord]:
        """Clear the ``invalid`` mark (operator fix or token refresh)."""
        return await self._cooldown(connection_id, t.cooldown_on_valid)

    async def reset_cooldowns(self, *, connection: str | None = None, provider: str | None = None) -> None:
        """Forget cooldown, backoff and invalid marks of one connection, of every connection of one
        provider, or of all connections when both are ``None``."""
        match: dict[str, str] = {}
        if connection is not None:
            match["connection_id"] = connection
        if provider is not None:
            match["provider"] = provider
        await self.remove(COOLDOWN, match)

    # -- RESIL-3 model lockout -----------------------------------------------------------------
    async def get_lockouts(self, keys: Iterable[LockKey]) -> dict[LockKey, LockoutRecord]:
        """Lockout records for ``keys`` (only those that have one; may be expired)."""
        (found,) = await self.read((LOCKOUT, keys))
        return found

    async def all_lockouts(self) -> list[LockoutRecord]:
        """Every stored lockout record."""
        return list((await self.scan(LOCKOUT)).values())

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
        key = LockKey(*key)

        def step(rec: LockoutRecord | None) -> tuple[Change[LockoutRecord | None], LockoutRecord]:
            after = t.lockout_on_failure(
                rec,
                key,
                now,
                base_s=base_s,
                max_s=max_s,
                until=until,
                hint_s=hint_s,
                max_hint_s=max_hint_s,
                reason=reason,
            )
            return Change(rec, after), after

        return await self.update(LOCKOUT, key, step)

    async def lockout_clear(self, key: LockKey) -> Change[LockoutRecord | None]:
        """Remove the lock and its escalation level (the model answered successfully)."""
        return await self.update(LOCKOUT, LockKey(*key), _clear_lock)

    async def reset_lockouts(self, *, provider: str | None = None, connection: str | None = None) -> None:
        """Remove locks matching ``provider`` and/or ``connection`` (all when both are ``None``)."""
        match: dict[str, str] = {}
        if provider is not None:
            match["provider"] = provider
        if connection is not None:
            match["connection"] = connection
        await self.remove(LOCKOUT, match)

    # -- bulk read of the ladder (RESIL-1/2/3) --------------------------------------------------
    async def get_ladder_records(
        self, providers: Iterable[str], connection_ids: Iterable[str], lock_keys: Iterable[LockKey]
    ) -> LadderRecords:
        """``(breakers, cooldowns, lockouts)`` of the given ids in one read: **stored** breaker records
        only (a provider absent from the map is CLOSED with no failures), cooldown and lockout records
        only for ids that have one (lockouts may be expired). Duplicated ids are fine, and an argument
        whose kind holds no record may not be iterated (so lazy iterables cost nothing then). The
        per-request ladder filter (:meth:`Resilience.filter`) reads through this."""
        tables = self.local
        if tables is None:
            b, c, lk = await self.read((BREAKER, providers), (COOLDOWN, connection_ids), (LOCKOUT, lock_keys))
            return b, c, lk
        # in-process records: read them right here (every request pays this read)
        breakers, cooldowns, locks, _ = tables
        return (
            {p: rb for p in providers if (rb := breakers.get(p)) is not None} if breakers else {},
            {i: rc for i in connection_ids if (rc := cooldowns.get(i)) is not None} if cooldowns else {},
            {k: rl for k in lock_keys if (rl := locks.get(k)) is not None} if locks else {},
        )

    def success_is_noop(self, provider: str, connection_id: str, model: str) -> bool:
        """``True`` when a success on ``(provider, connection_id, model)`` is known to change no
        breaker, cooldown or lockout record right now (RESIL-1/2/3): no such record is held, or only
        a CLOSED breaker with no failures. Synchronous and cheap (it runs after every successful
        attempt); a backend that cannot tell without a round trip (:attr:`local` is ``None``) answers
        ``False`` and callers then make the atomic updates (:meth:`breaker_success`,
        :meth:`cooldown_success`, :meth:`lockout_clear`), whose result is the same in the no-op case."""
        tables = self.local
        if tables is None:
            return False
        breakers, cooldowns, locks, _ = tables
        return _resets_nothing(
            breakers.get(provider),
            cooldowns.get(connection_id),
            model,
            bool(locks)
            and (
                LockKey(provider, connection_id, model) in locks
                or LockKey(provider, connection_id, "*") in locks
            ),
        )

    async def success_resets_nothing(self, provider: str, connection_id: str, model: str) -> bool:
        """:meth:`success_is_noop`, answered with one read of the three records when the backend
        cannot tell from this process (:attr:`local` is ``None``, e.g. Redis): one round trip
        instead of one per record kind when nothing is to be reset, the common case (PERF-2). A
        ``False`` means: make the atomic updates, whose result is the same in the no-op case."""
        if self.local is not None:
            return self.success_is_noop(provider, connection_id, model)
        keys = (LockKey(provider, connection_id, model), LockKey(provider, connection_id, "*"))
        breakers, cooldowns, locks = await self.get_ladder_records((provider,), (connection_id,), keys)
        return _resets_nothing(
            breakers.get(provider), cooldowns.get(connection_id), model, any(k in locks for k in keys)
        )

    # -- quota snapshots -----------------------------------------------------------------------
    async def set_quota(self, connection_id: str, snapshot: QuotaSnapshot) -> None:
        """Store the latest quota snapshot of a connection (replaces the previous one)."""
        await self.put(QUOTA, connection_id, snapshot)

    async def get_quota(self, connection_id: str) -> QuotaSnapshot | None:
        """The latest quota snapshot of a connection, or ``None``."""
        (found,) = await self.read((QUOTA, (connection_id,)))
        return found.get(connection_id)

    async def get_quotas(self, connection_ids: Iterable[str]) -> dict[str, QuotaSnapshot]:
        """Latest quota snapshots of ``connection_ids`` in one read (only those that have one)."""
        (found,) = await self.read((QUOTA, connection_ids))
        return found

    # -- strings and JSON for strategies ---------------------------------------------------------
    async def get_record(self, key: str) -> str | None:
        """String record ``key``, or ``None`` when absent or expired."""
        value = await self.get_bytes(key)
        return None if value is None else value.decode()

    async def set_record(self, key: str, value: str, ttl_s: float | None = None) -> None:
        """Store string record ``key``; it expires after ``ttl_s`` seconds when given."""
        await self.set_bytes(key, value.encode(), ttl_s)

    async def get_json(self, key: str) -> Any | None:
        """JSON record ``key`` decoded (a fresh copy), or ``None`` when absent, expired or not JSON."""
        value = await self.get_bytes(key)
        if value is None:
            return None
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None

    async def set_json(self, key: str, value: Any, ttl_s: float | None = None) -> None:
        """Store a JSON-serialisable ``value`` under ``key``, optionally expiring after ``ttl_s``."""
        await self.set_bytes(key, orjson.dumps(value), ttl_s)


def _resets_nothing(
    rb: BreakerRecord | None, rc: CooldownRecord | None, model: str, locked: bool
) -> bool:
    """A success of ``model`` changes no record: the breaker ``rb`` is absent or CLOSED with no
    failures, the cooldown ``rc`` is absent or unchanged by that success, and no lockout of the model
    (or of the whole connection) is held (``locked``)."""
    if rb is not None and (rb.failures or rb.state is not _CLOSED):
        return False
    if rc is not None and t.cooldown_on_success(rc, model) is not rc:
        return False
    return not locked
