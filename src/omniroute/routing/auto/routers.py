"""Router strategies of the auto engine: pick one candidate from a scored pool (AUTO-5, AUTO-5a).

Each router is an object with ``name`` and ``select(pool, ctx) -> RouterDecision`` over
:class:`~omniroute.routing.auto.scoring.CandidateInputs` already scored by
:func:`~omniroute.routing.auto.scoring.score_pool`. Built-ins (seed ``001_c34bc1230a1e43d4.txt``
"Router strategies in detail", reference §3.10, numbers from SPEC AUTO-5):

- ``rules`` (default): drop OPEN unless all are OPEN; highest weighted score.
- ``score``: highest weighted score over the whole pool; exact ties keep pool order.
- ``cost`` / ``eco``: cheapest healthy (not OPEN); unknown price last.
- ``latency`` / ``fast``: lowest ``p95 + errorRate·1000`` among healthy.
- ``sla-aware`` / ``sla``: ``.35·latency + .35·error + .15·health + .10·cost + .05·stability`` where
  each SLO part is ``threshold / max(value, ε)`` capped at 1 (cost without a cap and stability are
  ``1 − v/pool max``); with ``hard`` constraints the pool is sorted by total violation first.
- ``lkgp``: the last-known-good provider's candidate when its breaker is not OPEN (``finalScore``
  1.0, reason ``LKGP: using last known good provider <p>``); ``lkgp_enabled is False`` or no usable
  record → ``rules``.

A gateway selects through its own :class:`RouterRegistry`: the routers of its
:class:`~omniroute.extensions.Extensions` over :data:`DEFAULT_ROUTERS` (the built-ins, plus any added
with :func:`register_router`, kept for existing callers). An unknown name logs a warning and uses
``rules``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from omniroute.routing.auto.fitness import DEFAULT_TASK
from omniroute.routing.auto.scoring import DEFAULT_WEIGHT_VECTOR, HEALTH_BY_STATE, CandidateInputs

__all__ = [
    "DEFAULT_ROUTERS",
    "ROUTERS",
    "RouterContext",
    "RouterDecision",
    "RouterRegistry",
    "RouterStrategy",
    "SlaPolicy",
    "get_strategy",
    "register_router",
    "register_strategy",
    "select_with_strategy",
]

log = logging.getLogger("omniroute.auto")

SLA_EPSILON: Final = 1e-6
SLA_WEIGHTS: Final = (0.35, 0.35, 0.15, 0.10, 0.05)  # latency, error, health, cost, stability


@dataclass(frozen=True, slots=True)
class SlaPolicy:
    """SLOs of ``sla-aware`` (config ``slaTargetP95Ms`` ms, ``slaMaxErrorRate`` fraction,
    ``slaMaxCostPer1MTokens`` USD per 1M tokens or ``None``, ``slaHardConstraints``) (AUTO-5)."""

    target_p95_ms: float = 2000.0
    max_error_rate: float = 0.05
    max_cost_per_1m: float | None = None
    hard: bool = False


@dataclass(slots=True)
class RouterContext:
    """What a router knows beyond the pool: effective ``weights`` (16-tuple), ``task_type``, the LKGP
    record (``last_known_good`` provider id, ``last_known_good_key`` candidate key) and its switch,
    and the SLA policy."""

    weights: Sequence[float] = DEFAULT_WEIGHT_VECTOR
    task_type: str = DEFAULT_TASK
    lkgp_enabled: bool | None = None
    last_known_good: str | None = None
    last_known_good_key: str | None = None
    sla: SlaPolicy = field(default_factory=SlaPolicy)


@dataclass(slots=True)
class RouterDecision:
    """A router's pick: ``index`` into the pool, the ``strategy`` that decided (``rules`` when ``lkgp``
    delegated), a human ``reason``, ``candidates_considered`` and ``final_score``; ``order`` is the
    router's own ranking of the pool (pool indices) when it has one, else ``None`` (score order)."""

    index: int
    strategy: str
    reason: str
    candidates_considered: int
    final_score: float
    order: list[int] | None = None


class RouterStrategy(Protocol):
    """A pluggable auto router (AUTO-5)."""

    name: str

    def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext) -> RouterDecision: ...


def _healthy(pool: Sequence[CandidateInputs]) -> list[int]:
    idx = [i for i, c in enumerate(pool) if c.breaker != "OPEN"]
    return idx or list(range(len(pool)))


def _label(c: CandidateInputs) -> str:
    return f"{c.cand.provider.id}/{c.cand.model.id}"


def _cost_text(c: CandidateInputs) -> str:
    return "unknown" if c.cost is None else f"${c.cost:.4g}/1M"


