"""Strategies that draw (COMBO-3): ``random``, ``weighted`` and ``p2c``. All randomness comes from
``ctx.rng`` (seeded per request, DESIGN 6).

* ``weighted`` draws one *step* (a top-level entry; nested refs and per-connection expansions belong
  to their step) with probability weight/Σweight among steps that have a reachable target; weight 0
  is never drawn while a step with weight > 0 is reachable; all 0 → uniform. The other steps follow
  by weight descending (ties: definition order). ``stickyWeightedLimit`` N > 1 keeps the drawn step
  first until it has served N requests (reference §2.3: ``weightedStickyTargets``).
* ``p2c`` picks two distinct targets and puts the healthier first: breaker state first (CLOSED before
  HALF_OPEN before OPEN — a HALF_OPEN target never beats a healthy one), then the health score
  success rate + 1/log10(mean latency ms + 10) (reference §2.3). A target without samples is not
  compared on it (new targets get their turn) and scores within :data:`P2C_TIE_BAND` count as equal
  (measurement noise must not pin all traffic on one of two equally healthy targets); then fewer
  attempts in flight wins (the classic p2c load signal); a full tie keeps the first pick. The others
  follow in definition order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omniroute.routing.strategies.base import ComboTarget, Ordering, StrategyContext
from omniroute.state.records import BreakerState
from omniroute.values import Candidate

__all__ = ["P2C", "RandomOrder", "Weighted"]

_STICKY = "weighted-sticky"
P2C_TIE_BAND = 0.05


class RandomOrder:
    """``random``: a uniform shuffle of all targets."""

    name = "random"
    expands_connections = False
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        ts = list(ctx.targets)
        ctx.rng.shuffle(ts)
        return Ordering(ts, "uniform shuffle")


def _steps(targets: Sequence[ComboTarget]) -> dict[int, list[ComboTarget]]:
    out: dict[int, list[ComboTarget]] = {}
    for t in targets:
        out.setdefault(t.step, []).append(t)
    return out


def _step_id(step: int, members: Sequence[ComboTarget]) -> str:
    # an edit that reorders steps must not keep an old sticky step alive under a new meaning
    return f"{step}:{members[0].model_str}"


class Weighted:
    """``weighted``: draw a step by weight, the rest by weight descending (see module docstring)."""

    name = "weighted"
    expands_connections = False
    protects_first = True

    async def order(self, ctx: StrategyContext) -> Ordering:
        steps = _steps(ctx.targets)
        if not steps:
            return Ordering([], "no targets")
        weight = {s: max(t.weight for t in m) for s, m in steps.items()}
        gone = await ctx.unavailable()
        reachable = [s for s, m in steps.items() if any(t.index not in gone for t in m)]
        eligible = reachable or list(steps)
        limit = ctx.settings.int_("stickyWeightedLimit", 1, 1, 1_000_000)
        chosen: int | None = None
        why = ""
        if limit > 1:
            rec = await ctx.state.get_json(_STICKY)
            if isinstance(rec, dict):
                for s in eligible:
                    if rec.get("id") == _step_id(s, steps[s]) and int(rec.get("served", 0)) < limit:
                        chosen, why = s, f"sticky step {s} ({rec.get('served')}/{limit} served)"
        if chosen is None:
            chosen = _draw(eligible, weight, ctx)
            total = sum(weight[s] for s in eligible)
            share = weight[chosen] / total if total > 0 else 1 / len(eligible)
            why = f"drew step {chosen} (weight {weight[chosen]:g}, p={share:.2f})"
        rest = sorted((s for s in steps if s != chosen), key=lambda s: (s not in eligible, -weight[s], s))
        ordered = [t for s in (chosen, *rest) for t in steps[s]]

        async def on_success(target: ComboTarget, cand: Candidate) -> None:
            if limit <= 1:
                return
            sid = _step_id(target.step, steps[target.step])
            rec = await ctx.state.get_json(_STICKY)
            served = int(rec.get("served", 0)) + 1 if isinstance(rec, dict) and rec.get("id") == sid else 1
            if served >= limit:
                await ctx.state.delete(_STICKY)
            else:
                await ctx.state.set_json(_STICKY, {"id": sid, "served": served})

        return Ordering(ordered, why, on_success if limit > 1 else None)


def _draw(eligible: list[int], weight: dict[int, float], ctx: StrategyContext) -> int:
    total = sum(weight[s] for s in eligible)
    if total <= 0:
        return eligible[ctx.rng.randrange(len(eligible))]
    r = ctx.rng.random() * total
    last = eligible[0]
    for s in eligible:
        w = weight[s]
        if w <= 0:
            continue
        last = s
        r -= w
        if r < 0:
            return s
    return last  # float rounding at the top end


_BREAKER_RANK = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}


class P2C:
    """``p2c``: power of two choices (see module docstring)."""

    name = "p2c"
    expands_connections = False
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        ts = list(ctx.targets)
        if len(ts) < 2:
            return Ordering(ts, "one target")
        i, j = ctx.rng.sample(range(len(ts)), 2)
        a, b = ts[i], ts[j]
        breakers = await ctx.state.breakers({a.provider.id, b.provider.id}, ctx.now)
        windows = await ctx.state.windows(c.key for t in (a, b) for c in t.candidates())
        inflight = await ctx.state.inflight(c.id for t in (a, b) for c in t.connections)

        def health(t: ComboTarget) -> tuple[int, float | None, int]:
            count = errors = 0.0
            lat_sum = lat_n = 0.0
            for c in t.candidates():
                w = windows.get(c.key)
                if w is None or not w.count:
                    continue
                count += w.count
                errors += w.error_rate * w.count
                if w.mean_ms is not None:
                    lat_sum += w.mean_ms
                    lat_n += 1
            latency = 1.0 / math.log10(lat_sum / lat_n + 10.0) if lat_n else 0.25
            score = 1.0 - errors / count + latency if count else None
            rank = _BREAKER_RANK[breakers.get(t.provider.id, BreakerState.CLOSED)]
            load = min(inflight.get(c.id, 0) for c in t.connections) if t.connections else 0
            return (rank, score, load)

        ha, hb = health(a), health(b)
        sa, sb = ha[1], hb[1]
        if ha[0] != hb[0]:
            b_wins = hb[0] < ha[0]
        elif sa is not None and sb is not None and abs(sa - sb) > P2C_TIE_BAND:
            b_wins = sb > sa
        else:
            b_wins = hb[2] < ha[2]
        winner, loser = (b, a) if b_wins else (a, b)
        hw, hl = (hb, ha) if b_wins else (ha, hb)
        ordered = [winner, *(t for t in ts if t is not winner)]
        why = f"p2c: {winner.key} ({_health_text(hw)}) over {loser.key} ({_health_text(hl)})"
        return Ordering(ordered, why)


def _health_text(h: tuple[int, float | None, int]) -> str:
    score = "no samples" if h[1] is None else f"health {h[1]:.3f}"
    return f"{score}, {h[2]} in flight"
