"""The filters of the resilience ladder, all with one signature (DESIGN house style 7, RESIL-1…8).

Every filter is ``async (candidates, ctx) -> FilterResult``: the survivors in their original order
plus one :class:`~omniroute.errors.ExclusionRecord` (with a human reason) per candidate removed, ready
for the decision and the RESIL-7 diagnostics. The order used by
:class:`~omniroute.resilience.ladder.Resilience` is breaker → cooldown → lockout → pre-call → probe
claim. Declarative fallback chains (RESIL-4) are not a filter here: the engine applies them while
building candidates. The probe claim runs last so a half-open slot is never claimed for a candidate
a later tier removes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from omniroute.errors import ExclusionRecord
from omniroute.resilience._fmt import until_text
from omniroute.resilience.breaker import CircuitBreaker
from omniroute.resilience.cooldown import ConnectionCooldown, is_failure_cooldown
from omniroute.resilience.lockout import ModelLockout
from omniroute.resilience.precall import prompt_profile
from omniroute.state.records import BreakerState, CooldownRecord, LockKey, ProbeVerdict, breaker_view
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
    "exclusion",
    "lock_key",
]


@dataclass(slots=True)
class LadderContext:
    """Per-request inputs of the filters.

    ``now`` epoch s; ``estimated_prompt_tokens`` from :func:`estimate_prompt_tokens`;
    ``required_capabilities`` from :func:`required_capabilities`; ``min_context`` tokens — after a
    ContextOverflow the engine raises it (:meth:`note_context_overflow`) so only larger windows
    remain (RESIL-5).
    """

    now: float
    estimated_prompt_tokens: int = 0
    required_capabilities: frozenset[str] = frozenset()
    min_context: int = 0

    @classmethod
    def for_request(cls, body: Mapping[str, Any], now: float) -> LadderContext:
        """Context for an OpenAI chat-shaped body at ``now`` (epoch s)."""
        tokens, caps = prompt_profile(body)
        return cls(now, tokens, caps)

    def note_context_overflow(self, context_window: int) -> None:
        """A candidate with ``context_window`` tokens overflowed: from now on require a larger one.
        A window of 0 (unknown) falls back to requiring more than the estimated prompt."""
        floor = context_window + 1 if context_window > 0 else self.estimated_prompt_tokens + 1
        self.min_context = max(self.min_context, floor)


@dataclass(slots=True)
class FilterResult:
    """Output of a filter: ``survivors`` (input order kept), ``exclusions`` (one per removed
    candidate) and ``probes`` — keys (:attr:`Candidate.key`) of survivors admitted as half-open probes
    (RESIL-1); the engine reports each probe's outcome or calls ``release_probe`` if not attempted."""

    survivors: list[Candidate]
    exclusions: list[ExclusionRecord] = field(default_factory=list)
    probes: frozenset[str] = frozenset()


class LadderFilter(Protocol):
    """One tier of the ladder (DESIGN house style 7)."""

    async def __call__(self, candidates: Sequence[Candidate], ctx: LadderContext) -> FilterResult: ...


def exclusion(cand: Candidate, reason: str, until: float | None = None) -> ExclusionRecord:
    """The exclusion record of ``cand`` with ``reason``; ``until``: when it is available again
    (epoch seconds), when known."""
    return ExclusionRecord(
        provider=cand.provider.id,
        model=cand.model.id,
        reason=reason,
        connection=cand.connection.id,
        until=until,
    )


ANY_MODEL = "*"
"""The model of a lock that holds back every model of a connection (an exhausted account)."""


def lock_key(cand: Candidate) -> LockKey:
    """The RESIL-3 lockout key of a candidate."""
    return LockKey(cand.provider.id, cand.connection.id, cand.model.id)


def account_lock_key(cand: Candidate) -> LockKey:
    """The key of a lock on every model of the candidate's connection (:data:`ANY_MODEL`)."""
    return LockKey(cand.provider.id, cand.connection.id, ANY_MODEL)


