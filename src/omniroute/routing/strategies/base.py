"""What every combo strategy sees and returns (COMBO-3, COMBO-4; DESIGN house style 6, 11).

* :class:`ComboTarget` — one expanded target: provider + model + the connections it may use.
* :class:`~omniroute.core.combo.ComboSettings` — the combo → global → built-in default cascade, with
  :data:`~omniroute.core.combo.INHERIT` distinguishing "not set here" from ``None`` (defined with the
  combo schema).
* :class:`StrategyState` — the strategy's window on :class:`~omniroute.state.base.RoutingState`:
  reads of breakers, latency windows, quota and records, and atomic writes confined to the combo's
  own namespace (``combo:<name>:…``), so a shared backend can hold them later (STORE-2).
* :class:`StrategyContext` — everything for one request, including a ``random.Random`` seeded from
  the request (header ``X-OmniRoute-Seed``, else the request id) so tests and the simulator can
  replay a decision.
* :class:`Ordering` — the strategy's answer: targets in try order, a reason for the decision, an
  optional success hook and an optional rewritten request body (context-relay handoff).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from omniroute.core.combo import ComboSettings
from omniroute.routing.quota import NEUTRAL, QuotaInfo, QuotaProvider
from omniroute.state.base import RoutingState
from omniroute.state.records import BreakerState, WindowStats, breaker_view
from omniroute.values import Candidate, ChatRequest, Connection, ModelInfo, ProviderInfo

__all__ = [
    "Availability",
    "ComboTarget",
    "Ordering",
    "Strategy",
    "StrategyContext",
    "StrategyState",
    "SuccessHook",
    "rng_for",
]


@dataclass(frozen=True, slots=True)
class ComboTarget:
    """One target of a combo after nested refs, tag routing and (optional) connection expansion.

    ``connections``: the active connections it may use, in priority order (one when ``pinned``);
    ``index``: position in the expanded definition order; ``step``: index of the top-level step it
    came from (weighted draws steps); ``weight`` 0–100; ``priority`` lower first (``None`` unset);
    ``timeout_s`` per-target attempt timeout (s).
    """

    provider: ProviderInfo
    model: ModelInfo
    connections: tuple[Connection, ...]
    index: int = 0
    step: int = 0
    weight: float = 0.0
    priority: int | None = None
    timeout_s: float | None = None
    pinned: bool = False
    tags: tuple[str, ...] = ()
    _candidates: tuple[Candidate, ...] = field(init=False, repr=False, compare=False)
    candidate_keys: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """:attr:`Candidate.key` of each of :meth:`candidates`."""
    candidate_rows: tuple[dict[str, Any], ...] = field(init=False, repr=False, compare=False)
    """The decision's candidate row of each of :meth:`candidates` (OBS-2; read-only, shared)."""

    def __post_init__(self) -> None:
        # built once: targets are memoised per registry snapshot and read many times per request
        cands = tuple(
            Candidate(
                self.provider, c, self.model, timeout_s=self.timeout_s, weight=self.weight, step=self.step
            )
            for c in self.connections
        )
        object.__setattr__(self, "_candidates", cands)
        object.__setattr__(self, "candidate_keys", tuple(c.key for c in cands))
        rows = tuple(
            {"provider": c.provider.id, "model": c.model.id, "connection": c.connection.id, "step": c.step}
            for c in cands
        )
        object.__setattr__(self, "candidate_rows", rows)

    @property
    def model_str(self) -> str:
        """``provider/model``."""
        return f"{self.provider.id}/{self.model.id}"

    @property
    def key(self) -> str:
        """Stable identity in state: ``provider/model`` (+ ``@connection`` when pinned)."""
        if self.pinned and self.connections:
            return f"{self.model_str}@{self.connections[0].id}"
        return self.model_str

    def candidates(self) -> tuple[Candidate, ...]:
        """One candidate per usable connection, in connection priority order."""
        return self._candidates


SuccessHook = Callable[[ComboTarget, Candidate], Awaitable[None]]
"""Called after the request succeeded (stream: after it ended cleanly) with the serving target."""


@dataclass(slots=True)
class Ordering:
    """A strategy's answer: ``targets`` in try order (the first is the selection, the rest its
    fallbacks), ``reason`` for the decision, an optional ``on_success`` hook for bookkeeping, and
    ``body`` — a rewritten request body (context-relay handoff) or ``None``."""

    targets: list[ComboTarget]
    reason: str = ""
    on_success: SuccessHook | None = None
    body: dict[str, Any] | None = None


