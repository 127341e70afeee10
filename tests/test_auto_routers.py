"""Router strategies (AUTO-5), LKGP (AUTO-5a) and mode packs (AUTO-4) with the issue's exact cases."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import pytest

from auto_support import make_gw, plan, provider, seed_latency
from omniroute.errors import InvalidRequest
from omniroute.routing.auto.packs import MODE_ALIASES, MODE_PACKS, resolve_mode
from omniroute.routing.auto.routers import (
    ROUTERS,
    RouterContext,
    RouterDecision,
    SlaPolicy,
    get_strategy,
    register_strategy,
    select_with_strategy,
)
from omniroute.routing.auto.scoring import DEFAULT_WEIGHT_VECTOR, FACTORS, CandidateInputs, score_pool
from omniroute.values import Candidate, Connection


def cand(
    pid: str,
    *,
    p95: float = 1000,
    err: float = 0.0,
    cost: float | None = 1.0,
    std: float = 100,
    breaker: str = "CLOSED",
) -> CandidateInputs:
    p = provider(pid, f"{pid}-model", cost, cost)
    return CandidateInputs(
        Candidate(p, Connection(id=f"{pid}-k", provider=pid, api_key="k"), p.models[0]),
        cost=cost,
        p95_ms=p95,
        stddev_ms=std,
        error_rate=err,
        breaker=breaker,
    )


def scored(*pool: CandidateInputs) -> list[CandidateInputs]:
    score_pool(pool, DEFAULT_WEIGHT_VECTOR)
    return list(pool)


def pick(pool: Sequence[CandidateInputs], d: RouterDecision) -> str:
    return pool[d.index].cand.provider.id


SLA_POOL = (
    dict(pid="fast-flaky", p95=800, err=0.20, cost=2, std=200),
    dict(pid="steady", p95=1400, err=0.01, cost=6, std=100),
    dict(pid="cheap-slow", p95=3500, err=0.01, cost=0.2, std=150),
)


def test_sla_aware_soft_picks_steady_and_explains_p95() -> None:
    """AUTO-5 sla-aware: policy {2000 ms, .05, $10} → steady; reason shows p95 1400/2000 ms."""
    pool = scored(*(cand(**c) for c in SLA_POOL))  # type: ignore[arg-type]
    ctx = RouterContext(sla=SlaPolicy(2000, 0.05, 10))
    d = select_with_strategy(pool, ctx, "sla-aware")
    assert pick(pool, d) == "steady" and d.strategy == "sla-aware"
    assert "p95 1400/2000 ms" in d.reason
    assert d.final_score == pytest.approx(0.35 + 0.35 + 0.15 + 0.10 + 0.05 * 0.5)
    assert select_with_strategy(pool, ctx, "sla").index == d.index  # alias


def test_sla_aware_hard_with_impossible_policy_says_no_candidate_met_them() -> None:
    """AUTO-5: hard constraints {500 ms, .005, $1} → sla-aware, 3 considered, none met all SLOs."""
    pool = scored(*(cand(**c) for c in SLA_POOL))  # type: ignore[arg-type]
    d = select_with_strategy(pool, RouterContext(sla=SlaPolicy(500, 0.005, 1, hard=True)), "sla-aware")
    assert d.strategy == "sla-aware" and d.candidates_considered == 3
    assert "no candidate met all SLA constraints" in d.reason
    assert pick(pool, d) == "cheap-slow"  # smallest total violation: 6 + 1 + 0


def test_sla_soft_and_hard_disagree_as_in_the_issue() -> None:
    """AUTO-5: {p95 500, err .06, $1, σ 10, CLOSED} vs {2000, .05, $5, σ 1000, HALF_OPEN}, policy
    {2000, .05, 5}: soft picks the first (higher score), hard the second (no violation)."""
    pool = scored(
        cand("first", p95=500, err=0.06, cost=1, std=10),
        cand("second", p95=2000, err=0.05, cost=5, std=1000, breaker="HALF_OPEN"),
    )
    soft = select_with_strategy(pool, RouterContext(sla=SlaPolicy(2000, 0.05, 5)), "sla-aware")
    hard = select_with_strategy(pool, RouterContext(sla=SlaPolicy(2000, 0.05, 5, hard=True)), "sla-aware")
    assert pick(pool, soft) == "first" and pick(pool, hard) == "second"
    assert "no candidate met" not in hard.reason


def test_rules_drops_open_unless_all_are_open() -> None:
    """AUTO-5 rules: OPEN candidates are not picked while another exists."""
    pool = scored(cand("a", cost=0.1, breaker="OPEN"), cand("b", cost=5))
    assert pick(pool, select_with_strategy(pool, RouterContext(), "rules")) == "b"
    pool = scored(cand("a", cost=0.1, breaker="OPEN"), cand("b", cost=5, breaker="OPEN"))
    assert select_with_strategy(pool, RouterContext(), "rules").candidates_considered == 2


def test_score_ties_keep_configured_order() -> None:
    """AUTO-5 score: exact ties keep pool order."""
    pool = scored(cand("x"), cand("y"))
    assert pool[0].score == pool[1].score
    assert pick(pool, select_with_strategy(pool, RouterContext(), "score")) == "x"


def test_cost_and_latency_routers_and_aliases() -> None:
    """AUTO-5: cost/eco cheapest healthy; latency/fast lowest p95 + errorRate·1000 among healthy."""
    pool = scored(
        cand("cheap-open", cost=0.01, breaker="OPEN", p95=10),
        cand("cheap", cost=0.5, p95=900, err=0.2),  # 900 + 200
        cand("fast", cost=3, p95=1000, err=0.0),  # 1000
        cand("unknown", cost=None, p95=2000),
    )
    for name in ("cost", "eco"):
        assert pick(pool, select_with_strategy(pool, RouterContext(), name)) == "cheap"
    for name in ("latency", "fast"):
        d = select_with_strategy(pool, RouterContext(), name)
        assert pick(pool, d) == "fast" and d.strategy == "latency"


def test_lkgp_cases_from_the_seed() -> None:
    """AUTO-5a: disabled → rules; record anthropic (enabled or unset) → anthropic, finalScore 1.0,
    seed reason; anthropic OPEN → rules."""
    pool = scored(cand("openai", cost=0.1), cand("anthropic", cost=5))
    off = select_with_strategy(pool, RouterContext(lkgp_enabled=False, last_known_good="anthropic"), "lkgp")
    assert off.strategy == "rules" and pick(pool, off) == "openai"
    for enabled in (True, None):
        d = select_with_strategy(
            pool, RouterContext(lkgp_enabled=enabled, last_known_good="anthropic"), "lkgp"
        )
        assert pick(pool, d) == "anthropic" and d.final_score == 1.0 and d.strategy == "lkgp"
        assert d.reason == "LKGP: using last known good provider anthropic"
    pool = scored(cand("openai", cost=0.1), cand("anthropic", cost=5, breaker="OPEN"))
    d = select_with_strategy(pool, RouterContext(last_known_good="anthropic"), "lkgp")
    assert d.strategy == "rules" and pick(pool, d) == "openai"
    assert select_with_strategy(pool, RouterContext(), "lkgp").strategy == "rules"  # no record


def test_register_strategy_and_unknown_names(caplog: pytest.LogCaptureFixture) -> None:
    """AUTO-5: register_strategy adds a router; an unknown name logs a warning and uses rules."""

    class Last:
        name = "last-one"

        def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext) -> RouterDecision:
            return RouterDecision(len(pool) - 1, self.name, "last", len(pool), 1.0)

    register_strategy("last-one", Last())
    try:
        pool = scored(cand("a", cost=0.1), cand("b", cost=5))
        assert pick(pool, select_with_strategy(pool, RouterContext(), "Last-One")) == "b"
    finally:
        ROUTERS.pop("last-one", None)
    with caplog.at_level(logging.WARNING, logger="omniroute.auto"):
        assert get_strategy("no-such-router").name == "rules"
    assert "no-such-router" in caplog.text


def test_every_mode_pack_sums_to_one_and_zeroes_the_hint_factors() -> None:
    """AUTO-4: six packs from the seed table, each Σ = 1 ± .001, all 16 factors present."""
    assert set(MODE_PACKS) == {
        "ship-fast",
        "cost-saver",
        "quality-first",
        "offline-friendly",
        "reliability-first",
        "chaos-mode",
    }
    for name, pack in MODE_PACKS.items():
        assert set(pack) == set(FACTORS), name
        assert math.isclose(sum(pack.values()), 1.0, abs_tol=0.001), name
        assert pack["tierAffinity"] == pack["specificityMatch"] == pack["resetWindowAffinity"] == 0
    assert MODE_PACKS["ship-fast"]["latencyInv"] == 0.3048
    assert MODE_PACKS["cost-saver"]["costInv"] == 0.3324
    assert MODE_PACKS["quality-first"]["taskFit"] == 0.3524
    assert MODE_PACKS["reliability-first"]["reliability"] == 0.04
    assert MODE_PACKS["chaos-mode"]["health"] == 0.4


def test_mode_aliases() -> None:
    """AUTO-7: fast → ship-fast, cheap → cost-saver, quality → quality-first, reliable, offline,
    balanced/default → default weights, raw pack names, unknown → None (ignored)."""
    assert resolve_mode("fast") == "ship-fast" and resolve_mode("CHEAP") == "cost-saver"
    assert resolve_mode("quality") == "quality-first" and resolve_mode("reliable") == "reliability-first"
    assert resolve_mode("offline") == "offline-friendly" and resolve_mode("balanced") == "default"
    assert resolve_mode("ship-fast") == "ship-fast" and resolve_mode("turbo") is None
    assert resolve_mode(None) is None and MODE_ALIASES["default"] == "default"


async def test_mode_header_switches_the_pack_per_request() -> None:
    """AUTO-7 pack switch: cheap-slow vs expensive-fast → cheap picks cheap-slow, fast picks
    expensive-fast, balanced uses DEFAULT_WEIGHTS, an unknown mode is a 400 naming the header."""
    gw = make_gw([provider("cheap", "slow-m", 0.2, 0.2), provider("pricey", "fast-m", 5.0, 5.0)])
    await seed_latency(gw, "cheap/slow-m@cheap-k", [3000, 3000, 3000])
    await seed_latency(gw, "pricey/fast-m@pricey-k", [500, 500, 500])
    picks = {}
    for i, mode in enumerate(("cheap", "fast", "balanced")):
        cands, _, d = await plan(gw, "auto", headers={"X-OmniRoute-Mode": mode}, session=f"s{i}")
        picks[mode] = (cands[0].provider.id, d.extra["auto"]["weights"])
    assert picks["cheap"] == ("cheap", "cost-saver")
    assert picks["fast"] == ("pricey", "ship-fast")
    assert picks["balanced"][1] == "default"
    with pytest.raises(InvalidRequest, match="X-OmniRoute-Mode"):
        await plan(gw, "auto", headers={"X-OmniRoute-Mode": "nonsense"}, session="s9")
