"""Strategies that read the quota provider (COMBO-3; :mod:`omniroute.routing.quota`):
``fill-first``, ``reset-aware``, ``reset-window`` and ``headroom``. A connection without quota data
gets a neutral score (never a penalty).

* ``fill-first``: definition order; a target whose every connection has spent its quota (until its
  reset) moves behind the others. A rate-limited connection (429) is filtered by the ladder anyway
  (RESIL-2), so the first target serves until it fails or runs dry, then the next, and back.
* ``reset-aware`` (per connection): score = 0.45·remaining + 0.55·urgency·(1 − remaining), where
  urgency = 1 − time-to-reset / 5 h (1 when the reset has passed, 0.5 unknown); below 10 % remaining
  the score shrinks (×max(0.05, remaining/0.1)); spent → −∞; no data → 0.5 (reference §2.3
  ``scoreResetAwareQuota``, one window). Highest first; targets within ``resetAwareTieBand`` (5 %)
  of the best rotate through a counter.
* ``reset-window`` (per connection): earliest known reset first; spent or unknown → last; resets
  within ``resetWindowTieBandMs`` (60 s) of the earliest rotate.
* ``headroom`` (per connection): most remaining quota first (1 − max utilisation over the reported
  windows/dimensions); no data → 0.5; ties keep definition order.
"""

from __future__ import annotations

import math

from omniroute.routing.quota import QuotaInfo
from omniroute.routing.strategies.base import ComboTarget, Ordering, StrategyContext

__all__ = ["FillFirst", "Headroom", "ResetAware", "ResetWindow"]

NEUTRAL_SCORE = 0.5
SESSION_WINDOW_S = 5 * 3600.0
EXHAUSTION_GUARD = 0.10


class FillFirst:
    """``fill-first``: first target until it fails or its quota is spent."""

    name = "fill-first"
    expands_connections = False
    protects_first = True

    async def order(self, ctx: StrategyContext) -> Ordering:
        spent: set[int] = set()
        for t in ctx.targets:
            quotas = [await ctx.state.quota(c.id, ctx.now) for c in t.connections]
            if quotas and all(q.limit_reached for q in quotas):
                spent.add(t.index)
        ts = sorted(ctx.targets, key=lambda t: (t.index in spent, t.index))
        if spent:
            names = ", ".join(t.key for t in ctx.targets if t.index in spent)
            return Ordering(ts, f"fill first; quota spent on {names}")
        return Ordering(ts, "fill first: definition order")


def reset_aware_score(q: QuotaInfo, now: float) -> float:
    """The reset-aware score of one connection (see module docstring)."""
    if not q.known:
        return NEUTRAL_SCORE
    if q.limit_reached:
        return -math.inf
    assert q.remaining is not None
    r = q.remaining
    if q.reset_at is None:
        urgency = 0.5
    elif q.reset_at <= now:
        urgency = 1.0
    else:
        urgency = max(0.0, min(1.0, 1.0 - (q.reset_at - now) / SESSION_WINDOW_S))
    score = 0.45 * r + 0.55 * urgency * (1.0 - r)
    if r < EXHAUSTION_GUARD:
        score *= max(0.05, r / EXHAUSTION_GUARD)
    return score


async def _conn_quota(ctx: StrategyContext, t: ComboTarget) -> QuotaInfo:
    return await ctx.state.target_quota(t, ctx.now)


async def _rotate_band(ctx: StrategyContext, counter: str, band: list[ComboTarget]) -> list[ComboTarget]:
    if len(band) < 2:
        return band
    turn = (await ctx.state.incr(counter) - 1) % len(band)
    return band[turn:] + band[:turn]


class ResetAware:
    """``reset-aware``: highest quota score first, 5 % tie band rotates."""

    name = "reset-aware"
    expands_connections = True
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        scores = {t.index: reset_aware_score(await _conn_quota(ctx, t), ctx.now) for t in ctx.targets}
        ts = sorted(ctx.targets, key=lambda t: (-scores[t.index], t.index))
        if not ts:
            return Ordering([], "no targets")
        best = scores[ts[0].index]
        band_width = ctx.settings.float_("resetAwareTieBand", 0.05)
        if math.isfinite(best):
            k = sum(1 for t in ts if scores[t.index] >= best - band_width)
            ts = await _rotate_band(ctx, "reset-aware", ts[:k]) + ts[k:]
        why = "quota score: " + ", ".join(f"{t.key}={scores[t.index]:.2f}" for t in ts[:3])
        return Ordering(ts, why)


class ResetWindow:
    """``reset-window``: earliest quota reset first, ties within 60 s rotate."""

    name = "reset-window"
    expands_connections = True
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        resets: dict[int, float] = {}
        for t in ctx.targets:
            q = await _conn_quota(ctx, t)
            ok = q.known and not q.limit_reached and q.reset_at is not None
            resets[t.index] = q.reset_at if ok and q.reset_at is not None else math.inf
        ts = sorted(ctx.targets, key=lambda t: (resets[t.index], t.index))
        if not ts:
            return Ordering([], "no targets")
        first = resets[ts[0].index]
        if math.isfinite(first):
            band_s = ctx.settings.float_("resetWindowTieBandMs", 60_000.0) / 1000.0
            k = sum(1 for t in ts if resets[t.index] <= first + band_s)
            ts = await _rotate_band(ctx, "reset-window", ts[:k]) + ts[k:]
            why = f"earliest quota reset first: {ts[0].key} in {max(0.0, first - ctx.now):.0f}s"
        else:
            why = "no quota resets known: definition order"
        return Ordering(ts, why)


class Headroom:
    """``headroom``: most remaining quota first."""

    name = "headroom"
    expands_connections = True
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        room: dict[int, float] = {}
        for t in ctx.targets:
            q = await _conn_quota(ctx, t)
            room[t.index] = q.remaining if q.remaining is not None else NEUTRAL_SCORE
        ts = sorted(ctx.targets, key=lambda t: (-room[t.index], t.index))
        why = "headroom: " + ", ".join(f"{t.key}={room[t.index]:.2f}" for t in ts[:3])
        return Ordering(ts, why)
