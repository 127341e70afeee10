"""Pure transition rules of the routing-state records (RESIL-1, RESIL-2, RESIL-3).

Each function maps ``(record, now, parameters) -> new record`` with no I/O, so that one atomic state
operation is "read record, apply one of these, write record": the memory backend runs them inside a
single synchronous section, a shared backend inside one transaction (WATCH/MULTI) or a Lua port.
Keeping the rules here, not in the backends, is what makes N replicas behave like one gateway.
"""

from __future__ import annotations

from dataclasses import replace

from omniroute.state.records import (
    BreakerRecord,
    BreakerState,
    CooldownRecord,
    LockKey,
    LockoutRecord,
    ProbeVerdict,
    breaker_view,
)

__all__ = [
    "breaker_on_claim",
    "breaker_on_failure",
    "breaker_on_release",
    "breaker_on_success",
    "cooldown_on_invalid",
    "cooldown_on_limit",
    "cooldown_on_success",
    "cooldown_on_valid",
    "lockout_on_failure",
]

# 2**30 × any sane base already exceeds every cap; bounding the exponent keeps floats finite.
_MAX_EXPONENT = 30


def breaker_on_failure(
    rec: BreakerRecord,
    now: float,
    *,
    failure_threshold: int,
    reset_timeout_s: float,
    max_multiplier: float,
    reason: str,
) -> BreakerRecord:
    """A counted failure (RESIL-1).

    CLOSED: one more consecutive failure; at ``failure_threshold`` it opens for ``reset_timeout_s``.
    HALF_OPEN (stored, or OPEN past its timeout): re-opens with the timeout doubled, capped at
    ``reset_timeout_s × max_multiplier``. OPEN within its timeout: ignored (late results of calls
    sent before it opened say nothing new).
    """
    seen = breaker_view(rec, now)
    if seen is BreakerState.OPEN:
        return rec
    if seen is BreakerState.HALF_OPEN:
        current = max(rec.reset_timeout_s, reset_timeout_s)
        return replace(
            rec,
            state=BreakerState.OPEN,
            failures=rec.failures + 1,
            opened_at=now,
            reset_timeout_s=min(current * 2, reset_timeout_s * max_multiplier),
            probes=(),
            last_error=reason,
        )
    failures = rec.failures + 1
    if failures >= failure_threshold:
        return replace(
            rec,
            state=BreakerState.OPEN,
            failures=failures,
            opened_at=now,
            reset_timeout_s=reset_timeout_s,
            probes=(),
            last_error=reason,
        )
    return replace(rec, failures=failures, last_error=reason)


def breaker_on_success(rec: BreakerRecord, now: float, *, reset_timeout_s: float) -> BreakerRecord:
    """A successful call (RESIL-1): CLOSED resets the count; HALF_OPEN (a probe succeeded) closes and
    resets the timeout to base; OPEN within its timeout is left alone (only a probe closes it)."""
    seen = breaker_view(rec, now)
    if seen is BreakerState.OPEN:
        return rec
    if seen is BreakerState.HALF_OPEN:
        return BreakerRecord(provider=rec.provider, reset_timeout_s=reset_timeout_s)
    if rec.failures == 0:
        return rec
    return replace(rec, failures=0)


def breaker_on_claim(
    rec: BreakerRecord, now: float, *, half_open_probes: int, probe_lease_s: float
) -> tuple[ProbeVerdict, BreakerRecord]:
    """Try to claim a half-open probe slot (RESIL-1). CLOSED admits without a claim; OPEN rejects;
    HALF_OPEN grants a slot while fewer than ``half_open_probes`` unexpired leases exist. A lease
    expires after ``probe_lease_s`` so an abandoned probe cannot wedge the breaker."""
    seen = breaker_view(rec, now)
    if seen is BreakerState.CLOSED:
        return ProbeVerdict.ADMIT, rec
    if seen is BreakerState.OPEN:
        return ProbeVerdict.REJECT, rec
    live = tuple(p for p in rec.probes if p > now)
    if len(live) >= half_open_probes:
        return ProbeVerdict.REJECT, rec
    return ProbeVerdict.PROBE, replace(rec, state=BreakerState.HALF_OPEN, probes=(*live, now + probe_lease_s))