class StrategyState:
    """A strategy's view of :class:`RoutingState`: reads anything it needs, writes only under
    ``combo:<name>:`` (each write is one atomic backend call)."""

    __slots__ = ("_quota", "_state", "namespace")

    def __init__(self, state: RoutingState, combo: str, quota: QuotaProvider) -> None:
        self._state = state
        self._quota = quota
        self.namespace = f"combo:{combo}:"

    # reads -----------------------------------------------------------------------------------------
    async def breakers(self, providers: Iterable[str], now: float) -> dict[str, BreakerState]:
        """The breaker state each provider is seen in at ``now`` (RESIL-1)."""
        recs = await self._state.get_breakers(set(providers))
        return {p: breaker_view(r, now) for p, r in recs.items()}

    async def windows(self, keys: Iterable[str]) -> dict[str, WindowStats]:
        """Rolling latency/error windows by candidate key (``provider/model@connection``)."""
        return await self._state.get_window_stats(list(keys))

    async def inflight(self, connection_ids: Iterable[str]) -> dict[str, int]:
        """Attempts in flight per connection (0 when unknown)."""
        return await self._state.get_inflight(list(connection_ids))

    async def quota(self, connection_id: str, now: float) -> QuotaInfo:
        """The connection's quota (:mod:`omniroute.routing.quota`)."""
        return await self._quota.get(connection_id, now)

    async def target_quota(self, target: ComboTarget, now: float) -> QuotaInfo:
        """Best quota over the target's connections (a step is as good as its best account)."""
        best = NEUTRAL
        for c in target.connections:
            q = await self._quota.get(c.id, now)
            if q.known and (not best.known or (q.remaining or 0.0) > (best.remaining or 0.0)):
                best = q
        return best

    async def counter(self, name: str) -> int:
        return await self._state.get_counter(self.namespace + name)

    async def get_json(self, name: str) -> Any | None:
        return await self._state.get_json(self.namespace + name)

    async def get_record(self, name: str) -> str | None:
        return await self._state.get_record(self.namespace + name)

    # writes (namespaced, atomic) -------------------------------------------------------------------
    async def incr(self, name: str, amount: int = 1) -> int:
        """Atomically add ``amount`` to the combo's counter ``name``; returns the new value."""
        return await self._state.incr_counter(self.namespace + name, amount)

    async def set_json(self, name: str, value: Any, ttl_s: float | None = None) -> None:
        await self._state.set_json(self.namespace + name, value, ttl_s)

    async def set_record(self, name: str, value: str, ttl_s: float | None = None) -> None:
        await self._state.set_record(self.namespace + name, value, ttl_s)

    async def delete(self, name: str) -> None:
        await self._state.delete_record(self.namespace + name)

    async def note_served(self, connection_id: str, now: float) -> None:
        """Count a served request against the connection's configured limit (quota provider)."""
        await self._quota.note_served(connection_id, now)


Availability = Callable[[Sequence[ComboTarget]], Awaitable[dict[int, str]]]
"""``targets → {target.index: reason}`` for targets the ladder would filter entirely right now."""


class StrategyContext:
    """Everything a strategy may read for one request (COMBO-3; DESIGN 6).

    ``combo``: the combo's name; ``strategy``: the strategy's name; ``settings``: option cascade;
    ``targets``: expanded targets in definition order; ``request``: the canonical request; ``state``:
    namespaced RoutingState view; ``rng``: seeded randomness, the only randomness a strategy may use
    (built on first use from :func:`rng_for` unless given); ``now``: epoch s; ``availability``: what
    the ladder would filter right now (see :meth:`unavailable`).
    """

    __slots__ = (
        "_rng",
        "_unavailable",
        "availability",
        "combo",
        "now",
        "request",
        "settings",
        "state",
        "strategy",
        "targets",
    )

    def __init__(
        self,
        *,
        combo: str,
        strategy: str,
        settings: ComboSettings,
        targets: tuple[ComboTarget, ...],
        request: ChatRequest,
        state: StrategyState,
        now: float,
        rng: random.Random | None = None,
        availability: Availability | None = None,
    ) -> None:
        self.combo = combo
        self.strategy = strategy
        self.settings = settings
        self.targets = targets
        self.request = request
        self.state = state
        self.now = now
        self.availability = availability
        self._rng = rng
        self._unavailable: dict[int, str] | None = None

    @property
    def rng(self) -> random.Random:
        """The request's seeded random source (seeding costs ~10 µs, so only strategies that draw pay)."""
        if self._rng is None:
            self._rng = rng_for(self.request)
        return self._rng

    async def unavailable(self) -> dict[int, str]:
        """``{target.index: reason}`` for targets whose every connection the ladder would filter now
        (breaker OPEN, cooldown, model lock). Cached for the request."""
        if self._unavailable is None:
            self._unavailable = await self.availability(self.targets) if self.availability else {}
        return self._unavailable

    async def available(self) -> list[ComboTarget]:
        """Targets that are not :meth:`unavailable`, definition order."""
        gone = await self.unavailable()
        return [t for t in self.targets if t.index not in gone]


def rng_for(req: ChatRequest) -> random.Random:
    """The request's random source: seeded by header ``X-OmniRoute-Seed`` when present, else by the
    request id, so one request's draws are reproducible (DESIGN 6)."""
    seed = req.headers.get("x-omniroute-seed") or req.headers.get("X-OmniRoute-Seed")
    if seed is not None:
        try:
            return random.Random(int(seed))
        except ValueError:
            return random.Random(seed)
    return random.Random(req.request_id or None)


class Strategy(Protocol):
    """A combo strategy (COMBO-3; DESIGN house style 6): one object per strategy name, registered in
    :mod:`omniroute.routing.strategies`, with no I/O, globals or hidden randomness.

    ``order`` turns the expanded targets of a :class:`StrategyContext` into an :class:`Ordering`: the
    first target is tried first and the rest are its fallbacks (the resilience ladder filters them
    afterwards). State is read and written only through ``ctx.state`` and randomness comes only
    from ``ctx.rng``.

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
