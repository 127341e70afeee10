"""Strategies that order by what the definition and the catalog say (COMBO-3): ``priority``,
``cost-optimized`` and ``context-optimized``. No state, no randomness; sorts are stable, so ties
keep definition order (reference §2.3).
"""

from __future__ import annotations

from omniroute.routing.strategies.base import ComboTarget, Ordering, StrategyContext

__all__ = ["ContextOptimized", "CostOptimized", "Priority"]


def _price(v: float | None) -> str:
    return "unknown" if v is None else f"${v:g}/1M"


class Priority:
    """``priority``: definition order, or explicit ``priority`` lower first when any target sets one
    (targets without one follow, in definition order)."""

    name = "priority"
    expands_connections = False
    protects_first = True

    async def order(self, ctx: StrategyContext) -> Ordering:
        ts = list(ctx.targets)
        if any(t.priority is not None for t in ts):
            ts.sort(key=lambda t: (t.priority is None, t.priority or 0, t.index))
            return Ordering(ts, "explicit priority (lower first), then definition order")
        return Ordering(ts, "definition order")


class CostOptimized:
    """``cost-optimized``: lowest blended price first (60 % input + 40 % output, USD per 1M tokens);
    a target with an unknown price goes last."""

    name = "cost-optimized"
    expands_connections = False
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        def key(t: ComboTarget) -> tuple[bool, float, int]:
            p = t.model.blended_price
            return (p is None, p or 0.0, t.index)

        ts = sorted(ctx.targets, key=key)
        if not ts:
            return Ordering(ts, "no targets")
        first = ts[0]
        return Ordering(
            ts, f"cheapest blended price first: {first.model_str} {_price(first.model.blended_price)}"
        )


class ContextOptimized:
    """``context-optimized``: largest known context window first (unknown = 0); when no target has
    a known window the definition order stands."""

    name = "context-optimized"
    expands_connections = False
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        ts = list(ctx.targets)
        if not any(t.model.context_window for t in ts):
            return Ordering(ts, "no context windows known: definition order")
        ts.sort(key=lambda t: (-t.model.context_window, t.index))
        return Ordering(
            ts, f"largest context window first: {ts[0].model_str} ({ts[0].model.context_window:,})"
        )
