"""Tier 2 of the ladder: connection cooldown and invalid credentials (RESIL-2).

Owns which failures cool a connection down (rate limits, overload) or mark it invalid (auth), the
cause text shown in exclusions, and the calls into :class:`~omniroute.state.base.RoutingState`.
Other connections of the same provider are untouched; a rate limit the provider applies per model
cools only that model on the connection (:func:`~omniroute.resilience.classify.cooldown_scope`).
"""

from __future__ import annotations

from dataclasses import dataclass

from omniroute.errors import AuthInvalid, Overloaded, RateLimited, UpstreamError
from omniroute.resilience._fmt import reset_note, short, with_status
from omniroute.resilience.events import TransitionLog
from omniroute.state.base import RoutingState
from omniroute.state.records import Change, CooldownRecord

__all__ = ["ConnectionCooldown", "CooldownSettings", "cooldown_cause", "is_failure_cooldown"]


@dataclass(frozen=True, slots=True)
class CooldownSettings:
    """Cooldown knobs (config ``resilience.cooldown``), seconds.

    ``base_s`` of the ``base·2^backoff_level`` backoff (RESIL-2, default 3); ``max_s`` caps that
    backoff (RESIL-2, default 300 = 5 min); ``max_hint_s`` caps an upstream wait hint (RESIL-2
    ``max_hint``, default 1800 = 30 min); ``server_error_max_s`` caps every cooldown caused by a
    server-side failure — overloaded (503/529) or a 5xx with a wait hint — backoff and hint alike
    (RESIL-11, default 10: a recovered provider is tried again within 10 s; rate limits keep ``max_s``
    and ``max_hint_s`` because the upstream's reset is authoritative there).
    """

    base_s: float = 3.0
    max_s: float = 300.0
    max_hint_s: float = 1800.0
    server_error_max_s: float = 10.0


_RATE_LIMITED = "rate limited"


def cooldown_cause(err: UpstreamError, now: float = 0.0, max_hint_s: float | None = None) -> str:
    """Cause text of a cooldown, e.g. ``rate limited (429)`` or ``overloaded (529)``. When the
    upstream's wait hint is longer than ``max_hint_s``, the cooldown is shorter than the real reset,
    so the text names that reset (UTC): ``rate limited (429, resets 2026-12-05T22:27:28Z)``
    (RESIL-13)."""
    if isinstance(err, Overloaded):
        what = "overloaded"
    elif isinstance(err, RateLimited):
        what = _RATE_LIMITED
    else:
        what = "retry-after requested"
    return with_status(what, err, reset_note(err, now, max_hint_s))


def is_failure_cooldown(rec: CooldownRecord) -> bool:
    """Whether ``rec``'s current deadline was set by a server-side failure (overloaded, hinted 5xx)
    rather than a rate limit: the breaker's half-open probe may pass such a cooldown (RESIL-11), a
    rate limit never (the upstream's reset stands). Reads the cause :func:`cooldown_cause` wrote."""
    return not rec.reason.startswith(_RATE_LIMITED)


class ConnectionCooldown:
    """Per-connection cooldown and validity over a :class:`RoutingState` (RESIL-2); transitions are
    appended to ``log`` when one is given."""

    __slots__ = ("log", "settings", "state")

    def __init__(
        self, state: RoutingState, settings: CooldownSettings | None = None, log: TransitionLog | None = None
    ) -> None:
        self.state = state
        self.settings = settings or CooldownSettings()
        self.log = log

    def _logged(self, change: Change[CooldownRecord], now: float) -> Change[CooldownRecord]:
        if self.log is not None and change.changed:
            self.log.cooldown(change, now)
        return change

    async def on_failure(
        self, connection_id: str, provider: str, err: UpstreamError, now: float, model: str = ""
    ) -> Change[CooldownRecord] | None:
        """RateLimited/Overloaded: cool down for the hint (capped) or the backoff; deadlines only move
        later. Any other retryable failure that carries an explicit wait hint (e.g. a 504 or 500 with
        ``Retry-After``) cools the connection for that hint, because the upstream asked for it. Every
        cooldown but a rate limit's lasts at most ``server_error_max_s`` (RESIL-11). ``model`` scopes a
        cooldown to that model on the connection (a per-model rate limit); ``""`` cools it whole.
        AuthInvalid: mark the connection invalid. Anything else: ``None`` (not this tier's)."""
        hinted = err.retryable and err.retry_after_s is not None
        if isinstance(err, RateLimited | Overloaded) or hinted:
            s = self.settings
            max_s, max_hint_s = s.max_s, s.max_hint_s
            if not isinstance(err, RateLimited):  # a server-side failure: capped (RESIL-11)
                max_s, max_hint_s = min(max_s, s.server_error_max_s), min(max_hint_s, s.server_error_max_s)
            change = await self.state.cooldown_extend(
                connection_id,
                now,
                provider=provider,
                hint_s=err.retry_after_s,
                base_s=s.base_s,
                max_s=max_s,
                max_hint_s=max_hint_s,
                reason=cooldown_cause(err, now, max_hint_s),
                last_error=short(err.message),
                model=model,
            )
            return self._logged(change, now)
        if isinstance(err, AuthInvalid):
            status = f"{err.upstream_status} " if err.upstream_status else ""
            change = await self.state.mark_invalid(
                connection_id, now, provider=provider, reason=short(f"{status}{err.message}")
            )
            return self._logged(change, now)
        return None

    async def on_success(
        self, connection_id: str, now: float, model: str | None = None
    ) -> Change[CooldownRecord]:
        """The connection answered for ``model``: clear its deadline and backoff level (RESIL-2),
        unless the cooldown holds only another model."""
        return self._logged(await self.state.cooldown_success(connection_id, model), now)

    async def mark_valid(self, connection_id: str, now: float) -> Change[CooldownRecord]:
        """Credentials fixed (e.g. a token refresh succeeded): clear the invalid mark (RESIL-2)."""
        return self._logged(await self.state.mark_valid(connection_id), now)
