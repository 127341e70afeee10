"""The strategy registry: strategy name → :class:`~omniroute.routing.strategies.base.Strategy`
(COMBO-3; DESIGN 6).

Each gateway has its own :class:`StrategyRegistry`: the strategies of its
:class:`~omniroute.extensions.Extensions` over :data:`DEFAULT_STRATEGIES`, which holds one object per
name of :data:`~omniroute.core.combo.ROUTING_STRATEGY_VALUES` (19). A registered name is valid in a
combo's ``strategy`` (the management API validates against the gateway's names, the CLI against the
defaults) and routes requests. :func:`register_strategy` (name, impl) still adds to the process
defaults for existing callers.
"""

from __future__ import annotations

from collections.abc import Iterable

from omniroute.core.combo import ROUTING_STRATEGY_VALUES
from omniroute.routing.strategies.affinity import CacheOptimized, ContextRelay, Lkgp
from omniroute.routing.strategies.base import Strategy
from omniroute.routing.strategies.chance import P2C, RandomOrder, Weighted
from omniroute.routing.strategies.delegates import AutoDelegate, DefinitionOrder
from omniroute.routing.strategies.quota_based import FillFirst, Headroom, ResetAware, ResetWindow
from omniroute.routing.strategies.rotation import LeastUsed, RoundRobin, StrictRandom
from omniroute.routing.strategies.static import ContextOptimized, CostOptimized, Priority

__all__ = [
    "DEFAULT_STRATEGIES",
    "StrategyRegistry",
    "builtin_strategies",
    "get_strategy",
    "register_strategy",
    "strategy_names",
]


def builtin_strategies() -> list[Strategy]:
    """One fresh object per built-in strategy."""
    return [
        Priority(),
        Weighted(),
        RoundRobin(),
        ContextRelay(),
        FillFirst(),
        P2C(),
        RandomOrder(),
        LeastUsed(),
        CostOptimized(),
        ResetAware(),
        ResetWindow(),
        Headroom(),
        StrictRandom(),
        AutoDelegate(),
        Lkgp(),
        ContextOptimized(),
        CacheOptimized(),
        DefinitionOrder("fusion"),
        DefinitionOrder("pipeline"),
    ]


class StrategyRegistry:
    """Strategies by name, over an optional ``fallback`` registry consulted for names this one lacks
    (a gateway's registry holds its :class:`~omniroute.extensions.Extensions` strategies over the
    process defaults). ``get`` raises ``KeyError`` naming the valid names."""

    __slots__ = ("_by_name", "_fallback")

    def __init__(self, strategies: Iterable[Strategy] = (), fallback: StrategyRegistry | None = None) -> None:
        self._by_name: dict[str, Strategy] = {}
        self._fallback = fallback
        for s in strategies:
            self.register(s.name, s)

    def register(self, name: str, impl: Strategy) -> None:
        """Add ``impl`` under ``name``, replacing any previous one."""
        self._by_name[name] = impl

    def get(self, name: str) -> Strategy:
        impl = self._by_name.get(name)
        if impl is not None:
            return impl
        if self._fallback is not None and name in self._fallback:
            return self._fallback.get(name)
        raise KeyError(f"unknown strategy {name!r}; valid: {', '.join(self.names())}")

    def _all(self) -> set[str]:
        own = set(self._by_name)
        return own | self._fallback._all() if self._fallback is not None else own

    def names(self) -> tuple[str, ...]:
        """Registered names (this registry's and its fallback's), built-ins in COMBO-3 order first."""
        every = self._all()
        known = [n for n in ROUTING_STRATEGY_VALUES if n in every]
        return (*known, *sorted(n for n in every if n not in ROUTING_STRATEGY_VALUES))

    def __contains__(self, name: object) -> bool:
        return name in self._by_name or (self._fallback is not None and name in self._fallback)


DEFAULT_STRATEGIES = StrategyRegistry(builtin_strategies())
"""The process-wide defaults: the built-ins plus whatever :func:`register_strategy` added. Each gateway
reads them through its own registry (its extensions first)."""


def get_strategy(name: str) -> Strategy:
    """The strategy registered as ``name`` in the process defaults; ``KeyError`` listing the valid
    names otherwise."""
    return DEFAULT_STRATEGIES.get(name)


def register_strategy(name: str, impl: Strategy) -> None:
    """Add (or replace) the combo strategy called ``name`` in the process defaults, seen by every
    gateway of the process. Kept for existing callers: an application passes its strategies to
    ``create_app(..., extensions=Extensions(strategies=...))`` instead."""
    DEFAULT_STRATEGIES.register(name, impl)


def strategy_names() -> tuple[str, ...]:
    """Every strategy name of the process defaults."""
    return DEFAULT_STRATEGIES.names()
