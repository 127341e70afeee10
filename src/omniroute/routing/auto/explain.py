"""The decision record of an auto plan (OBS-2, API-7): one row per candidate with its 16 factor
values, score, inputs and role (``pick``, ``probe``, ``fallback``, ``excluded``), the router's
strategy, reason and final score, the top factors for ``X-OmniRoute-Decision``, and the flags
``incident_mode`` / ``exploration`` plus the ``auto`` info block (variant, router, weights source,
task type, session, filter, budget, probe, effort).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omniroute.routing.auto import scoring as sc
from omniroute.routing.auto.routers import RouterDecision
from omniroute.routing.decision import Decision
from omniroute.values import Candidate

__all__ = ["PACKED_COLUMNS", "candidate_row", "fill_decision"]

PACKED_COLUMNS = (
    "provider",
    "model",
    "connection",
    "key",
    "role",
    "score",
    "factors",
    "cost_per_1m",
    "p95_ms",
    "stddev_ms",
    "error_rate",
    "breaker",
    "measured",
    "excluded",
)
"""Column order of an auto candidate row in a stored decision (:func:`packed_row`)."""


def packed_row(c: sc.CandidateInputs, role: str, excluded: str | None = None) -> list[Any]:
    """:func:`candidate_row` as values in :data:`PACKED_COLUMNS` order (factors as a list)."""
    cand = c.cand
    return [
        cand.provider.id,
        cand.model.id,
        cand.connection.id,
        c.key,
        role,
        c.score,
        list(c.factors),
        c.cost,
        c.p95_ms,
        c.stddev_ms,
        c.error_rate,
        c.breaker,
        c.measured,
        excluded,
    ]


def candidate_row(c: sc.CandidateInputs, role: str) -> dict[str, Any]:
    """One candidate of the decision: identity, role, score, factors and the measured inputs
    (cost USD per 1M tokens, p95/stddev ms, error rate, breaker state, measured or cold-start)."""
    return {
        "provider": c.cand.provider.id,
        "model": c.cand.model.id,
        "connection": c.cand.connection.id,
        "key": c.key,
        "role": role,
        "score": c.score,
        "factors": c.factor_map(),
        "cost_per_1m": c.cost,
        "p95_ms": c.p95_ms,
        "stddev_ms": c.stddev_ms,
        "error_rate": c.error_rate,
        "breaker": c.breaker,
        "measured": c.measured,
    }


def fill_decision(
    decision: Decision,
    ranked: list[sc.CandidateInputs],
    order: list[int],
    inputs: list[sc.CandidateInputs],
    dropped: Mapping[str, str],
    rd: RouterDecision | None,
    wvec: tuple[float, ...],
    info: dict[str, Any],
    explored: bool,
    probe: Candidate | None,
) -> None:
    """Write the auto plan's outcome into ``decision``: ``ranked[order[0]]`` is what goes first
    after a probe; candidates excluded after scoring are listed with their reason. The candidate
    rows are deferred (:meth:`Decision.defer_candidates`): nothing here may change afterwards."""
    probe_key = probe.key if probe is not None else None

    def rows() -> list[dict[str, Any]]:
        row = candidate_row
        out = [row(ranked[i], "pick" if n == 0 else "fallback") for n, i in enumerate(order)]
        if probe_key is not None:
            for r in out:
                if r["key"] == probe_key:
                    r["role"] = "probe"
        out += [{**row(c, "excluded"), "excluded": dropped[c.key]} for c in inputs if c.key in dropped]
        return out

    def packed() -> dict[str, Any]:
        out = [packed_row(ranked[i], "pick" if n == 0 else "fallback") for n, i in enumerate(order)]
        if probe_key is not None:
            for r in out:
                if r[3] == probe_key:
                    r[4] = "probe"
        out += [packed_row(c, "excluded", dropped[c.key]) for c in inputs if c.key in dropped]
        return {
            "columns": PACKED_COLUMNS,
            "rows": out,
            "nested": {"factors": sc.FACTORS},
            "optional": ["excluded"],
        }

    # The rows (16 factors per candidate) are built when the decision is read or stored, off the
    # request path; every value they read is final here.
    n_dropped = sum(1 for c in inputs if c.key in dropped) if dropped else 0
    decision.defer_candidates(len(order) + n_dropped, rows, packed)
    decision.extra["auto"] = info
    decision.extra["incident_mode"] = info.get("incident_mode", False)
    decision.extra["exploration"] = explored
    if rd is None:
        decision.strategy = "auto"
        decision.reason = "no candidate in the auto pool"
        return
    picked = ranked[order[0]]
    decision.strategy = rd.strategy
    decision.reason = rd.reason
    decision.final_score = rd.final_score
    decision.top_factors = sc.top_factors(picked, wvec)
    decision.extra["router_strategy"] = rd.strategy
    decision.extra["candidates_considered"] = rd.candidates_considered
