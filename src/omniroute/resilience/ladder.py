"""The ladder: the :class:`Resilience` facade the request engine talks to for RESIL-1/2/3/8.

The filters themselves live in :mod:`omniroute.resilience.filters` (re-exported here). This module
owns the wiring — the filter chain (breaker → cooldown → lockout → pre-call → probe claim), the
routing of each attempt's outcome to the tier that owns it, the latency/error windows and quota
snapshots fed by attempts, the transitions log, and the ``GET /api/resilience`` snapshot and
``POST /api/resilience/reset`` operations. All state lives in the injected
:class:`~omniroute.state.base.RoutingState`; times come from the injected clock (epoch seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from omniroute.errors import (
    ContentFiltered,
    ContextOverflow,
    ExclusionRecord,
    ModelUnavailable,
    QuotaExhausted,
    UpstreamBadRequest,
    UpstreamError,
)
from omniroute.resilience._fmt import iso, until_text
from omniroute.resilience.breaker import BreakerSettings, CircuitBreaker
from omniroute.resilience.classify import cooldown_scope
from omniroute.resilience.cooldown import ConnectionCooldown, CooldownSettings
from omniroute.resilience.events import DEFAULT_EVENT_LOG_SIZE, TransitionLog
from omniroute.resilience.filters import (
    ANY_MODEL,
    BreakerFilter,
    CooldownFilter,
    FilterResult,
    LadderContext,
    LadderFilter,
    LockoutFilter,
    PreCallFilter,
    ProbeFilter,
    account_lock_key,
    exclusion,
    lock_key,
)
from omniroute.resilience.hints import parse_quota_headers
from omniroute.resilience.lockout import LockoutSettings, ModelLockout
from omniroute.state.base import Clock, RoutingState
from omniroute.state.records import (
    BreakerRecord,
    BreakerState,
    CooldownRecord,
    LockKey,
    LockoutRecord,
    breaker_view,
)
from omniroute.values import Candidate

__all__ = [
    "BreakerFilter",
    "CooldownFilter",
    "FilterResult",
    "LadderContext",
    "LadderFilter",
    "LockoutFilter",
    "PreCallFilter",
    "ProbeFilter",
    "Resilience",
]

# The request's own fault says nothing about the target's health (RESIL-5).
_NOT_TARGET_FAULT = (UpstreamBadRequest, ContextOverflow, ContentFiltered)
_CLOSED = BreakerState.CLOSED


def _quiet(
    cands: list[Candidate],
    ctx: LadderContext,
    breakers: Mapping[str, BreakerRecord],
    cooldowns: Mapping[str, CooldownRecord],
    locks: Mapping[LockKey, LockoutRecord],
) -> bool:
    """True when no tier can remove a candidate or claim a probe slot at ``ctx.now`` and the
    default pre-call check (prompt vs. context window) removes nobody: every breaker CLOSED, no
    active cooldown, invalid mark or lock, every connection active and uncapped."""
    now = ctx.now
    for b in breakers.values():
        if b.state is not _CLOSED:
            return False
    for c in cooldowns.values():
        if c.invalid or c.until > now:
            return False
    for lk in locks.values():
        if lk.until > now:
            return False
    est = ctx.estimated_prompt_tokens
    for cand in cands:
        conn = cand.connection
        if not conn.is_active or conn.max_concurrent:
            return False
        window = cand.model.context_window
        if window and est > window:
            return False
    return True


class Resilience:
    """Tiers 1–3 and the pre-call checks of the ladder over one :class:`RoutingState`.

    ``filter`` before attempts; ``record_success`` / ``record_failure`` after each attempt;
    ``release_probe`` for a half-open probe that was admitted but never attempted or was abandoned.
    """

    def __init__(
        self,
        state: RoutingState,
        clock: Clock,
        breaker_settings: BreakerSettings | None = None,
        cooldown_settings: CooldownSettings | None = None,
        lockout_settings: LockoutSettings | None = None,
        *,
        event_log_size: int = DEFAULT_EVENT_LOG_SIZE,
    ) -> None:
        self.state = state
        self.clock = clock
        self.log = TransitionLog(event_log_size)
        self.breaker = CircuitBreaker(state, breaker_settings, self.log)
        self.cooldown = ConnectionCooldown(state, cooldown_settings, self.log)
        self.lockout = ModelLockout(state, lockout_settings, self.log)
        self._breaker_filter = BreakerFilter(self.breaker)
        self._cooldown_filter = CooldownFilter(self.cooldown)
        self._lockout_filter = LockoutFilter(self.lockout)
        self._probe_filter = ProbeFilter(self.breaker)
        self._precall = PreCallFilter()
        self.filters: tuple[LadderFilter, ...] = (
            self._breaker_filter,
            self._cooldown_filter,
            self._lockout_filter,
            self._precall,
            self._probe_filter,
        )
        # Probe slots this process claimed and has not yet settled, by candidate key.
        self._probes: dict[str, int] = {}

    # -- before attempts -----------------------------------------------------------------------
    async def filter(self, candidates: Sequence[Candidate], ctx: LadderContext) -> FilterResult:
        """Run every filter in order; survivors keep their order. ``probes`` lists the keys of
        survivors admitted as half-open probes (RESIL-1). Exclusions carry human reasons.

        Fast path (every request pays this): one bulk state read
        (:meth:`~omniroute.state.base.RoutingState.get_ladder_records`) and one pass over the
        candidates; only when some candidate may be removed or needs a probe slot does the full
        chain run, so its result is exactly the chain's."""
        cands = candidates if isinstance(candidates, list) else list(candidates)
        if not cands:
            return FilterResult([], [], frozenset())
        breakers, cooldowns, locks = await self.state.get_ladder_records(
            (c.provider.id for c in cands),
            (c.connection.id for c in cands),
            [*(LockKey(c.provider.id, c.connection.id, c.model.id) for c in cands)]
            + [account_lock_key(c) for c in cands],
        )
        if _quiet(cands, ctx, breakers, cooldowns, locks):
            if ctx.min_context or ctx.required_capabilities:
                fit = await self._precall(cands, ctx)
                return FilterResult(fit.survivors, fit.exclusions, frozenset())
            return FilterResult(list(cands), [], frozenset())
        return await self._chain(cands, ctx)

    async def _chain(self, candidates: Sequence[Candidate], ctx: LadderContext) -> FilterResult:
        """The full filter chain (breaker → cooldown → lockout → pre-call → probe claim)."""
        survivors = list(candidates)
        exclusions: list[ExclusionRecord] = []
        probes: frozenset[str] = frozenset()
        for flt in self.filters:
            if not survivors:
                break
            result = await flt(survivors, ctx)
            survivors = result.survivors
            exclusions.extend(result.exclusions)
            if result.probes:
                probes = probes | result.probes
        for key in probes:
            self._probes[key] = self._probes.get(key, 0) + 1
        return FilterResult(survivors, exclusions, probes)

    async def recheck(self, cand: Candidate, now: float | None = None) -> ExclusionRecord | None:
        """Re-run tiers 1–3 for one candidate that already passed :meth:`filter`, because state may
        have changed during the request (e.g. its connection just cooled down). ``None`` = still
        usable (a half-open probe slot is claimed if now needed); otherwise the exclusion, and any
        probe slot ``cand`` held is given back. ``now`` epoch s, default the clock."""
        ctx = LadderContext(now=self.clock.time() if now is None else now)
        chain: tuple[LadderFilter, ...]
        if cand.key in self._probes:
            rec = (await self.breaker.records([cand.provider.id]))[cand.provider.id]
            if breaker_view(rec, ctx.now) is BreakerState.OPEN and rec.next_probe_at is not None:
                await self.release_probe(cand)
                reason = f"circuit open until {until_text(rec.next_probe_at, ctx.now)}"
                return exclusion(cand, reason, rec.next_probe_at)
            chain = (self._cooldown_filter, self._lockout_filter)
        else:
            chain = (self._breaker_filter, self._cooldown_filter, self._lockout_filter, self._probe_filter)
        for flt in chain:
            result = await flt([cand], ctx)
            if result.exclusions:
                await self.release_probe(cand)
                return result.exclusions[0]
            for key in result.probes:
                self._probes[key] = self._probes.get(key, 0) + 1
        return None

    @property
    def holds_probes(self) -> bool:
        """Whether this process holds any unsettled half-open probe slot (RESIL-1); when not,
        :meth:`release_probe` is a no-op for every candidate."""
        return bool(self._probes)

    # -- after attempts ------------------------------------------------------------------------
    def _settle_probe(self, key: str) -> bool:
        n = self._probes.get(key, 0)
        if n <= 0:
            return False
        if n == 1:
            del self._probes[key]
        else:
            self._probes[key] = n - 1
        return True

    async def record_success(
        self,
        cand: Candidate,
        latency_ms: float,
        ttft_ms: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """An attempt on ``cand`` succeeded after ``latency_ms`` (TTFT ``ttft_ms`` for streams):
        close/reset the breaker (RESIL-1), clear cooldown and backoff (RESIL-2), drop a lock of this
        model on this connection (RESIL-3), record the window sample, and store the quota snapshot
        parsed from the response ``headers``. The tier updates are skipped when the state knows they
        would change nothing (:meth:`~omniroute.state.base.RoutingState.success_is_noop`, the common
        case), so a success then costs one window write."""
        now = self.clock.time()
        key = cand.key
        if self._probes:
            self._settle_probe(key)
        provider, conn = cand.provider.id, cand.connection.id
        state = self.state
        if not (
            state.success_is_noop(provider, conn, cand.model.id)
            or await state.success_resets_nothing(provider, conn, cand.model.id)
        ):  # else nothing to reset
            await self.breaker.on_success(provider, now)
            await self.cooldown.on_success(conn, now, cand.model.id)
            await self.lockout.on_success(LockKey(provider, conn, cand.model.id), now)
            await self.lockout.on_success(LockKey(provider, conn, ANY_MODEL), now)
        await state.record_sample(key, now, latency_ms=latency_ms, ok=True, ttft_ms=ttft_ms)
        if headers:
            snapshot = parse_quota_headers(headers, now)
            if snapshot is not None:
                await self.state.set_quota(cand.connection.id, snapshot)

    async def record_failure(
        self,
        cand: Candidate,
        err: UpstreamError,
        latency_ms: float | None = None,
        *,
        count_breaker: bool = True,
    ) -> None:
        """An attempt on ``cand`` failed with the classified ``err``: the breaker counts it if it is a
        counted failure (RESIL-1), RateLimited/Overloaded cool the connection and AuthInvalid marks
        it invalid (RESIL-2), QuotaExhausted/ModelUnavailable lock the model on the connection
        (RESIL-3). A probe that failed with a non-counted error gives its slot back. The window
        records a failure unless the request itself was at fault (bad request, context overflow,
        content filter). A model the provider does not know (``ModelUnavailable`` for a model its
        catalog entry does not list: a client's typo) leaves no lockout and no window behind, so
        made-up model names cannot grow the routing state. ``count_breaker=False`` leaves the breaker
        out (a 500 held until the request shows whose fault it was,
        :mod:`omniroute.resilience.attribution`; :meth:`count_held` counts it later)."""
        now = self.clock.time()
        was_probe = self._settle_probe(cand.key)
        counted = await self.breaker.on_failure(cand.provider.id, err, now) if count_breaker else None
        if counted is None and was_probe:
            await self.breaker.release_probe(cand.provider.id, now)
        scoped = cand.model.id if cooldown_scope(err, cand.provider.format) == "model" else ""
        await self.cooldown.on_failure(cand.connection.id, cand.provider.id, err, now, scoped)
        if isinstance(err, ModelUnavailable) and cand.provider.model(cand.model.id) is None:
            return
        await self.lockout.on_failure(lock_key(cand), err, now)
        if isinstance(err, QuotaExhausted) and err.account_wide:  # the account, not one model
            await self.lockout.on_failure(account_lock_key(cand), err, now)
        if not isinstance(err, _NOT_TARGET_FAULT):
            await self.state.record_sample(cand.key, now, latency_ms=latency_ms or 0.0, ok=False)

    async def count_held(self, cand: Candidate, err: UpstreamError) -> None:
        """Count a failure held by :meth:`record_failure` (``count_breaker=False``) against its
        provider's breaker after all (the request was not shown to be at fault)."""
        await self.breaker.on_failure(cand.provider.id, err, self.clock.time())

    async def release_probe(self, cand: Candidate) -> None:
        """Give back the half-open probe slot claimed for ``cand`` when it was not attempted or the
        attempt was abandoned (client disconnect). No effect if ``cand`` holds no slot here."""
        if self._settle_probe(cand.key):
            await self.breaker.release_probe(cand.provider.id, self.clock.time())

    async def mark_connection_valid(self, connection_id: str) -> None:
        """Clear the invalid mark of a connection (token refresh succeeded, RESIL-2)."""
        await self.cooldown.mark_valid(connection_id, self.clock.time())

    # -- management API ------------------------------------------------------------------------
    async def snapshot(self) -> dict[str, Any]:
        """JSON for ``GET /api/resilience``: only active or non-default entries.

        ``{"now", "now_iso", "breakers": {provider: {state, failures, opened_at, reset_timeout_s,
        next_probe_at, probes_in_flight, last_error}}, "cooldowns": {connection_id: {provider,
        until, backoff_level, reason, last_error, model, reset_at}}, "invalid": {connection_id:
        {provider, reason, since}}, "lockouts": [{provider, connection, model, until, level, reason}],
        "events": [...]}``.
        Every instant is epoch seconds with an ``*_iso`` twin (UTC). A cooldown's ``reset_at`` is the
        upstream's own reset when its hint was longer than ``cooldown.max_hint_s`` (``until`` is the
        capped end of the cooldown), else ``None`` (RESIL-13).
        """
        now = self.clock.time()
        breakers: dict[str, Any] = {}
        for provider, b in sorted((await self.state.all_breakers()).items()):
            seen = breaker_view(b, now)
            if seen is BreakerState.CLOSED and b.failures == 0:
                continue
            breakers[provider] = {
                "state": seen.value,
                "failures": b.failures,
                "opened_at": b.opened_at,
                "opened_at_iso": iso(b.opened_at),
                "reset_timeout_s": b.reset_timeout_s,
                "next_probe_at": b.next_probe_at,
                "next_probe_at_iso": iso(b.next_probe_at),
                "probes_in_flight": b.probes_in_flight(now),
                "last_error": b.last_error,
            }
        cooldowns: dict[str, Any] = {}
        invalid: dict[str, Any] = {}
        for cid, c in sorted((await self.state.all_cooldowns()).items()):
            if c.until > now or c.backoff_level > 0:
                until = c.until if c.until > now else None
                cooldowns[cid] = {
                    "provider": c.provider,
                    "until": until,
                    "until_iso": iso(until),
                    "backoff_level": c.backoff_level,
                    "reason": c.reason,
                    "last_error": c.last_error,
                    "model": c.model or None,
                    "reset_at": c.reset_at if c.reset_at > now else None,
                    "reset_at_iso": iso(c.reset_at) if c.reset_at > now else None,
                }
            if c.invalid:
                invalid[cid] = {
                    "provider": c.provider,
                    "reason": c.invalid_reason,
                    "since": c.invalid_since,
                    "since_iso": iso(c.invalid_since),
                }
        lockouts = [
            {
                "provider": lk.provider,
                "connection": lk.connection,
                "model": lk.model,
                "until": lk.until,
                "until_iso": iso(lk.until),
                "level": lk.level,
                "reason": lk.reason,
            }
            for lk in sorted(await self.state.all_lockouts(), key=lambda r: (r.until, r.key))
            if lk.until > now
        ]
        return {
            "now": now,
            "now_iso": iso(now),
            "breakers": breakers,
            "cooldowns": cooldowns,
            "invalid": invalid,
            "lockouts": lockouts,
            "events": self.log.to_list(),
        }

    async def reset(self, provider: str | None = None, connection: str | None = None) -> None:
        """``POST /api/resilience/reset``. No arguments: every breaker, cooldown, invalid mark and
        lock. ``provider``: its breaker, the cooldowns of its connections and its locks.
        ``connection``: that connection's cooldown, invalid mark and locks (the provider's breaker is
        left alone). Latency windows are kept."""
        now = self.clock.time()
        if connection is not None:
            await self.state.reset_cooldowns(connection=connection)
            await self.state.reset_lockouts(provider=provider, connection=connection)
            subject = connection if provider is None else f"{provider}@{connection}"
        elif provider is not None:
            await self.state.reset_breakers(provider)
            await self.state.reset_cooldowns(provider=provider)
            await self.state.reset_lockouts(provider=provider)
            self._probes = {k: n for k, n in self._probes.items() if not k.startswith(f"{provider}/")}
            subject = provider
        else:
            await self.state.reset_breakers()
            await self.state.reset_cooldowns()
            await self.state.reset_lockouts()
            self._probes.clear()
            subject = "*"
        self.log.add(now, "reset", subject, "", "", "operator reset")
