"""Combo strategies (COMBO-3): one pure object per strategy, registered by name (DESIGN house
style 6). A strategy orders a combo's expanded targets for one request; the resilience ladder then
filters the order and the engine attempts it.

Families: :mod:`.static` (priority, cost-optimized, context-optimized), :mod:`.chance` (random,
weighted, p2c), :mod:`.rotation` (round-robin, strict-random, least-used), :mod:`.quota_based`
(fill-first, reset-aware, reset-window, headroom), :mod:`.affinity` (lkgp, cache-optimized,
context-relay, prompt-cache affinity), :mod:`.delegates` (auto, fusion, pipeline).
"""

from omniroute.core.combo import DEFAULTS, INHERIT, ComboSettings
from omniroute.routing.strategies.base import (
    Availability,
    ComboTarget,
    Ordering,
    Strategy,
    StrategyContext,
    StrategyState,
    rng_for,
)
from omniroute.routing.strategies.registry import (
    StrategyRegistry,
    get_strategy,
    register_strategy,
    strategy_names,
)

__all__ = [
    "DEFAULTS",
    "INHERIT",
    "Availability",
    "ComboSettings",
    "ComboTarget",
    "Ordering",
    "Strategy",
    "StrategyContext",
    "StrategyRegistry",
    "StrategyState",
    "get_strategy",
    "register_strategy",
    "rng_for",
    "strategy_names",
]
