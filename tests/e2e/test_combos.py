"""Combos through the HTTP API with fake providers O, C, G (one healthy connection each unless said;
combos use maxRetries 0): every acceptance case — the 19 strategies (COMBO-3), COMBO-4
options, SPEC §4 resolution with mappings, nested refs, edits on the next request, API-2 limits and
the RESIL-7 exhaustion diagnostics for every strategy."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from combo_support import Api, C, G, O, behaviour, combo_config, cool, set_quota, upstream_messages

from omniroute.clock import FakeClock
from omniroute.config import config_from_dict
from omniroute.core.combo import ROUTING_STRATEGY_VALUES
from omniroute.routing.strategies.affinity import HANDOFF_MARKER, lkgp_record_key
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MakeGateway = Callable[..., GatewayThread]


@pytest.fixture
def api(make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path) -> Api:
    """A gateway with extra catalog models and one connection per provider; fakes reset."""
    return Api(make_gateway(replace=combo_config(fakes, tmp_path)))


@pytest.fixture
def api2(make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path) -> Api:
    """As ``api`` plus a second O connection ``o2`` and the tag ``team-x`` on ``o1``."""
    cfg = combo_config(fakes, tmp_path, tags={"o1": ["team-x"]}, extra_connections=["o2"])
    return Api(make_gateway(replace=cfg))


# -- priority, fallback, headers ---------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_priority_uses_the_first_target_and_falls_back_on_503(api: Api, stream: bool) -> None:
    """COMBO-3 priority [O, C]: 3 requests → O, O, O; with O failing 503 → O then C, final 200."""
    api.combo("p", [O, C])
    assert api.served("p", 3, stream=stream) == ["o", "o", "o"]
    api.combo("pf", [f"{O}+fail-503", C])
    r = api.chat("pf", stream=stream)
    assert r.status_code == 200
    assert r.headers["x-omniroute-provider"] == "local-c"
    assert r.headers["x-omniroute-attempts"] == "2"
    assert r.headers["x-omniroute-strategy"] == "priority"
    assert "fallback=local-o:503>local-c:200" in r.headers["x-omniroute-decision"]
    assert "combo=pf" in r.headers["x-omniroute-decision"]


def test_decision_of_a_combo_request_names_strategy_reason_and_candidates(api: Api) -> None:
    """API-7 / OBS-2: the decision carries strategy, combo, reason and the ordered candidates."""
    api.combo("dec", [O, C], strategy="cost-optimized")
    r = api.chat("dec")
    d = api.http.get(f"/api/routing/decisions/{r.headers['x-request-id']}").json()
    assert d["strategy"] == "cost-optimized" and d["combo"] == "dec" and d["route"] == "combo"
    assert "cheapest" in d["reason"]
    assert [c["provider"] for c in d["candidates"]] == ["local-c", "local-o"]


# -- rotation ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_round_robin_sticky_batches_default_three(api: Api, stream: bool) -> None:
    """COMBO-3 round-robin [O, C, G], default sticky limit 3: 9 requests → O×3, C×3, G×3."""
    api.combo("rr", [O, C, G], strategy="round-robin")
    assert api.served("rr", 9, stream=stream) == ["o"] * 3 + ["c"] * 3 + ["g"] * 3


def test_round_robin_sticky_limit_one_rotates(api: Api) -> None:
    """COMBO-3 round-robin with stickyRoundRobinLimit 1 → O, C, G, O, C, G."""
    api.combo("rr1", [O, C, G], strategy="round-robin", stickyRoundRobinLimit=1)
    assert api.served("rr1", 6) == ["o", "c", "g", "o", "c", "g"]


def test_round_robin_uses_global_combo_defaults_when_combo_is_silent(
    make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """COMBO-3 cascade combo → global → default: config ``combo_defaults.stickyRoundRobinLimit: 1``
    applies to a combo that does not set it; a combo's own value still wins."""
    cfg = combo_config(fakes, tmp_path)
    cfg["combo_defaults"] = {"stickyRoundRobinLimit": 1}
    api = Api(make_gateway(replace=cfg))
    api.combo("rrg", [O, C, G], strategy="round-robin")
    assert api.served("rrg", 6) == ["o", "c", "g", "o", "c", "g"]
    api.combo("rr2", [O, C, G], strategy="round-robin", stickyRoundRobinLimit=2)
    assert api.served("rr2", 4) == ["o", "o", "c", "c"]