def breaker_on_release(rec: BreakerRecord, now: float) -> BreakerRecord:
    """Give back one probe slot (the probe was abandoned or ended inconclusively, e.g. a 429)."""
    live = sorted(p for p in rec.probes if p > now)
    if not rec.probes:
        return rec
    return replace(rec, probes=tuple(live[1:]))


def cooldown_on_limit(
    rec: CooldownRecord,
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
) -> CooldownRecord:
    """A 429/503/rate-limit/overloaded failure on this connection (RESIL-2).

    ``model`` scopes the cooldown to one model (a rate limit the provider applies per model);
    ``""`` holds the whole connection. A cooldown already holding another model, or the whole
    connection, is widened to the whole connection rather than narrowed.

    wait = ``min(hint_s, max_hint_s)`` when the upstream gave a hint, else
    ``min(base_s·2^backoff_level, max_s)`` and the level goes up by one. The deadline only moves
    later: ``until = max(until, now + wait)``; ``reason`` follows the deadline that wins. A hint longer
    than ``max_hint_s`` keeps the upstream's real reset in ``reset_at`` (RESIL-13).
    """
    level = rec.backoff_level
    reset_at = rec.reset_at
    if hint_s is not None:
        wait = min(max(hint_s, 0.0), max_hint_s)
        if hint_s > max_hint_s:
            reset_at = max(reset_at, now + hint_s)
    else:
        wait = min(base_s * 2 ** min(level, _MAX_EXPONENT), max_s)
        level += 1
    deadline = now + wait
    scope = model if rec.until <= now or rec.model == model else ""
    if deadline > rec.until:
        return replace(
            rec,
            provider=provider,
            until=deadline,
            backoff_level=level,
            reason=reason,
            last_error=last_error,
            reset_at=reset_at,
            model=scope,
        )
    return replace(rec, provider=provider, backoff_level=level, last_error=last_error, model=scope)


def cooldown_on_success(rec: CooldownRecord, model: str | None = None) -> CooldownRecord:
    """A success proves the connection works (RESIL-2): clear the deadline and the backoff level.
    An ``invalid`` mark stays until an operator reset or a token refresh (:func:`cooldown_on_valid`).
    A success of another ``model`` than the one a model-scoped cooldown holds changes nothing."""
    if rec.model and model is not None and model != rec.model:
        return rec
    if rec.until == 0.0 and rec.backoff_level == 0 and not rec.reason and not rec.reset_at:
        return rec
    return replace(rec, until=0.0, backoff_level=0, reason="", reset_at=0.0, model="")


def cooldown_on_invalid(rec: CooldownRecord, now: float, *, provider: str, reason: str) -> CooldownRecord:
    """401/403 auth failure (RESIL-2): the connection is unusable until fixed."""
    since = rec.invalid_since if rec.invalid else now
    return replace(
        rec, provider=provider, invalid=True, invalid_reason=reason, invalid_since=since, last_error=reason
    )


def cooldown_on_valid(rec: CooldownRecord) -> CooldownRecord:
    """Credentials fixed (operator reset or token refresh): clear the ``invalid`` mark."""
    if not rec.invalid:
        return rec
    return replace(rec, invalid=False, invalid_reason="", invalid_since=0.0)


def lockout_on_failure(
    rec: LockoutRecord | None,
    key: LockKey,
    now: float,
    *,
    base_s: float,
    max_s: float,
    until: float | None,
    hint_s: float | None,
    max_hint_s: float,
    reason: str,
) -> LockoutRecord:
    """Quota/permission/model-not-found failure (RESIL-3).

    ``n`` is the previous level when the previous lock ended less than ``max_s`` ago, else 0; the lock
    lasts ``min(base_s·2^n, max_s)``, or longer when the upstream hinted a longer reset (capped at
    ``max_hint_s``). An explicit ``until`` (next local midnight for daily quotas) replaces the
    computed deadline. Deadlines only move later.
    """
    level = rec.level if rec is not None and now - rec.until < max_s else 0
    wait = min(base_s * 2 ** min(level, _MAX_EXPONENT), max_s)
    if hint_s is not None and hint_s > wait:
        wait = min(hint_s, max_hint_s)
    deadline = until if until is not None else now + wait
    old_until = rec.until if rec is not None else 0.0
    if deadline > old_until:
        return LockoutRecord(*key, until=deadline, level=level + 1, reason=reason)
    assert rec is not None
    return replace(rec, level=level + 1)