class RulesRouter:
    """Default: drop OPEN unless all are OPEN, then the highest weighted score (AUTO-5)."""

    name = "rules"

    def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext) -> RouterDecision:
        best, considered = _best(pool, skip_open=True)
        if best < 0:  # every candidate is OPEN: score them all
            best, considered = _best(pool, skip_open=False)
        c = pool[best]
        f = c.factors
        return RouterDecision(
            best,
            self.name,
            f"rules: best weighted score {c.score:.3f} of {considered} ({_label(c)}; quota {f[0]:.2f}, "
            f"health {f[1]:.2f}, cost {f[2]:.2f}, taskFit {f[4]:.2f} for {ctx.task_type})",
            considered,
            c.score,
        )


def _best(pool: Sequence[CandidateInputs], *, skip_open: bool) -> tuple[int, int]:
    """Index of the first highest score (optionally among non-OPEN) and how many took part."""
    best, top, n = -1, -1.0, 0
    for i, c in enumerate(pool):
        if skip_open and c.breaker == "OPEN":
            continue
        n += 1
        if c.score > top:
            best, top = i, c.score
    return best, n


class ScoreRouter:
    """The highest configured weighted score over the whole pool; exact ties keep pool order."""

    name = "score"

    def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext) -> RouterDecision:
        best, _ = _best(pool, skip_open=False)
        c = pool[best]
        return RouterDecision(
            best, self.name, f"score: highest weighted score {c.score:.3f} ({_label(c)})", len(pool), c.score
        )


class CostRouter:
    """Cheapest healthy candidate (blended USD per 1M tokens; unknown price last)."""

    name = "cost"

    def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext) -> RouterDecision:
        idx = _healthy(pool)
        order = sorted(idx, key=lambda i: (pool[i].cost is None, pool[i].cost or 0.0))
        c = pool[order[0]]
        return RouterDecision(
            order[0],
            self.name,
            f"cost: cheapest healthy {_label(c)} at {_cost_text(c)}",
            len(idx),
            c.score,
            order,
        )


class LatencyRouter:
    """Lowest ``p95 + errorRate·1000`` (ms) among healthy candidates (AUTO-5)."""

    name = "latency"

    def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext) -> RouterDecision:
        idx = _healthy(pool)
        order = sorted(idx, key=lambda i: pool[i].p95_ms + pool[i].error_rate * 1000)
        c = pool[order[0]]
        return RouterDecision(
            order[0],
            self.name,
            f"latency: lowest p95 + errorRate·1000 = {c.p95_ms + c.error_rate * 1000:.0f} ms ({_label(c)})",
            len(idx),
            c.score,
            order,
        )


def _at_or_below(value: float, threshold: float) -> float:
    if threshold <= 0:
        return 1.0 if value == 0 else 0.0
    return min(1.0, max(0.0, threshold / max(value, SLA_EPSILON)))


class SlaRouter:
    """SLO compliance score with optional hard constraints (AUTO-5, reference §3.10)."""

    name = "sla-aware"

    def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext) -> RouterDecision:
        p = ctx.sla
        idx = _healthy(pool)
        max_cost = max((pool[i].cost or 0.0 for i in idx), default=0.0) or SLA_EPSILON
        max_std = max((pool[i].stddev_ms for i in idx), default=0.0) or SLA_EPSILON
        max_err_cost = p.max_cost_per_1m if p.max_cost_per_1m and p.max_cost_per_1m > 0 else None
        score: dict[int, float] = {}
        violation: dict[int, float] = {}
        for i in idx:
            c = pool[i]
            cost = c.cost if c.cost is not None else max_cost
            cost_s = _at_or_below(cost, max_err_cost) if max_err_cost else 1.0 - cost / max_cost
            parts = (
                _at_or_below(c.p95_ms, p.target_p95_ms),
                _at_or_below(c.error_rate, p.max_error_rate),
                HEALTH_BY_STATE.get(c.breaker, 1.0),
                max(0.0, cost_s),
                max(0.0, 1.0 - c.stddev_ms / max_std),
            )
            score[i] = sum(w * v for w, v in zip(SLA_WEIGHTS, parts, strict=True))
            v = 1.0 if c.breaker == "OPEN" else 0.0
            if c.p95_ms > p.target_p95_ms > 0:
                v += (c.p95_ms - p.target_p95_ms) / p.target_p95_ms
            if p.max_error_rate > 0:
                v += max(0.0, c.error_rate - p.max_error_rate) / p.max_error_rate
            else:
                v += c.error_rate
            if max_err_cost and cost > max_err_cost:
                v += (cost - max_err_cost) / max_err_cost
            violation[i] = v
        if p.hard:
            order = sorted(idx, key=lambda i: (violation[i], -score[i]))
        else:
            order = sorted(idx, key=lambda i: -score[i])
        best = order[0]
        c = pool[best]
        cap = f"{max_err_cost:g}" if max_err_cost else "none"
        reason = (
            f"sla-aware: {_label(c)} p95 {c.p95_ms:.0f}/{p.target_p95_ms:.0f} ms, error rate "
            f"{c.error_rate:.3f}/{p.max_error_rate:.3f}, cost {_cost_text(c)} (cap {cap}), "
            f"SLA score {score[best]:.3f}{', hard constraints' if p.hard else ''}"
        )
        if not any(violation[i] == 0 for i in idx):
            reason += "; no candidate met all SLA constraints"
        return RouterDecision(best, self.name, reason, len(idx), score[best], order)