def test_strict_random_covers_every_target_in_each_cycle(api: Api) -> None:
    """COMBO-3 strict-random [O, C, G]: every window of 3 from the start of a cycle covers all three."""
    api.combo("sr", [O, C, G], strategy="strict-random")
    served = api.served("sr", 9)
    for i in range(0, 9, 3):
        assert sorted(served[i : i + 3]) == ["c", "g", "o"], served


def test_least_used_prefers_the_less_used_target(api: Api) -> None:
    """COMBO-3 least-used [O, C] with one prior request on O → C first."""
    api.combo("lu", [O, C], strategy="least-used")
    assert api.served("lu", 1) == ["o"]
    assert api.served("lu", 1) == ["c"]


# -- chance ------------------------------------------------------------------------------------------


def test_weighted_70_30_share_over_2000_requests(api: Api) -> None:
    """COMBO-3 weighted 70/30, stickyWeightedLimit 1, 2,000 seeded requests → O's share 0.70 ± 0.04."""
    api.combo(
        "w",
        [{"model": O, "weight": 70}, {"model": C, "weight": 30}],
        strategy="weighted",
        stickyWeightedLimit=1,
    )
    served = api.burst("w", 2000)
    assert abs(served.count("o") / 2000 - 0.70) <= 0.04


def test_weighted_zero_weight_is_only_a_fallback(api: Api, fakes: dict[str, FakeProviderThread]) -> None:
    """COMBO-3 weighted [1, 0]: the 0-weight target is never drawn while the other is reachable, but
    serves as the fallback when it fails."""
    api.combo("w10", [{"model": O, "weight": 1}, {"model": C, "weight": 0}], strategy="weighted")
    assert set(api.burst("w10", 50)) == {"o"}
    with behaviour(fakes["o"], "model-o", "fail-500"):
        r = api.chat("w10")
    assert r.status_code == 200 and r.headers["x-omniroute-provider"] == "local-c"


