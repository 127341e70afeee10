"""What an application adds to the gateway, given to ``create_app(config, extensions=...)``: combo
strategies, auto router strategies and wire formats. Each gateway keeps its own tables built from
them (no module state): a strategy or router is looked up in the gateway's registry first, then in
the process defaults (the built-ins); a wire format joins the built-in formats of
:data:`omniroute.wire.FORMATS` for that gateway's client routes, provider adapters and the check of a
provider's ``format``.

Example (a strategy that tries a combo's targets last first)::

    class LastFirst:
        name = "last-first"
        expands_connections = False
        protects_first = True

        async def order(self, ctx: StrategyContext) -> Ordering:
            return Ordering(list(reversed(ctx.targets)), "last target first")

    app = create_app(config, extensions=Extensions(strategies=(LastFirst(),)))

``POST /api/combos`` then accepts ``"strategy": "last-first"`` (any case, ``_`` for ``-``) and the
combo routes requests with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from omniroute import wire
from omniroute.routing.auto.routers import DEFAULT_ROUTERS, RouterRegistry, RouterStrategy
from omniroute.routing.strategies.base import Strategy
from omniroute.routing.strategies.registry import DEFAULT_STRATEGIES, StrategyRegistry
from omniroute.wire.base import WireFormat

__all__ = ["Extensions"]


@dataclass(frozen=True, slots=True)
class Extensions:
    """Additions to one gateway (all optional):

    - ``strategies``: combo strategies (:class:`~omniroute.routing.strategies.base.Strategy`), each
      usable by its ``name`` in a combo's ``strategy``; a name of a built-in replaces it;
    - ``routers``: auto router strategies (:class:`~omniroute.routing.auto.routers.RouterStrategy`),
      usable by ``name`` in an auto combo's ``routerStrategy``;
    - ``formats``: wire formats (:class:`~omniroute.wire.base.WireFormat`) beside the built-in ones;
      their client routes are served and providers may name them as ``format``.

    Raises ``ValueError`` for two formats with one name (a built-in included)."""

    strategies: tuple[Strategy, ...] = ()
    routers: tuple[RouterStrategy, ...] = ()
    formats: tuple[WireFormat, ...] = ()

    def __post_init__(self) -> None:
        names = [f.name for f in (*wire.FORMATS, *self.formats)]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"wire format names must be unique; repeated: {', '.join(dupes)}")

    def strategy_registry(self) -> StrategyRegistry:
        """This gateway's combo strategies over the process defaults."""
        return StrategyRegistry(self.strategies, fallback=DEFAULT_STRATEGIES)

    def router_registry(self) -> RouterRegistry:
        """This gateway's auto routers over the process defaults."""
        return RouterRegistry(self.routers, fallback=DEFAULT_ROUTERS)

    def wire_formats(self) -> tuple[WireFormat, ...]:
        """The built-in formats, then these (the order client routes are matched in)."""
        return (*wire.FORMATS, *self.formats)