class BreakerFilter:
    """Tier 1 (RESIL-1): drop candidates whose provider breaker is OPEN, or HALF_OPEN with every probe
    slot taken. Half-open candidates with a free slot pass; :class:`ProbeFilter` claims the slot."""

    __slots__ = ("breaker",)

    def __init__(self, breaker: CircuitBreaker) -> None:
        self.breaker = breaker

    async def __call__(self, candidates: Sequence[Candidate], ctx: LadderContext) -> FilterResult:
        records = await self.breaker.records({c.provider.id for c in candidates})
        slots = self.breaker.settings.half_open_probes
        out = FilterResult([])
        for cand in candidates:
            rec = records[cand.provider.id]
            seen = breaker_view(rec, ctx.now)
            if seen is BreakerState.OPEN and rec.next_probe_at is not None:
                out.exclusions.append(
                    exclusion(
                        cand,
                        f"circuit open until {until_text(rec.next_probe_at, ctx.now)}",
                        rec.next_probe_at,
                    )
                )
            elif seen is BreakerState.HALF_OPEN and rec.probes_in_flight(ctx.now) >= slots:
                out.exclusions.append(exclusion(cand, "circuit half-open: probe in flight"))
            else:
                out.survivors.append(cand)
        return out


class ProbeFilter:
    """Tier 1, second half (RESIL-1): for each candidate whose provider is HALF_OPEN, claim a probe
    slot atomically; the winners pass and are listed in ``probes``, the others are excluded. Of 20
    concurrent requests exactly ``half_open_probes`` get through."""

    __slots__ = ("breaker",)

    def __init__(self, breaker: CircuitBreaker) -> None:
        self.breaker = breaker

    async def __call__(self, candidates: Sequence[Candidate], ctx: LadderContext) -> FilterResult:
        records = await self.breaker.records({c.provider.id for c in candidates})
        out = FilterResult([])
        probes: set[str] = set()
        for cand in candidates:
            if breaker_view(records[cand.provider.id], ctx.now) is BreakerState.CLOSED:
                out.survivors.append(cand)
                continue
            verdict, change = await self.breaker.claim_probe(cand.provider.id, ctx.now)
            if verdict is ProbeVerdict.REJECT:
                rec = change.after
                until: float | None = None
                if breaker_view(rec, ctx.now) is BreakerState.OPEN and rec.next_probe_at is not None:
                    reason = f"circuit open until {until_text(rec.next_probe_at, ctx.now)}"
                    until = rec.next_probe_at
                else:
                    reason = "circuit half-open: probe slot taken"
                out.exclusions.append(exclusion(cand, reason, until))
                continue
            out.survivors.append(cand)
            if verdict is ProbeVerdict.PROBE:
                probes.add(cand.key)
        out.probes = frozenset(probes)
        return out


class CooldownFilter:
    """Tier 2 (RESIL-2, PROV-3): drop inactive connections, connections with invalid credentials,
    connections cooling down, and connections at their ``max_concurrent`` in-flight limit.

    A connection cooling down after a server-side failure (:func:`is_failure_cooldown`) passes while
    its provider's breaker is HALF_OPEN, so the probe that can close the breaker is not held back by
    a cooldown of the same outage (RESIL-11); :class:`ProbeFilter` then admits at most the probe."""

    __slots__ = ("cooldown",)

    def __init__(self, cooldown: ConnectionCooldown) -> None:
        self.cooldown = cooldown

    async def __call__(self, candidates: Sequence[Candidate], ctx: LadderContext) -> FilterResult:
        state = self.cooldown.state
        records = await state.get_cooldowns({c.connection.id for c in candidates})
        capped = {c.connection.id for c in candidates if c.connection.max_concurrent}
        inflight = await state.get_inflight(capped) if capped else {}
        probing = await self._probing(candidates, records, ctx.now)
        out = FilterResult([])
        for cand in candidates:
            conn = cand.connection
            rec = records.get(conn.id)
            reason: str | None = None
            until: float | None = None
            if not conn.is_active:
                reason = "connection inactive"
            elif rec is not None and rec.invalid:
                reason = f"credentials invalid: {rec.invalid_reason}"
            elif rec is not None and rec.holds(cand.model.id, ctx.now) and cand.provider.id not in probing:
                reason = f"{rec.reason or 'cooling down'} until {until_text(rec.until, ctx.now)}"
                until = rec.until
            elif conn.max_concurrent and inflight.get(conn.id, 0) >= conn.max_concurrent:
                reason = f"connection at max_concurrent ({inflight[conn.id]}/{conn.max_concurrent} in flight)"
            if reason is None:
                out.survivors.append(cand)
            else:
                out.exclusions.append(exclusion(cand, reason, until))
        return out

    async def _probing(
        self, candidates: Sequence[Candidate], records: Mapping[str, CooldownRecord], now: float
    ) -> set[str]:
        """Providers whose breaker is HALF_OPEN at ``now`` among those of candidates held back only by
        a failure cooldown; the breaker is read only when such a candidate exists."""
        held = {
            c.provider.id
            for c in candidates
            if (rec := records.get(c.connection.id)) is not None
            and rec.holds(c.model.id, now)
            and is_failure_cooldown(rec)
        }
        if not held:
            return held
        breakers = await self.cooldown.state.get_breakers(held)
        return {p for p in held if breaker_view(breakers[p], now) is BreakerState.HALF_OPEN}