def test_random_and_p2c_use_every_healthy_target_and_p2c_avoids_half_open(
    make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """COMBO-3 random and p2c over 300 requests: all healthy targets used; p2c never prefers a
    HALF_OPEN target over a healthy one in a pair. The gateway runs on a fake clock, so the targets'
    measured latencies are equal whatever the machine's load (on real time, a busy machine made one
    fake slower and p2c then rightly never picked it)."""
    api = Api(make_gateway(replace=combo_config(fakes, tmp_path), clock=FakeClock()))
    api.combo("rnd", [O, C, G], strategy="random")
    assert set(api.burst("rnd", 300)) == {"o", "c", "g"}
    api.combo("p2c", [O, C, G], strategy="p2c")
    assert set(api.burst("p2c", 300)) == {"o", "c", "g"}

    async def half_open(gw: Any) -> None:
        for _ in range(5):
            await gw.state.breaker_failure(
                "local-g", gw.clock.time() - 100, failure_threshold=5, reset_timeout_s=1,
                max_multiplier=16, reason="503",
            )  # fmt: skip

    api.gt.call(half_open)
    snap = api.http.get("/api/resilience").json()
    assert snap["breakers"]["local-g"]["state"] == "HALF_OPEN"
    served = Counter(api.burst("p2c", 300))
    assert served["g"] == 0 and served["o"] > 0 and served["c"] > 0


# -- catalog-driven ----------------------------------------------------------------------------------


def test_cost_optimized_puts_the_cheaper_model_first(api: Api) -> None:
    """COMBO-3 cost-optimized [gemini-2.5-pro ($2.00/M in), gpt-4o-mini ($0.15/M in)] → gpt-4o-mini."""
    api.combo("cost", ["local-g/gemini-2.5-pro", "local-o/gpt-4o-mini"], strategy="cost-optimized")
    r = api.chat("cost")
    assert r.headers["x-omniroute-model"] == "gpt-4o-mini"


def test_context_optimized_puts_the_larger_window_first(api: Api) -> None:
    """COMBO-3 context-optimized [gpt-4o-mini (128k), gemini-2.5-flash (1M)] → gemini first."""
    api.combo("ctx", ["local-o/gpt-4o-mini", "local-g/gemini-2.5-flash"], strategy="context-optimized")
    assert api.chat("ctx").headers["x-omniroute-model"] == "gemini-2.5-flash"


# -- quota -------------------------------------------------------------------------------------------


def test_headroom_prefers_the_connection_with_more_quota_left(api: Api) -> None:
    """COMBO-3 headroom: O at 90 % utilisation, C at 10 % → C first."""
    for conn, remaining in (("o1", 0.10), ("c1", 0.90)):
        set_quota(api.gt, conn, remaining, 3600)
    api.combo("head", [O, C], strategy="headroom")
    assert api.served("head", 1) == ["c"]


def test_reset_aware_puts_a_spent_quota_behind_an_unknown_one(api: Api) -> None:
    """COMBO-3 reset-aware: O's quota limit reached, C unknown → C first."""
    set_quota(api.gt, "o1", 0.0, 3600)
    api.combo("ra", [O, C], strategy="reset-aware")
    assert api.served("ra", 1) == ["c"]


def test_reset_window_puts_the_earliest_reset_first(api: Api) -> None:
    """COMBO-3 reset-window: G resets in 1 h, O unknown → G first."""
    set_quota(api.gt, "g1", 0.5, 3600)
    api.combo("rw", [O, G], strategy="reset-window")
    assert api.served("rw", 1) == ["g"]


def test_fill_first_stays_until_rate_limited_then_returns_after_cooldown(
    make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread]
) -> None:
    """COMBO-3 fill-first [O, C]: O until O's connection is rate-limited, then C, back to O after the
    cooldown (RESIL-2 hint ``retry-after-ms``)."""
    api = Api(make_gateway(clock=FakeClock()))
    api.combo("ff", [O, C], strategy="fill-first")
    assert api.served("ff", 2) == ["o", "o"]
    with behaviour(fakes["o"], "model-o", "fail-429+retry-ms-700"):
        r = api.chat("ff")
        assert r.headers["x-omniroute-provider"] == "local-c" and r.headers["x-omniroute-attempts"] == "2"
        r = api.chat("ff")
        assert r.headers["x-omniroute-provider"] == "local-c" and r.headers["x-omniroute-attempts"] == "1"
    api.gt.advance(0.8)
    assert api.served("ff", 2) == ["o", "o"]


# -- memory: lkgp, cache, relay --------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_lkgp_orders_by_the_record_and_success_updates_it(api: Api, stream: bool) -> None:
    """COMBO-3 lkgp: no record → definition order; a success on O updates the record; record C → C."""
    api.combo("lk", [O, C], strategy="lkgp")
    assert api.served("lk", 1, stream=stream) == ["o"]
    rec = api.gt.call(lambda gw: gw.state.get_json(lkgp_record_key("lk")))
    assert rec == {"provider": "local-o", "connection": "o1", "model": "model-o"}
    record = {"provider": "local-c", "connection": "c1", "model": "model-c"}
    api.gt.call(lambda gw: gw.state.set_json(lkgp_record_key("lk"), record))
    assert api.served("lk", 2, stream=stream) == ["c", "c"]


