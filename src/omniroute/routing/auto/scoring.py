"""The 16-factor auto-combo score (AUTO-3): factor order, ``DEFAULT_WEIGHTS``, weight normalisation,
the per-candidate input record and the pool-relative scorer.

Every factor is in [0, 1] and the score is ``Σ weight·factor`` with weights summing to 1. Absolute
factors (quota, health, taskFit, tiers, …) are filled in when a candidate's inputs are measured
(:mod:`omniroute.routing.auto.inputs`); the three pool-relative ones are computed by
:func:`score_pool` against the pool maxima (SPEC AUTO-3):

- ``costInv = 1 − cost/max cost`` (cost = .6·input + .4·output USD per 1M tokens; an unknown price
  counts as the pool max; the max is at least 0.001),
- ``latencyInv = 1 − p95/max p95`` (ms; max at least 1),
- ``stability = 1 − stddev/max stddev`` (ms; max at least 0.001).

Numbers: ``DEFAULT_WEIGHTS`` are SPEC AUTO-3 (= seed ``001_c34bc1230a1e43d4.txt`` "Factor / Default
Weight"). Speed (PERF-3): a candidate's factors live in one preallocated list, weights are a plain
tuple in :data:`FACTORS` order unpacked once per pool, and the weighted sum is unrolled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from omniroute.values import Candidate

__all__ = [
    "DEFAULT_WEIGHTS",
    "DEFAULT_WEIGHT_VECTOR",
    "FACTORS",
    "HEALTH_BY_STATE",
    "TIER_PRIORITY",
    "CandidateInputs",
    "normalize_scoring_weights",
    "rank",
    "score_pool",
    "top_factors",
    "weight_vector",
]

FACTORS: Final[tuple[str, ...]] = (
    "quota",
    "health",
    "costInv",
    "latencyInv",
    "taskFit",
    "stability",
    "tierPriority",
    "tierAffinity",
    "specificityMatch",
    "contextAffinity",
    "sessionAvailability",
    "connectionDensity",
    "cacheAffinity",
    "resetWindowAffinity",
    "quality",
    "reliability",
)
"""The 16 factors in vector order (AUTO-3)."""

I_QUOTA, I_HEALTH, I_COST, I_LATENCY, I_TASK, I_STABILITY = 0, 1, 2, 3, 4, 5
I_TIER_PRIORITY, I_TIER_AFFINITY, I_SPECIFICITY, I_CONTEXT, I_SESSION, I_DENSITY = 6, 7, 8, 9, 10, 11
I_CACHE, I_RESET, I_QUALITY, I_RELIABILITY = 12, 13, 14, 15

DEFAULT_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "quota": 0.1429,
        "health": 0.1605,
        "costInv": 0.1429,
        "latencyInv": 0.1143,
        "taskFit": 0.0762,
        "stability": 0.0476,
        "tierPriority": 0.0476,
        "tierAffinity": 0.0476,
        "specificityMatch": 0.0476,
        "contextAffinity": 0.0476,
        "sessionAvailability": 0.0476,
        "connectionDensity": 0.0476,
        "cacheAffinity": 0.0,
        "resetWindowAffinity": 0.0,
        "quality": 0.03,
        "reliability": 0.0,
    }
)
"""SPEC AUTO-3 default weights; they sum to 1.0."""

HEALTH_BY_STATE: Mapping[str, float] = MappingProxyType({"CLOSED": 1.0, "HALF_OPEN": 0.5, "OPEN": 0.0})
"""``health`` by provider breaker state (AUTO-3)."""

_HEALTH: Final[dict[str, float]] = dict(HEALTH_BY_STATE)  # a plain dict reads faster on the hot path

TIER_PRIORITY: Mapping[str, float] = MappingProxyType(
    {"ultra": 1.0, "pro": 0.67, "standard": 0.33, "free": 0.0}
)
"""``tierPriority`` by connection account tier (AUTO-3); an unknown tier counts as ``standard``."""

MIN_MAX_COST: Final = 0.001
MIN_MAX_LATENCY_MS: Final = 1.0
MIN_MAX_STDDEV_MS: Final = 0.001


def normalize_scoring_weights(weights: Mapping[str, Any] | None) -> dict[str, float]:
    """Custom weights → a distribution over the 16 factors (AUTO-3).

    Missing factors count 0; negative, non-finite or non-numeric values become 0; the rest are divided
    by their total. ``None``, an empty map or an all-zero map gives :data:`DEFAULT_WEIGHTS`. Unknown
    keys are ignored."""
    if not weights:
        return dict(DEFAULT_WEIGHTS)
    clean: dict[str, float] = {}
    for name in FACTORS:
        raw = weights.get(name, 0.0)
        try:
            v = float(raw)
        except (TypeError, ValueError):
            v = 0.0
        clean[name] = v if math.isfinite(v) and v > 0 else 0.0
    total = sum(clean.values())
    if total <= 0:
        return dict(DEFAULT_WEIGHTS)
    return {k: v / total for k, v in clean.items()}


def weight_vector(weights: Mapping[str, float]) -> tuple[float, ...]:
    """A weight map → a tuple in :data:`FACTORS` order (missing factors 0)."""
    return tuple(float(weights.get(name, 0.0)) for name in FACTORS)


DEFAULT_WEIGHT_VECTOR: Final[tuple[float, ...]] = weight_vector(DEFAULT_WEIGHTS)


class CandidateInputs:
    """One candidate's scoring inputs and results (mutable, one per candidate per request).

    ``cost`` blended USD per 1M tokens (``None`` = unknown price); ``p95_ms`` / ``stddev_ms`` latency
    in ms; ``error_rate`` a fraction; ``breaker`` the provider breaker state seen now (``CLOSED``,
    ``HALF_OPEN`` or ``OPEN``); ``factors`` the 16 factor values in :data:`FACTORS` order (absolute
    factors set by the caller, relative ones by :func:`score_pool`); ``score`` the weighted sum.
    ``measured`` tells whether latency came from measurements (else catalog/bootstrap defaults);
    ``key`` is the candidate key ``provider/model@connection``. ``factors`` is taken, not copied.
    """

    __slots__ = (
        "breaker",
        "cand",
        "cost",
        "error_rate",
        "factors",
        "key",
        "measured",
        "p95_ms",
        "score",
        "stddev_ms",
    )

    def __init__(
        self,
        cand: Candidate,
        cost: float | None,
        p95_ms: float,
        stddev_ms: float,
        error_rate: float = 0.0,
        breaker: str = "CLOSED",
        factors: list[float] | None = None,
        measured: bool = False,
        key: str | None = None,
    ) -> None:
        self.cand = cand
        self.cost = cost
        self.p95_ms = p95_ms
        self.stddev_ms = stddev_ms
        self.error_rate = error_rate
        self.breaker = breaker
        self.key = key if key is not None else cand.key
        if factors is None:
            factors = [0.5] * 16
        factors[I_HEALTH] = _HEALTH.get(breaker, 1.0)
        self.factors: list[float] = factors
        self.measured = measured
        self.score = 0.0

    def factor_map(self) -> dict[str, float]:
        """``{factor: value}`` for the decision (OBS-2)."""
        return dict(zip(FACTORS, self.factors, strict=True))

    def __repr__(self) -> str:
        return f"CandidateInputs({self.cand.key}, score={self.score:.4f})"


def score_pool(pool: Sequence[CandidateInputs], weights: Sequence[float]) -> None:
    """Fill the pool-relative factors and ``score`` of every candidate in place (AUTO-3).

    ``weights`` is a 16-tuple in :data:`FACTORS` order (see :func:`weight_vector`). Linear in the pool
    size: one pass for the maxima, one for the factors and sums (unrolled: PERF-3)."""
    w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15 = weights
    max_cost = MIN_MAX_COST
    max_lat = MIN_MAX_LATENCY_MS
    max_std = MIN_MAX_STDDEV_MS
    for c in pool:
        cost = c.cost
        if cost is not None and cost > max_cost:
            max_cost = cost
        if c.p95_ms > max_lat:
            max_lat = c.p95_ms
        if c.stddev_ms > max_std:
            max_std = c.stddev_ms
    for c in pool:
        f = c.factors
        cost = c.cost
        # v ≤ max for every v, so 1 − v/max ≥ 0 (x/x is exactly 1.0). An unknown price counts as the
        # pool max (AUTO-3): costInv 0.
        ci = 0.0 if cost is None else 1.0 - cost / max_cost
        li = 1.0 - c.p95_ms / max_lat
        si = 1.0 - c.stddev_ms / max_std
        f[I_COST] = ci
        f[I_LATENCY] = li
        f[I_STABILITY] = si
        f0, f1, _, _, f4, _, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15 = f
        c.score = (
            w0 * f0 + w1 * f1 + w2 * ci + w3 * li + w4 * f4 + w5 * si + w6 * f6 + w7 * f7
            + w8 * f8 + w9 * f9 + w10 * f10 + w11 * f11 + w12 * f12 + w13 * f13 + w14 * f14 + w15 * f15
        )  # fmt: skip


def rank(pool: Sequence[CandidateInputs]) -> list[int]:
    """Indices of ``pool`` by score, best first; exact ties keep pool order (stable)."""
    scores = [c.score for c in pool]
    return sorted(range(len(scores)), key=scores.__getitem__, reverse=True)  # reverse keeps ties stable


def top_factors(c: CandidateInputs, weights: Sequence[float], n: int = 3) -> list[tuple[str, float]]:
    """The ``n`` factors that contributed most (weight·value) to ``c``'s score, with their values."""
    f = c.factors
    neg = [-weights[i] * f[i] for i in range(16)]
    contrib = sorted(range(16), key=neg.__getitem__)
    return [(FACTORS[i], c.factors[i]) for i in contrib[:n] if weights[i] > 0]
