"""What routing reads from the process around it, written down as one small protocol.

The planner, combos, the auto engine and the multi-call strategies never see the application object:
they receive a :class:`RoutingServices` (the registry snapshot, routing state, resilience ladder,
store, clock and config) and, for the strategies that make calls of their own, a
:class:`CallServices` (plus the planner, the engine and the usage recorder). The gateway provides
both by having these attributes; anything else with them works too (a test double, the simulator).

Every member is read on use, never copied: a management edit swaps the registry snapshot and a
reload swaps the config, and the next read sees the new one.

:class:`RunOptions` lives here too, below the planners that return it, so the planner and the
strategies (combos, auto) import each other in one direction only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from omniroute.clock import Clock
from omniroute.config import Config
from omniroute.resilience.ladder import Resilience
from omniroute.routing.auto.routers import RouterRegistry
from omniroute.routing.registry import Registry
from omniroute.routing.strategies.registry import StrategyRegistry
from omniroute.state.base import RoutingState
from omniroute.store import Store
from omniroute.values import Candidate, ChatRequest

__all__ = ["RoutingServices", "RunOptions"]


class RoutingServices(Protocol):
    """Exactly what planning reads (all read-only here; the owner swaps them):

    - ``registry``: the current routing snapshot (providers, connections, combos, chains, aliases and
      the per-snapshot memo);
    - ``state``: routing state (breakers, cooldowns, windows, counters, records);
    - ``resilience``: the ladder built over ``state`` (combos filter availability with it);
    - ``store``: the database, ``None`` before start (auto exclusions, the 24 h reliability view);
    - ``clock``: the one clock every decision is timed on (epoch s / monotonic s);
    - ``config``: settings read per request (``combo_defaults``, ``auto``);
    - ``strategies``: combo strategies by name (built-ins and extensions);
    - ``routers``: auto router strategies by name (built-ins and extensions).
    """

    @property
    def registry(self) -> Registry: ...

    @property
    def state(self) -> RoutingState: ...

    @property
    def resilience(self) -> Resilience: ...

    @property
    def store(self) -> Store | None: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def config(self) -> Config: ...

    @property
    def strategies(self) -> StrategyRegistry: ...

    @property
    def routers(self) -> RouterRegistry: ...


@dataclass
class RunOptions:
    """Per-plan overrides of RESIL-6 budgets, a success hook (strategy bookkeeping) and ``prepare``,
    which adapts the request to one candidate just before it is attempted (e.g. AUTO-7 reasoning
    effort only for OpenAI-format upstreams)."""

    max_attempts: int | None = None
    per_target: int | None = None
    on_success: Callable[[Candidate], Any] | None = None
    prepare: Callable[[Candidate, ChatRequest], ChatRequest] | None = None