def test_cache_optimized_keeps_a_key_on_one_connection_and_spreads_keys(api2: Api) -> None:
    """COMBO-3 cache-optimized: one ``prompt_cache_key`` → one connection across 50 requests;
    different keys spread over connections (O has two)."""
    api2.combo("cache", [O, C, G], strategy="cache-optimized")
    conns = set()
    for _ in range(50):
        r = api2.chat("cache", prompt_cache_key="conversation-42")
        conns.add(r.headers["x-omniroute-connection"])
    assert len(conns) == 1
    spread = {
        api2.chat("cache", prompt_cache_key=f"k{i}").headers["x-omniroute-connection"] for i in range(40)
    }
    assert len(spread) >= 3


@pytest.mark.parametrize("stream", [False, True])
def test_context_relay_injects_a_handoff_when_the_session_switches_model(
    api: Api, fakes: dict[str, FakeProviderThread], stream: bool
) -> None:
    """COMBO-3 context-relay: a session that switches from O to C gets a handoff summary, visible in
    the upstream request to C; without a session header there is no handoff."""
    api.combo("relay", [O, C], strategy="context-relay")
    session = {"x-session-id": f"sess-{stream}"}
    convo = [
        {"role": "user", "content": "Plan a trip to Lisbon"},
        {"role": "assistant", "content": "Day 1: Alfama and the castle."},
        {"role": "user", "content": "And day 2?"},
    ]
    r = api.chat("relay", stream=stream, headers=session, messages=convo)
    assert r.headers["x-omniroute-provider"] == "local-o"
    assert not any(HANDOFF_MARKER in str(m.get("content")) for m in upstream_messages(fakes["o"]))
    cool(api.gt, "o1")
    r = api.chat("relay", stream=stream, headers=session, messages=convo)
    assert r.status_code == 200 and r.headers["x-omniroute-provider"] == "local-c"
    handoff = [m for m in upstream_messages(fakes["c"]) if HANDOFF_MARKER in str(m.get("content"))]
    assert (
        len(handoff) == 1 and "local-o/model-o" in handoff[0]["content"] and "Alfama" in handoff[0]["content"]
    )
    api.chat("relay", stream=stream, messages=convo)
    assert not any(HANDOFF_MARKER in str(m.get("content")) for m in upstream_messages(fakes["c"]))


# -- COMBO-4 options ---------------------------------------------------------------------------------


def test_tag_routing_keeps_matching_connections_and_an_unknown_tag_keeps_all(api2: Api) -> None:
    """COMBO-4: request tag ``team-x`` keeps only targets whose connection has it (o1); an unknown tag
    keeps all; removed targets are recorded as exclusions."""
    api2.combo("tags", [C, O, G])
    r = api2.chat("tags", headers={"x-omniroute-tags": "team-x"})
    assert r.headers["x-omniroute-connection"] == "o1"
    d = api2.http.get(f"/api/routing/decisions/{r.headers['x-request-id']}").json()
    excluded = {(e["provider"], e["connection"]) for e in d["exclusions"]}
    assert {("local-c", "c1"), ("local-g", "g1"), ("local-o", "o2")} <= excluded
    r = api2.chat("tags", headers={"x-omniroute-tags": "nobody-has-this"})
    assert r.headers["x-omniroute-provider"] == "local-c"


def test_connection_aware_expansion_rotates_over_connections(api2: Api) -> None:
    """COMBO-4 connectionAwareExpansion: a provider-level step becomes one target per connection
    before ordering; off (default) the strategy sees the step and the first connection serves."""
    api2.combo("exp", [O], strategy="round-robin", stickyRoundRobinLimit=1, connectionAwareExpansion=True)
    conns = [api2.chat("exp").headers["x-omniroute-connection"] for _ in range(4)]
    assert conns == ["o1", "o2", "o1", "o2"]
    api2.combo("noexp", [O], strategy="round-robin", stickyRoundRobinLimit=1)
    assert {api2.chat("noexp").headers["x-omniroute-connection"] for _ in range(4)} == {"o1"}


