"""Registry entries whose real work lives elsewhere (COMBO-3): ``auto`` (the auto-combo engine,
§7), ``fusion`` (COMBO-5) and ``pipeline`` (COMBO-6).

A combo with ``strategy: "auto"`` resolves to an auto plan and is ordered by the auto engine
(:mod:`omniroute.routing.auto`, through the planner), so it never reaches the ``auto`` entry here;
the entry exists so ``auto`` is a registered name, and orders in definition order if it is ever
called. ``fusion`` and ``pipeline`` are executed by :mod:`omniroute.routing.fusion` /
:mod:`omniroute.routing.pipeline`; when a plan of theirs reaches the ordinary attempt loop, their
members are tried in definition order.
"""

from __future__ import annotations

from omniroute.routing.strategies.base import Ordering, StrategyContext

__all__ = ["AutoDelegate", "DefinitionOrder"]


class AutoDelegate:
    """``auto``: a registered name whose combos the auto engine plans; definition order here."""

    name = "auto"
    expands_connections = False
    protects_first = True

    async def order(self, ctx: StrategyContext) -> Ordering:
        return Ordering(list(ctx.targets), "auto: planned by the auto engine; definition order here")


class DefinitionOrder:
    """Members in definition order (``fusion`` and ``pipeline`` when run by the attempt loop)."""

    expands_connections = False
    protects_first = True

    def __init__(self, name: str) -> None:
        self.name = name

    async def order(self, ctx: StrategyContext) -> Ordering:
        return Ordering(list(ctx.targets), f"{self.name}: members in definition order")
