"""Tier 2 of the ladder: connection cooldown and invalid credentials (RESIL-2).

Owns which failures cool a connection down (rate limits, overload) or mark it invalid (auth), the
cause text shown in exclusions, and the calls into :class:`~omniroute.state.base.RoutingState`.
Other connections of the same provider are untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

from omniroute.errors import AuthInvalid, Overloaded, RateLimited, UpstreamError
from omniroute.resilience._fmt import short
from omniroute.resilience.events import TransitionLog
from omniroute.state.base import RoutingState
from omniroute.state.records import Change, CooldownRecord

__all__ = ["ConnectionCooldown", "CooldownSettings", "cooldown_cause"]


@dataclass(frozen=True, slots=True)
class CooldownSettings:
    """Cooldown knobs (config ``resilience.cooldown``), seconds.

    ``base_s`` of the ``base·2^backoff_level`` backoff (RESIL-2, default 3); ``max_s`` caps that
    backoff (RESIL-2, default 300 = 5 min); ``max_hint_s`` caps an upstream wait hint (RESIL-2
    ``max_hint``, default 1800 = 30 min).
    """

    base_s: float = 3.0
    max_s: float = 300.0
    max_hint_s: float = 1800.0


def cooldown_cause(err: UpstreamError) -> str:
    """Cause text of a cooldown, e.g. ``rate limited (429)`` or ``overloaded (529)``."""
    if isinstance(err, Overloaded):
        what = "overloaded"
    elif isinstance(err, RateLimited):
        what = "rate limited"
    else:
        what = "retry-after requested"
    return f"{what} ({err.upstream_status})" if err.upstream_status else what


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
        self, connection_id: str, provider: str, err: UpstreamError, now: float
    ) -> Change[CooldownRecord] | None:
        """RateLimited/Overloaded: cool down for the hint (capped) or the backoff; deadlines only move
        later. Any other retryable failure that carries an explicit wait hint (e.g. a 504 or 500 with
        ``Retry-After``) cools the connection for exactly that hint, because the upstream asked for it.
        AuthInvalid: mark the connection invalid. Anything else: ``None`` (not this tier's)."""
        hinted = err.retryable and err.retry_after_s is not None
        if isinstance(err, RateLimited | Overloaded) or hinted:
            s = self.settings
            change = await self.state.cooldown_extend(
                connection_id,
                now,
                provider=provider,
                hint_s=err.retry_after_s,
                base_s=s.base_s,
                max_s=s.max_s,
                max_hint_s=s.max_hint_s,
                reason=cooldown_cause(err),
                last_error=short(err.message),
            )
            return self._logged(change, now)
        if isinstance(err, AuthInvalid):
            status = f"{err.upstream_status} " if err.upstream_status else ""
            change = await self.state.mark_invalid(
                connection_id, now, provider=provider, reason=short(f"{status}{err.message}")
            )
            return self._logged(change, now)
        return None

    async def on_success(self, connection_id: str, now: float) -> Change[CooldownRecord]:
        """The connection answered: clear its deadline and backoff level (RESIL-2)."""
        return self._logged(await self.state.cooldown_success(connection_id), now)

    async def mark_valid(self, connection_id: str, now: float) -> Change[CooldownRecord]:
        """Credentials fixed (e.g. a token refresh succeeded): clear the invalid mark (RESIL-2)."""
        return self._logged(await self.state.mark_valid(connection_id), now)