def test_per_target_timeout_moves_on_to_the_next_target(api: Api) -> None:
    """COMBO-4 per-target timeout: a target slower than its ``timeout_ms`` is abandoned for the next."""
    api.combo("to", [{"model": f"{O}+slow-ttft-3000", "timeout_ms": 300}, C])
    t0 = time.monotonic()
    r = api.chat("to")
    assert r.status_code == 200 and r.headers["x-omniroute-provider"] == "local-c"
    assert time.monotonic() - t0 < 2.5


def test_max_retries_is_the_per_target_transient_retry_budget(api: Api) -> None:
    """COMBO-4 maxRetries → RESIL-6 per-target retries: 1 retries O once, 0 moves on to C."""
    api.combo("mr1", [f"{O}+fail-500-times-1+r1", C], maxRetries=1)
    r = api.chat("mr1")
    assert r.headers["x-omniroute-provider"] == "local-o" and r.headers["x-omniroute-attempts"] == "2"
    api.combo("mr0", [f"{O}+fail-500-times-1+r0", C], maxRetries=0)
    r = api.chat("mr0")
    assert r.headers["x-omniroute-provider"] == "local-c" and r.headers["x-omniroute-attempts"] == "2"


# -- resolution, mappings, refs, edits ----------------------------------------------------------------


def test_mapping_routes_matching_models_and_exact_combo_names_win(api: Api) -> None:
    """SPEC §4 / COMBO-2: mapping ``gpt-4*`` → X serves ``gpt-4o-mini`` through X; a disabled mapping
    is ignored; a combo named exactly ``gpt-4o`` wins and warns on creation."""
    api.combo("X", [G])
    r = api.http.post("/api/model-combo-mappings", json={"pattern": "GPT-4*", "combo": "X", "priority": 5})
    assert r.status_code == 201, r.text
    mapping = r.json()
    r = api.chat("gpt-4o-mini")
    assert r.headers["x-omniroute-provider"] == "local-g"
    assert (
        "route=mapping" in r.headers["x-omniroute-decision"]
        and "combo=X" in r.headers["x-omniroute-decision"]
    )
    shadow = api.combo("gpt-4o", [C])
    assert (
        shadow["warning"]["code"] == "COMBO_NAME_SHADOWS_MODEL" and shadow["warning"]["modelId"] == "gpt-4o"
    )
    r = api.chat("gpt-4o")
    assert (
        r.headers["x-omniroute-provider"] == "local-c" and "route=combo;" in r.headers["x-omniroute-decision"]
    )
    assert (
        api.http.put(f"/api/model-combo-mappings/{mapping['id']}", json={"enabled": False}).status_code == 200
    )
    r = api.chat("gpt-4o-mini")
    assert "route=mapping" not in r.headers.get("x-omniroute-decision", "")
    assert r.headers.get("x-omniroute-provider") != "local-g"


def test_combo_prefix_and_case_insensitive_fallback(api: Api) -> None:
    """SPEC §4 steps 2 and the case-insensitive fallback."""
    api.combo("MyCombo", [C])
    assert api.chat("combo/MyCombo").headers["x-omniroute-provider"] == "local-c"
    assert api.chat("mycombo").headers["x-omniroute-provider"] == "local-c"


def test_an_edit_changes_routing_on_the_very_next_request(api: Api) -> None:
    """COMBO-1: the combo cache is invalidated by every edit."""
    created = api.combo("edit", [O, C])
    assert api.served("edit", 1) == ["o"]
    assert api.http.put(f"/api/combos/{created['id']}", json={"targets": [C, O]}).status_code == 200
    assert api.served("edit", 1) == ["c"]
    assert api.http.put("/api/combos/edit", json={"strategy": "context-optimized"}).status_code == 200
    assert api.served("edit", 1) == ["c"]
    assert api.http.delete("/api/combos/edit").status_code == 200
    assert api.chat("edit").status_code == 404