class LkgpRouter:
    """Last known good provider first, else ``rules`` (AUTO-5a, seed ``000_0adfdb29c1e03aa3.txt``)."""

    name = "lkgp"

    def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext) -> RouterDecision:
        if ctx.lkgp_enabled is not False and ctx.last_known_good:
            usable = [
                i
                for i, c in enumerate(pool)
                if c.cand.provider.id == ctx.last_known_good and c.breaker != "OPEN"
            ]
            if usable:
                exact = [i for i in usable if pool[i].cand.key == ctx.last_known_good_key]
                pick = (exact or usable)[0]
                return RouterDecision(
                    pick, self.name, f"LKGP: using last known good provider {ctx.last_known_good}", 1, 1.0
                )
        return _RULES.select(pool, ctx)


_ALIASES: Final = {"eco": "cost", "fast": "latency", "sla": "sla-aware"}
_RULES: Final = RulesRouter()


class RouterRegistry:
    """Router strategies by name (case-insensitive; aliases eco, fast, sla), over an optional
    ``fallback`` registry consulted for names this one lacks (a gateway's registry holds its
    :class:`~omniroute.extensions.Extensions` routers over :data:`DEFAULT_ROUTERS`)."""

    __slots__ = ("by_name", "fallback")

    def __init__(
        self, routers: Sequence[RouterStrategy] = (), fallback: RouterRegistry | None = None
    ) -> None:
        self.by_name: dict[str, RouterStrategy] = {}
        self.fallback = fallback
        for r in routers:
            self.register(r.name, r)

    def register(self, name: str, impl: RouterStrategy) -> None:
        """Add (or replace) the router called ``name``."""
        self.by_name[name.strip().lower()] = impl

    def find(self, name: str) -> RouterStrategy | None:
        """The router called ``name`` (an alias, any case), or ``None``."""
        key = name.strip().lower()
        key = _ALIASES.get(key, key)
        impl = self.by_name.get(key)
        if impl is None and self.fallback is not None:
            return self.fallback.find(key)
        return impl

    def get(self, name: str | None) -> RouterStrategy:
        """The router for ``name``; ``None`` → ``rules``; an unknown name logs a warning and gives
        ``rules`` (AUTO-5)."""
        if not name:
            return self.find("rules") or _RULES
        impl = self.find(name)
        if impl is None:
            log.warning("unknown auto router strategy %r: using 'rules'", name)
            return self.find("rules") or _RULES
        return impl

    def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext, name: str | None) -> RouterDecision:
        """``get(name).select(pool, ctx)``; an empty pool raises ``ValueError``."""
        if not pool:
            raise ValueError("empty candidate pool")
        return self.get(name).select(pool, ctx)


DEFAULT_ROUTERS: Final = RouterRegistry(
    (_RULES, ScoreRouter(), CostRouter(), LatencyRouter(), SlaRouter(), LkgpRouter())
)
"""The process-wide defaults: the built-ins plus whatever :func:`register_router` added."""
ROUTERS: Final[dict[str, RouterStrategy]] = DEFAULT_ROUTERS.by_name
"""Name → router of the process defaults."""


def register_router(name: str, impl: RouterStrategy) -> None:
    """Add (or replace) the router called ``name`` in the process defaults (AUTO-5), seen by every
    gateway of the process; an application passes its routers to
    ``create_app(..., extensions=Extensions(routers=...))`` instead."""
    DEFAULT_ROUTERS.register(name, impl)


register_strategy = register_router
"""The former name of :func:`register_router` (same arguments, ``(name, impl)``)."""


def get_strategy(name: str | None) -> RouterStrategy:
    """The router for ``name`` in the process defaults (see :meth:`RouterRegistry.get`)."""
    return DEFAULT_ROUTERS.get(name)


def select_with_strategy(
    pool: Sequence[CandidateInputs], ctx: RouterContext, name: str | None
) -> RouterDecision:
    """``get_strategy(name).select(pool, ctx)`` over the process defaults; an empty pool raises
    ``ValueError``."""
    return DEFAULT_ROUTERS.select(pool, ctx, name)
