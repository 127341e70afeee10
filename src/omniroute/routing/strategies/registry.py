"""The strategy registry: strategy name → :class:`~omniroute.routing.strategies.base.Strategy`
(COMBO-3; DESIGN 6).

The built-in registry holds one object per name of
:data:`~omniroute.core.combo.ROUTING_STRATEGY_VALUES` (19). :func:`register_strategy` adds or replaces
a name (plugins, tests, the simulator); a registered name is valid in a combo's ``strategy`` from then
on (the management API and the CLI validate against :func:`strategy_names`). It is the one deliberate
piece of process-wide mutable state in routing, filled at import with stateless objects and no I/O.
Same signature as the auto router registry's ``register_strategy(name, impl)`` (AUTO-5).
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

__all__ = ["StrategyRegistry", "builtin_strategies", "get_strategy", "register_strategy", "strategy_names"]


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
    """Strategies by name. ``get`` raises ``KeyError`` naming the valid names."""

    __slots__ = ("_by_name",)

    def __init__(self, strategies: Iterable[Strategy] = ()) -> None:
        self._by_name: dict[str, Strategy] = {}
        for s in strategies:
            self.register(s.name, s)

    def register(self, name: str, impl: Strategy) -> None:
        """Add ``impl`` under ``name``, replacing any previous one."""
        self._by_name[name] = impl

    def get(self, name: str) -> Strategy:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown strategy {name!r}; valid: {', '.join(self.names())}") from None

    def names(self) -> tuple[str, ...]:
        """Registered names, built-ins in COMBO-3 order first."""
        known = [n for n in ROUTING_STRATEGY_VALUES if n in self._by_name]
        return (*known, *sorted(n for n in self._by_name if n not in ROUTING_STRATEGY_VALUES))

    def __contains__(self, name: object) -> bool:
        return name in self._by_name


_REGISTRY = StrategyRegistry(builtin_strategies())


def get_strategy(name: str) -> Strategy:
    """The strategy registered as ``name``; ``KeyError`` listing the valid names otherwise."""
    return _REGISTRY.get(name)


def register_strategy(name: str, impl: Strategy) -> None:
    """Add (or replace) the combo strategy called ``name``; combos may use ``name`` from then on."""
    _REGISTRY.register(name, impl)


def strategy_names() -> tuple[str, ...]:
    """Every registered strategy name."""
    return _REGISTRY.names()
