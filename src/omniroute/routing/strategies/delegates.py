"""Registry entries whose real work lives elsewhere (COMBO-3): ``auto`` (the auto-combo engine,
§7), ``fusion`` (COMBO-5) and ``pipeline`` (COMBO-6).

``auto`` delegates to ``omniroute.routing.auto.combo_strategy`` (an object satisfying
:class:`~omniroute.typing.Strategy`) when that module provides it; otherwise it falls back to
definition order and says so in the decision. ``fusion`` and ``pipeline`` are executed by
:mod:`omniroute.routing.fusion` / :mod:`omniroute.routing.pipeline`; when a plan of theirs reaches
the ordinary attempt loop, their members are tried in definition order.
"""

from __future__ import annotations

import importlib

from omniroute.routing.strategies.base import Ordering, StrategyContext
from omniroute.typing import Strategy

__all__ = ["AutoDelegate", "DefinitionOrder"]


class AutoDelegate:
    """``auto``: the auto-combo engine's ordering over the combo's targets, if available."""

    name = "auto"
    expands_connections = False
    protects_first = True

    def _impl(self) -> Strategy | None:
        try:
            mod = importlib.import_module("omniroute.routing.auto")
        except ImportError:
            return None
        impl: Strategy | None = getattr(mod, "combo_strategy", None)
        return impl

    async def order(self, ctx: StrategyContext) -> Ordering:
        impl = self._impl()
        if impl is not None:
            return await impl.order(ctx)
        return Ordering(list(ctx.targets), "auto engine not available: definition order")


class DefinitionOrder:
    """Members in definition order (``fusion`` and ``pipeline`` when run by the attempt loop)."""

    expands_connections = False
    protects_first = True

    def __init__(self, name: str) -> None:
        self.name = name

    async def order(self, ctx: StrategyContext) -> Ordering:
        return Ordering(list(ctx.targets), f"{self.name}: members in definition order")
