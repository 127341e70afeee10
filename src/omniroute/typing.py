"""The strategy Protocol that combo strategies implement and the planner calls (DESIGN house style 6).

The wire-format Protocols (provider adapter, stream parser, client surface) live in
:mod:`omniroute.wire.base`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from omniroute.routing.strategies.base import Ordering, StrategyContext


class Strategy(Protocol):
    """A combo strategy (COMBO-3; DESIGN house style 6): one object per strategy name, registered in
    :mod:`omniroute.routing.strategies`, with no I/O, globals or hidden randomness.

    ``order`` turns the expanded targets of a :class:`~omniroute.routing.strategies.base.StrategyContext`
    into an :class:`~omniroute.routing.strategies.base.Ordering`: the first target is tried first and
    the rest are its fallbacks (the resilience ladder filters them afterwards). State is read and
    written only through ``ctx.state`` and randomness comes only from ``ctx.rng``.

    ``expands_connections``: the strategy ranks accounts, so it sees one target per connection
    (reset-aware, reset-window, headroom, cache-optimized) whatever ``connectionAwareExpansion`` says
    (COMBO-4). ``protects_first``: the prompt-cache affinity stage never displaces its first target
    (priority, fill-first, lkgp, weighted; COMBO-4).
    """

    @property
    def name(self) -> str: ...

    @property
    def expands_connections(self) -> bool: ...

    @property
    def protects_first(self) -> bool: ...

    async def order(self, ctx: StrategyContext) -> Ordering: ...
