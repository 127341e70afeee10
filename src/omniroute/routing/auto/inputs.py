"""Measure a pool: each candidate's scoring inputs from the catalog and routing state (AUTO-3).

Sources, per candidate (SPEC AUTO-3; cold-start numbers from reference §3.6):

- cost: catalog blended price (.6·input + .4·output, USD per 1M tokens), ``None`` when unknown.
- p95 / stddev (ms): the live window (:meth:`RoutingState.get_window_stats`) once it holds
  :data:`MIN_LIVE_SAMPLES`; before that the bootstrap table :data:`BOOTSTRAP_P95_MS` (else 1500 ms)
  and stddev ``max(10, .1·p95)``; measured stddev is floored at 10 ms.
- error rate: the live window, else the 24 h usage log (≥ 10 samples), else 0.05.
- breaker state (health), in-flight count (connectionDensity = 1/(1+in-flight)), quota snapshot
  (quota = remaining fraction, 1.0 unknown; resetWindowAffinity = 1 − time-to-reset/5 h, .5 unknown).
- reliability = 1 − failure rate over 24 h with ≥ 10 samples, else the live window, else 1.0. The
  24 h aggregate comes from :meth:`Store.usage_stats`, cached in routing state for
  :data:`RELIABILITY_TTL_S` and refreshed by the first request that finds it missing.
- quality: mean feedback score (:func:`record_feedback`), .5 with no observations.
- tiers, session, context and cache affinities as documented in :func:`measure`.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from omniroute.routing.auto import scoring as s
from omniroute.routing.auto.fitness import task_fitness
from omniroute.routing.auto.statics import (
    BOOTSTRAP_P95_MS,
    DEFAULT_P95_MS,
    MIN_STDDEV_MS,
    CandidateStatic,
    pool_statics,
)
from omniroute.routing.services import RoutingServices
from omniroute.state.base import RoutingState
from omniroute.state.records import QuotaSnapshot, breaker_view
from omniroute.values import Candidate

__all__ = [
    "BOOTSTRAP_P95_MS",
    "DEFAULT_ERROR_RATE",
    "DEFAULT_P95_MS",
    "MIN_HISTORY_SAMPLES",
    "MIN_LIVE_SAMPLES",
    "RELIABILITY_TTL_S",
    "MeasureHints",
    "measure",
    "record_feedback",
    "reliability_stats",
]

log = logging.getLogger("omniroute.auto")

DEFAULT_ERROR_RATE: Final = 0.05
MIN_LIVE_SAMPLES: Final = 3
MIN_HISTORY_SAMPLES: Final = 10
RELIABILITY_TTL_S: Final = 300.0
RESET_HORIZON_S: Final = 5 * 3600.0
OAUTH_FULL_VALIDITY_S: Final = 3600.0
_TIER_ORDER: Final = {"free": 0, "standard": 1, "premium": 2}
_REL_KEY: Final = "auto:rel24"


@dataclass(frozen=True, slots=True)
class MeasureHints:
    """Per-request hints: ``task`` type; ``session_connection`` the connection that served this
    session last (``None`` = no session record); ``tier_hint`` (``free``/``standard``/``premium``)
    and ``specificity`` (0–100) for tierAffinity/specificityMatch; ``cache_key`` for cacheAffinity."""

    task: str = "default"
    session_connection: str | None = None
    tier_hint: str | None = None
    specificity: float | None = None
    cache_key: str | None = None


def tier_affinity(model_tier: str, hint: str | None) -> float:
    """.5 without a hint; same tier 1.0, one step away .7, else .3 (reference §3.7)."""
    if hint is None:
        return 0.5
    a, b = _TIER_ORDER.get(model_tier), _TIER_ORDER.get(hint)
    if a is None or b is None:
        return 0.5
    return (1.0, 0.7, 0.3)[min(2, abs(a - b))]


def specificity_match(model_tier: str, score: float | None) -> float:
    """.5 without a hint; free ≤15 → .9 else .2; standard 15–50 → .9 else .4; premium >50 → .9 else .3."""
    if score is None:
        return 0.5
    if model_tier == "free":
        return 0.9 if score <= 15 else 0.2
    if model_tier == "premium":
        return 0.9 if score > 50 else 0.3
    return 0.9 if 15 < score <= 50 else 0.4


async def reliability_stats(gw: RoutingServices, now: float) -> dict[str, list[int]]:
    """``{candidate key: [requests, failures]}`` over the last 24 h (OBS-1), cached in routing state;
    a missing cache is rebuilt by one request (a 30 s lock record), others read nothing meanwhile."""
    state = gw.state
    try:
        data = await state.get_json(_REL_KEY)
        if isinstance(data, dict):
            return data
        if gw.store is None or await state.get_record(_REL_KEY + ":lock") is not None:
            return {}
        await state.set_record(_REL_KEY + ":lock", "1", ttl_s=30.0)
        stats = await gw.store.usage_stats(now - 86_400)
        fresh = {k: [int(v["requests"]), int(v["failures"])] for k, v in stats.items()}
        await state.set_json(_REL_KEY, fresh, ttl_s=RELIABILITY_TTL_S)
        return fresh
    except Exception:  # the 24 h view is an input, never a reason to fail a request
        log.warning("24 h reliability stats unavailable", exc_info=True)
        return {}


async def record_feedback(state: RoutingState, key: str, score: float) -> None:
    """Add one quality observation in [0, 1] for candidate ``key`` (AUTO-3 ``quality``)."""
    v = max(0.0, min(1.0, float(score)))
    await state.incr_counter(f"auto:q:sum:{key}", round(v * 1000))
    await state.incr_counter(f"auto:q:cnt:{key}")
    await state.incr_counter("auto:q:n")


async def _quality(state: RoutingState, keys: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in keys:
        n = await state.get_counter(f"auto:q:cnt:{k}")
        if n:
            out[k] = await state.get_counter(f"auto:q:sum:{k}") / 1000 / n
    return out


async def measure(
    gw: RoutingServices, pool: Sequence[Candidate], hints: MeasureHints, now: float
) -> list[s.CandidateInputs]:
    """Scoring inputs for every candidate of ``pool`` with the absolute factors filled in
    (relative ones by :func:`~omniroute.routing.auto.scoring.score_pool`). One bulk state read per
    kind; what depends on the candidate alone comes from the registry memo when the pool was cached
    (:func:`remember_statics`)."""
    state = gw.state
    statics, keys, cids = pool_statics(gw.registry.memo, pool)
    stored, _, _ = await state.get_ladder_records((st.provider for st in statics), (), ())
    breaker = {pid: breaker_view(rec, now).value for pid, rec in stored.items()}
    windows = await state.get_window_stats(keys)
    inflight = await state.get_inflight(cids)
    busy_any = any(inflight.values())
    quotas = await state.get_quotas(cids)
    history = await reliability_stats(gw, now)
    quality = await _quality(state, keys) if await state.get_counter("auto:q:n") else {}
    task = hints.task
    # Inputs most requests lack, applied in one branch (PERF-3).
    rare = bool(quotas or quality or history) or hints.session_connection is not None
    rare = rare or hints.tier_hint is not None or hints.specificity is not None
    crc32 = zlib.crc32
    crc_base = crc32(hints.cache_key.encode()) if hints.cache_key else None
    best_crc, winner = -1, ""
    out: list[s.CandidateInputs] = []
    new = s.CandidateInputs
    for c, st in zip(pool, statics, strict=True):
        key = st.key
        f = st.base.copy()
        fit = st.fitness.get(task)
        if fit is None:
            fit = st.fitness[task] = task_fitness(st.model, task)
        f[s.I_TASK] = fit
        exp = st.oauth_expires_at
        if exp is not None:
            f[s.I_SESSION] = max(0.0, min(1.0, (exp - now) / OAUTH_FULL_VALIDITY_S))
        if busy_any:
            busy = inflight.get(st.connection, 0)
            if busy:
                f[s.I_DENSITY] = 1.0 / (1.0 + busy)
        hist_rate = _rare(f, st, hints, quotas, quality, history, now) if rare else None
        w = windows.get(key)
        live = False
        p95, std = st.p95_ms, st.stddev_ms
        if w is None or w.count == 0:
            err = DEFAULT_ERROR_RATE if hist_rate is None else hist_rate
            failure = hist_rate or 0.0
        else:
            if w.count >= MIN_LIVE_SAMPLES:
                err = w.error_rate
                if w.p95_ms is not None:
                    live = True
                    p95 = w.p95_ms
                    std = max(MIN_STDDEV_MS, w.stddev_ms or 0.0)
            else:
                err = hist_rate if hist_rate is not None else DEFAULT_ERROR_RATE
            failure = hist_rate if hist_rate is not None else w.error_rate
        if failure:
            f[s.I_RELIABILITY] = 1.0 - failure
        if crc_base is not None:  # cacheAffinity: rendezvous hashing, the first highest wins
            crc = crc32(st.crc_tail, crc_base)
            if crc > best_crc:
                best_crc, winner = crc, key
        out.append(
            new(c, st.cost, p95, std, err, breaker.get(st.provider, "CLOSED") if breaker else "CLOSED",
                f, live, key)
        )  # fmt: skip
    if crc_base is not None:
        for ci in out:
            if ci.key == winner:
                ci.factors[s.I_CACHE] = 1.0
    return out


def _rare(
    f: list[float],
    st: CandidateStatic,
    hints: MeasureHints,
    quotas: Mapping[str, QuotaSnapshot],
    quality: Mapping[str, float],
    history: Mapping[str, list[int]],
    now: float,
) -> float | None:
    """Fill the factors that come from hints, quota snapshots, feedback and the 24 h history into
    ``f``; returns the 24 h failure rate (``None`` below :data:`MIN_HISTORY_SAMPLES`)."""
    if hints.tier_hint is not None:
        f[s.I_TIER_AFFINITY] = tier_affinity(st.tier, hints.tier_hint)
    if hints.specificity is not None:
        f[s.I_SPECIFICITY] = specificity_match(st.tier, hints.specificity)
    sess = hints.session_connection
    if sess is not None:
        f[s.I_CONTEXT] = 1.0 if st.connection == sess else 0.1
    q = quotas.get(st.connection)
    if q is not None:
        reset = 0.5 if q.reset_at is None else 1.0 - (q.reset_at - now) / RESET_HORIZON_S
        f[s.I_QUOTA] = q.remaining_fraction
        f[s.I_RESET] = max(0.0, min(1.0, reset))
    if quality:
        f[s.I_QUALITY] = quality.get(st.key, 0.5)
    hist = history.get(st.key)
    if hist is not None and hist[0] >= MIN_HISTORY_SAMPLES:
        return hist[1] / hist[0]
    return None


def specificity_of(body: Mapping[str, Any]) -> float:
    """A 0–100 specificity estimate for complexity-aware routing: prompt size, tools and turns."""
    messages = body.get("messages")
    n = len(messages) if isinstance(messages, list) else 0
    chars = sum(len(str(m.get("content") or "")) for m in messages or () if isinstance(m, dict))
    tools = len(body.get("tools") or ())
    return min(100.0, chars / 200 + tools * 8 + n * 2)