def test_nested_combo_ref_falls_back_inline(api: Api) -> None:
    """COMBO-1: A = [ref B, O], B = [C]; C failing → O serves."""
    api.combo("B", [f"{C}+fail-503"])
    api.combo("A", [{"combo_ref": "B"}, O])
    r = api.chat("A")
    assert r.status_code == 200 and r.headers["x-omniroute-provider"] == "local-o"
    assert "fallback=local-c:503>local-o:200" in r.headers["x-omniroute-decision"]


# -- API-2 --------------------------------------------------------------------------------------------


def test_models_lists_combos_with_the_max_limits_of_their_targets(api: Api) -> None:
    """API-2: a combo's context_length / max_output_tokens = MAX over its targets."""
    api.combo("lim", [O, G])
    api.combo("lim2", [{"combo_ref": "lim"}, C])
    models = {m["id"]: m for m in api.http.get("/v1/models").json()["data"]}
    assert (models["lim"]["context_length"], models["lim"]["max_output_tokens"]) == (1000000, 16384)
    assert (models["lim2"]["context_length"], models["lim2"]["max_output_tokens"]) == (1000000, 16384)
    assert models["lim"]["owned_by"] == "combo"


# -- every strategy: headers, exhaustion ------------------------------------------------------------

STRATEGIES = [s for s in ROUTING_STRATEGY_VALUES if s not in ("auto", "fusion", "pipeline")]


@pytest.fixture(scope="module")
def every_strategy(fakes: dict[str, FakeProviderThread], tmp_path_factory: pytest.TempPathFactory) -> Any:
    combos = [
        {
            "name": f"all-{s}",
            "strategy": s,
            "targets": [{"model": m} for m in (O, C, G)],
            "config": {"maxRetries": 0},
        }
        for s in STRATEGIES
    ]
    cfg = combo_config(fakes, tmp_path_factory.mktemp("all"), combos=combos)
    gt = GatewayThread(config_from_dict(cfg, env={})).start()
    yield Api(gt)
    gt.stop()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_serves_and_reports_itself(every_strategy: Api, strategy: str) -> None:
    """API-7 / COMBO-3: each strategy answers 200 and names itself in X-OmniRoute-Strategy."""
    r = every_strategy.chat(f"all-{strategy}")
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-strategy"] == strategy


@pytest.fixture(scope="module")
def exhausted(fakes: dict[str, FakeProviderThread], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A gateway with one combo per strategy over [O, C, G] and every connection cooling down."""
    combos = [
        {
            "name": f"ex-{s}",
            "strategy": s,
            "targets": [{"model": m} for m in (O, C, G)],
            "config": {"maxRetries": 0},
        }
        for s in STRATEGIES
    ]
    cfg = combo_config(fakes, tmp_path_factory.mktemp("ex"), combos=combos)
    gt = GatewayThread(config_from_dict(cfg, env={})).start()
    cool(gt, "o1", "c1", "g1")
    yield Api(gt)
    gt.stop()


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_exhaustion_lists_each_filtered_target(exhausted: Api, strategy: str) -> None:
    """RESIL-7 for every strategy: when the ladder filters every target, the error lists each target
    with its reason."""
    r = exhausted.chat(f"ex-{strategy}")
    assert r.status_code in (429, 503), r.text
    body = r.json()
    assert body["error"]["code"] == "all_candidates_unavailable"
    excluded = body["diagnostics"]["excluded"]
    assert {(e["provider"], e["connection"]) for e in excluded} == {
        ("local-o", "o1"),
        ("local-c", "c1"),
        ("local-g", "g1"),
    }
    assert all("rate limited" in e["reason"] for e in excluded)
