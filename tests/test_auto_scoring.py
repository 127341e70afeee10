"""The 16 scoring factors, DEFAULT_WEIGHTS and weight normalisation (AUTO-3), checked number by number
on the issue's pool A/B example."""

from __future__ import annotations

import math

import pytest

from auto_support import make_gw, plan, provider, row, seed_latency, set_breaker, set_quota
from omniroute.routing.auto.scoring import (
    DEFAULT_WEIGHT_VECTOR,
    DEFAULT_WEIGHTS,
    FACTORS,
    CandidateInputs,
    normalize_scoring_weights,
    score_pool,
)
from omniroute.values import Candidate, Connection

SPEC_DEFAULTS = {
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

# The SPEC AUTO-3 formulas applied by hand to pool A {cost 1, p95 1000, std 100, CLOSED, quota 100 %}
# and B {cost 4, p95 2000, std 200, HALF_OPEN, quota 50 %}; single connection, unknown model, no hints,
# no session record, standard account tier, API-key connection, nothing in flight, no feedback.
EXPECTED_A = {
    "quota": 1.0,
    "health": 1.0,
    "costInv": 1 - 1 / 4,
    "latencyInv": 1 - 1000 / 2000,
    "taskFit": 0.5,
    "stability": 1 - 100 / 200,
    "tierPriority": 0.33,
    "tierAffinity": 0.5,
    "specificityMatch": 0.5,
    "contextAffinity": 0.5,
    "sessionAvailability": 1.0,
    "connectionDensity": 1.0,
    "resetWindowAffinity": 0.5,
    "quality": 0.5,
    "reliability": 1.0,
}
EXPECTED_B = {
    **EXPECTED_A,
    "quota": 0.5,
    "health": 0.5,
    "costInv": 0.0,
    "latencyInv": 0.0,
    "stability": 0.0,
}


def weighted(factors: dict[str, float]) -> float:
    return sum(SPEC_DEFAULTS[k] * v for k, v in factors.items())


def test_default_weights_are_the_spec_numbers_and_sum_to_one() -> None:
    """AUTO-3: DEFAULT_WEIGHTS exactly as in SPEC / seed 001, 16 factors, Σ = 1."""
    assert dict(DEFAULT_WEIGHTS) == SPEC_DEFAULTS
    assert set(FACTORS) == set(SPEC_DEFAULTS) and len(FACTORS) == 16
    assert math.isclose(sum(DEFAULT_WEIGHTS.values()), 1.0, abs_tol=1e-9)


def test_normalize_scoring_weights_renormalises_and_sanitises() -> None:
    """AUTO-3: custom weights renormalised to 1; negative/non-finite → 0; all zero → defaults."""
    w = normalize_scoring_weights({"quota": 2, "health": 1, "costInv": -3, "latencyInv": float("nan")})
    assert w["quota"] == pytest.approx(2 / 3) and w["health"] == pytest.approx(1 / 3)
    assert w["costInv"] == 0 and w["latencyInv"] == 0 and w["taskFit"] == 0
    assert math.isclose(sum(w.values()), 1.0)
    assert normalize_scoring_weights({"quota": 0, "health": -1}) == dict(DEFAULT_WEIGHTS)
    assert normalize_scoring_weights(None) == dict(DEFAULT_WEIGHTS)
    assert normalize_scoring_weights({"quota": "x", "bogus": 5, "health": float("inf")}) == dict(
        DEFAULT_WEIGHTS
    )


def _inputs(
    pid: str, cost: float | None, p95: float, std: float, breaker: str, quota: float
) -> CandidateInputs:
    p = provider(pid, "m", cost, cost)
    c = CandidateInputs(
        Candidate(p, Connection(id=f"{pid}-k", provider=pid, api_key="k"), p.models[0]),
        cost=cost,
        p95_ms=p95,
        stddev_ms=std,
        breaker=breaker,
    )
    c.factors[0] = quota
    return c


def test_pool_relative_factors_follow_the_formulas() -> None:
    """AUTO-3: costInv = 1 − cost/max, latencyInv = 1 − p95/max, stability = 1 − σ/max; an unknown
    price counts as the pool max (costInv 0)."""
    pool = [
        _inputs("a", 1.0, 1000, 100, "CLOSED", 1.0),
        _inputs("b", 4.0, 2000, 200, "HALF_OPEN", 0.5),
        _inputs("u", None, 500, 50, "OPEN", 1.0),
    ]
    score_pool(pool, DEFAULT_WEIGHT_VECTOR)
    a, b, u = (c.factor_map() for c in pool)
    assert (a["costInv"], a["latencyInv"], a["stability"]) == (0.75, 0.5, 0.5)
    assert (b["costInv"], b["latencyInv"], b["stability"]) == (0.0, 0.0, 0.0)
    assert (u["costInv"], u["latencyInv"], u["stability"]) == (0.0, 0.75, 0.75)
    assert (a["health"], b["health"], u["health"]) == (1.0, 0.5, 0.0)
    for c in pool:
        assert c.score == pytest.approx(
            sum(w * f for w, f in zip(DEFAULT_WEIGHT_VECTOR, c.factors, strict=True))
        )


async def test_pool_a_beats_b_and_every_factor_in_the_decision_matches_the_spec() -> None:
    """AUTO-3 acceptance: DEFAULT_WEIGHTS, no hints, A {cost 1, p95 1000, σ 100, CLOSED, quota 100 %}
    vs B {cost 4, p95 2000, σ 200, HALF_OPEN, quota 50 %} → A; each factor equals the formula."""
    gw = make_gw([provider("pa", "model-a", 1.0, 1.0), provider("pb", "model-b", 4.0, 4.0)])
    await seed_latency(gw, "pa/model-a@pa-k", [800, 800, 1000, 1000])  # p95 1000, σ 100
    await seed_latency(gw, "pb/model-b@pb-k", [1600, 1600, 2000, 2000])  # p95 2000, σ 200
    await set_breaker(gw, "pb", "HALF_OPEN")
    await set_quota(gw, "pa-k", 1.0)
    await set_quota(gw, "pb-k", 0.5)
    cands, _, d = await plan(gw, "auto/lkgp")
    assert [c.provider.id for c in cands] == ["pa", "pb"]
    assert d.strategy == "rules"
    for pid, expected in (("pa", EXPECTED_A), ("pb", EXPECTED_B)):
        r = row(d, pid)
        for name, value in expected.items():
            assert r["factors"][name] == pytest.approx(value), (pid, name)
        assert r["score"] == pytest.approx(weighted(expected))
    assert row(d, "pa")["score"] == pytest.approx(0.726933)
    assert row(d, "pb")["score"] == pytest.approx(0.387108)
    assert d.final_score == pytest.approx(0.726933)
    assert d.top_factors[0][0] == "health"
    assert "top=health:1.00" in d.header()


async def test_cold_start_uses_catalog_prices_and_bootstrap_latency() -> None:
    """AUTO-3 cold start: no measurements → bootstrap p95 (1500 ms default, table per model), σ =
    max(10, .1·p95), error rate .05; measured stats replace them once the window has samples."""
    gw = make_gw([provider("pa", "gpt-4o-mini", 1.0, 1.0), provider("pb", "other", 1.0, 1.0)])
    _, _, d = await plan(gw)
    assert row(d, "pa")["p95_ms"] == 2764.0 and row(d, "pb")["p95_ms"] == 1500.0
    assert row(d, "pb")["stddev_ms"] == 150.0 and row(d, "pb")["error_rate"] == 0.05
    assert row(d, "pb")["measured"] is False
    await seed_latency(gw, "pb/other@pb-k", [100, 100, 100], failures=1)
    _, _, d = await plan(gw, request_id="req-2")
    r = row(d, "pb")
    assert r["measured"] is True and r["p95_ms"] == 100.0 and r["stddev_ms"] == 10.0
    assert r["error_rate"] == 0.25 and r["factors"]["reliability"] == 0.75


async def test_connection_density_tier_priority_and_session_availability() -> None:
    """AUTO-3: connectionDensity = 1/(1 + in-flight); tierPriority ultra 1, pro .67, standard .33,
    free 0; sessionAvailability 1 for API keys, OAuth validity (expired → 0) otherwise."""
    p = provider("p", "m", 1.0, 1.0)
    conns = [
        Connection(id="u", provider="p", api_key="k", account_tier="ultra"),
        Connection(id="f", provider="p", api_key="k", account_tier="free"),
        Connection(
            id="o", provider="p", auth_type="oauth", access_token="t", expires_at=1_700_000_000.0 + 1800
        ),
    ]
    gw = make_gw([p], conns)
    await gw.state.incr_inflight("u")
    await gw.state.incr_inflight("u")
    _, _, d = await plan(gw)
    f = {r["connection"]: r["factors"] for r in d.candidates}
    assert f["u"]["connectionDensity"] == pytest.approx(1 / 3) and f["f"]["connectionDensity"] == 1.0
    assert (f["u"]["tierPriority"], f["f"]["tierPriority"], f["o"]["tierPriority"]) == (1.0, 0.0, 0.33)
    assert f["u"]["sessionAvailability"] == 1.0 and f["o"]["sessionAvailability"] == pytest.approx(0.5)