class LockoutFilter:
    """Tier 3 (RESIL-3): drop candidates whose model is locked on their connection."""

    __slots__ = ("lockout",)

    def __init__(self, lockout: ModelLockout) -> None:
        self.lockout = lockout

    async def __call__(self, candidates: Sequence[Candidate], ctx: LadderContext) -> FilterResult:
        keys = [lock_key(c) for c in candidates] + [account_lock_key(c) for c in candidates]
        locks = await self.lockout.state.get_lockouts(keys)
        if not locks:
            return FilterResult(list(candidates))
        out = FilterResult([])
        for cand in candidates:
            rec = locks.get(lock_key(cand))
            if rec is None or rec.until <= ctx.now:
                rec = locks.get(account_lock_key(cand))
            if rec is not None and rec.until > ctx.now:
                until = until_text(rec.until, ctx.now)
                reason = f"model locked on this connection: {rec.reason} until {until}"
                out.exclusions.append(exclusion(cand, reason, rec.until))
            else:
                out.survivors.append(cand)
        return out


class PreCallFilter:
    """Pre-call checks (RESIL-8, RESIL-5).

    Excludes candidates whose known context window is smaller than the estimated prompt, or that
    lack a required capability; if that would remove every candidate, none is removed (fail-open).
    Capabilities declared empty mean "none"; a model whose capabilities are unknown (``None``) is
    kept. After a context overflow, windows below ``ctx.min_context`` are removed unconditionally
    (that limit is a fact from the upstream, not an estimate); unknown windows (0) are kept.
    """

    __slots__ = ()

    async def __call__(self, candidates: Sequence[Candidate], ctx: LadderContext) -> FilterResult:
        if not ctx.min_context and not ctx.required_capabilities:
            est = ctx.estimated_prompt_tokens
            for cand in candidates:
                window = cand.model.context_window
                if window and est > window:
                    break
            else:  # the common case: every window fits (or is unknown), nothing to exclude
                return FilterResult(list(candidates))
        hard_out: list[ExclusionRecord] = []
        kept: list[Candidate] = []
        for cand in candidates:
            window = cand.model.context_window
            if ctx.min_context and 0 < window < ctx.min_context:
                hard_out.append(
                    exclusion(
                        cand,
                        f"context window {window} < {ctx.min_context} tokens needed after context overflow",
                    )
                )
            else:
                kept.append(cand)
        soft_out: list[ExclusionRecord] = []
        survivors: list[Candidate] = []
        for cand in kept:
            reason = self._reason(cand, ctx)
            if reason is None:
                survivors.append(cand)
            else:
                soft_out.append(exclusion(cand, reason))
        if not survivors and kept:  # fail-open (RESIL-8)
            return FilterResult(kept, hard_out)
        return FilterResult(survivors, hard_out + soft_out)

    @staticmethod
    def _reason(cand: Candidate, ctx: LadderContext) -> str | None:
        reasons: list[str] = []
        window = cand.model.context_window
        if window and ctx.estimated_prompt_tokens > window:
            reasons.append(f"context window {window} < estimated prompt {ctx.estimated_prompt_tokens} tokens")
        caps = cand.model.capabilities
        if ctx.required_capabilities and caps is not None:  # None = unknown, never skipped
            missing = sorted(ctx.required_capabilities - caps)
            if missing:
                reasons.append(f"lacks capability: {', '.join(missing)}")
        return "; ".join(reasons) if reasons else None
