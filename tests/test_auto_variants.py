"""Auto ids and composition (AUTO-1), the virtual factory's pool (AUTO-2) and per-request controls
(AUTO-7), in process."""

from __future__ import annotations

import pytest

from auto_support import make_gw, plan, provider
from omniroute.errors import BudgetExceeded, InvalidRequest
from omniroute.routing.auto.controls import estimated_cost_usd, parse_controls, resolve_effort
from omniroute.routing.auto.variants import ADVERTISED_IDS, parse_auto_id
from omniroute.values import ChatRequest, Connection, ModelInfo


@pytest.mark.parametrize(
    ("model", "channel", "pack", "caps", "tier"),
    [
        ("auto", "auto", None, set(), None),
        ("auto/", "auto", None, set(), None),
        ("auto/lkgp", "lkgp", None, set(), None),
        ("AUTO/Coding", "coding", "quality-first", set(), None),
        ("auto/fast", "fast", "ship-fast", set(), None),
        ("auto/cheap", "cheap", "cost-saver", set(), None),
        ("auto/offline", "offline", "offline-friendly", set(), None),
        ("auto/chaos", "chaos", "chaos-mode", set(), None),
        ("auto/reasoning:pro", "reasoning:pro", "quality-first", {"reasoning"}, "premium"),
        ("auto/coding:floor", "coding:floor", "cost-saver", set(), None),
        ("auto/coding:reliable", "coding:reliable", "reliability-first", set(), None),
        ("auto/multimodal:free", "multimodal:free", "quality-first", {"vision"}, "free"),
        ("auto/vision", "vision", "quality-first", {"vision"}, None),
        ("auto/chat", "chat", None, set(), None),
    ],
)
def test_valid_ids_parse(
    model: str, channel: str, pack: str | None, caps: set[str], tier: str | None
) -> None:
    """AUTO-1: variants and ``auto/<category>[:<tier>]`` composition."""
    v = parse_auto_id(model)
    assert (v.channel, v.pack, set(v.capabilities), v.model_tier) == (channel, pack, caps, tier)


def test_smart_explores_at_ten_percent() -> None:
    """AUTO-1/AUTO-8: ``auto/smart`` = quality-first + exploration 10 %."""
    v = parse_auto_id("auto/smart")
    assert v.pack == "quality-first" and v.exploration == 0.10


@pytest.mark.parametrize(
    "model", ["auto/nonsense", "auto/coding:turbo", "auto/a/b", "auto/coding:fast:x", "autox"]
)
def test_invalid_ids_are_400_listing_the_valid_ones(model: str) -> None:
    """AUTO-1: unknown variants → 400 naming the valid ids."""
    with pytest.raises(InvalidRequest) as exc:
        parse_auto_id(model)
    assert exc.value.status == 400 and exc.value.param == "model"
    assert "auto/coding" in exc.value.message and "reasoning" in exc.value.message


def test_every_advertised_id_parses() -> None:
    assert all(parse_auto_id(i).id == i for i in ADVERTISED_IDS)


def _pool_gw():  # type: ignore[no-untyped-def]
    return make_gw(
        [
            provider("plain", "p-model", 1.0, 1.0, caps=["tools"]),
            provider("eyes", "e-model", 1.0, 1.0, caps=["tools", "vision"]),
            provider("thinker", "t-model", 3.0, 15.0, caps=["reasoning"], tier="premium"),
            provider("cheapthink", "c-model", 0, 0, caps=["reasoning"], tier="free"),
        ]
    )


async def test_category_and_tier_filters_with_fail_open() -> None:
    """AUTO-1: ``auto/vision`` keeps vision models; ``auto/reasoning:pro`` only premium reasoning;
    a filter that matches nothing keeps the full pool."""
    gw = _pool_gw()
    cands, _, _ = await plan(gw, "auto/vision")
    assert {c.provider.id for c in cands} == {"eyes"}
    cands, _, _ = await plan(gw, "auto/reasoning:pro")
    assert {c.provider.id for c in cands} == {"thinker"}
    cands, _, d = await plan(gw, "auto/vision:pro")
    assert len(cands) == 4 and "fail-open" in d.extra["auto"]["filter"]
    with pytest.raises(InvalidRequest):
        await plan(gw, "auto/nonsense")


async def test_virtual_factory_one_candidate_per_usable_connection() -> None:
    """AUTO-2: one candidate per active connection with a usable credential; model = default model,
    else the provider's first catalog model; inactive, keyless and expired-token connections skipped."""
    p = provider("p", "first", 1.0, 1.0)
    p = type(p)(id="p", base_url=p.base_url, models=(*p.models, ModelInfo(id="second")))
    conns = [
        Connection(id="a", provider="p", api_key="k"),
        Connection(id="b", provider="p", api_key="k", default_model="second"),
        Connection(id="off", provider="p", api_key="k", is_active=False),
        Connection(id="nokey", provider="p", api_key=""),
        Connection(id="expired", provider="p", auth_type="oauth", access_token="t", expires_at=1.0),
        Connection(id="oauth", provider="p", auth_type="oauth", access_token="t", expires_at=None),
    ]
    gw = make_gw([p], conns)
    cands, _, _ = await plan(gw)
    assert sorted((c.connection.id, c.model.id) for c in cands) == [
        ("a", "first"),
        ("b", "second"),
        ("oauth", "first"),
    ]


async def test_persisted_auto_combo_uses_pool_weights_and_router() -> None:
    """AUTO-2: a persisted ``strategy: "auto"`` combo takes candidatePool, weights and routerStrategy."""
    combo = {
        "name": "my-auto",
        "strategy": "auto",
        "targets": [],
        "config": {"routerStrategy": "cost", "auto": {"candidatePool": ["plain", "thinker"]}},
    }
    gw = make_gw(
        [
            provider("plain", "p-model", 1.0, 1.0),
            provider("thinker", "t-model", 3.0, 15.0),
            provider("cheapest", "c-model", 0.01, 0.01),
        ],
        combos=[combo],
    )
    cands, _, d = await plan(gw, "my-auto")
    assert [c.provider.id for c in cands] == ["plain", "thinker"]
    assert d.strategy == "cost" and d.combo == "my-auto"
    combo2 = {**combo, "name": "weighted", "config": {"auto": {"weights": {"costInv": 0, "quota": 1}}}}
    gw = make_gw([provider("plain", "p-model", 1.0, 1.0)], combos=[combo2])
    _, _, d = await plan(gw, "weighted")
    assert d.strategy == "rules" and d.extra["auto"]["weights"] == "custom"


def test_parse_controls_and_aliases() -> None:
    """AUTO-7: mode, budget (> 0, finite), budget fallback aliases, effort auto, seed."""
    c = parse_controls(
        {
            "x-omniroute-mode": "Fast",
            "x-omniroute-budget": "0.05",
            "x-omniroute-budget-fallback": "block",
            "x-omniroute-effort": "auto",
            "x-omniroute-seed": "7",
        }
    )
    assert (c.mode, c.budget_usd, c.budget_fallback, c.effort, c.seed) == (
        "ship-fast",
        0.05,
        "strict",
        "auto",
        "7",
    )
    c = parse_controls({"x-omniroute-budget-fallback": "soft"})
    assert c.budget_usd is None and c.budget_fallback == "cheapest"
    assert parse_controls({"x-omniroute-budget": "0"}).budget_usd == 0.0
    for bad in ("-1", "nan", "abc", "inf"):
        with pytest.raises(InvalidRequest, match="X-OmniRoute-Budget"):
            parse_controls({"x-omniroute-budget": bad})
    for name, bad in (
        ("x-omniroute-budget-fallback", "maybe"),
        ("x-omniroute-mode", "turbo"),
        ("x-omniroute-effort", "max"),
    ):
        with pytest.raises(InvalidRequest, match=f"(?i){name}"):
            parse_controls({name: bad})
    assert parse_controls({"x-omniroute-mode": " ", "x-omniroute-effort": ""}).mode is None


def test_estimated_cost_uses_prices_per_million() -> None:
    m = ModelInfo(id="m", input_price=2.0, output_price=8.0)
    assert estimated_cost_usd(m, 1000, 500) == pytest.approx((1000 * 2 + 500 * 8) / 1e6)
    assert estimated_cost_usd(ModelInfo(id="x"), 10, 10) is None


async def test_budget_cheapest_serves_the_cheapest_and_strict_is_402() -> None:
    """AUTO-7: all candidates over the cap → ``cheapest`` orders cheapest first; ``strict`` → 402
    naming the cap and the cheapest estimated cost; a cap some fit filters the others."""
    gw = make_gw([provider("mid", "m", 1.0, 2.0), provider("low", "l", 0.1, 0.4), provider("hi", "h", 5, 10)])
    cands, _, d = await plan(gw, headers={"X-OmniRoute-Budget": "0.0001"})
    assert [c.provider.id for c in cands] == ["low", "mid", "hi"]
    assert d.strategy == "budget-cheapest" and d.extra["auto"]["budget"]["cheapest_used"] is True
    with pytest.raises(BudgetExceeded) as exc:
        await plan(gw, headers={"X-OmniRoute-Budget": "0.0001", "X-OmniRoute-Budget-Fallback": "strict"})
    assert exc.value.status == 402
    assert "$0.000100" in exc.value.message and "$0.000400" in exc.value.message
    cands, _, d = await plan(gw, headers={"X-OmniRoute-Budget": "0.0025"})
    assert {c.provider.id for c in cands} == {"low", "mid"}
    assert any("over budget cap" in e.reason for e in d.exclusions)


def test_adaptive_effort_from_the_current_turn() -> None:
    """AUTO-7 ``X-OmniRoute-Effort: auto``: low/medium/high from the turn's shape; an explicit reasoning
    field wins; what follows the last user message does not count."""
    short = {"messages": [{"role": "user", "content": "hi"}]}
    assert resolve_effort(short) == "low"
    assert resolve_effort({"messages": [{"role": "user", "content": "x" * 500}]}) == "medium"
    assert resolve_effort({"messages": [{"role": "user", "content": "x" * 3000}]}) == "high"
    assert resolve_effort({**short, "reasoning_effort": "low"}) is None
    loop = {"messages": [*short["messages"], *[{"role": "tool", "content": "r"}] * 6]}
    assert resolve_effort(loop) == "low"


async def test_effort_header_sets_reasoning_effort_for_openai_upstreams_only() -> None:
    """AUTO-7: the resolved effort is applied per candidate, only to OpenAI-format upstreams."""
    gw = make_gw([provider("oa", "m", 1.0, 1.0), provider("an", "m", 2.0, 2.0, fmt="anthropic")])
    cands, opts, d = await plan(gw, headers={"X-OmniRoute-Effort": "auto"})
    assert d.extra["auto"]["effort"] == "low" and opts.prepare is not None
    by_format = {c.provider.format: c for c in cands}
    req = ChatRequest(body={"messages": [{"role": "user", "content": "hi"}]}, model="auto")
    assert opts.prepare(by_format["openai"], req).body["reasoning_effort"] == "low"
    assert "reasoning_effort" not in opts.prepare(by_format["anthropic"], req).body
    assert "reasoning_effort" not in req.body
    _, opts, _ = await plan(gw)
    assert opts.prepare is None


async def test_precall_check_runs_before_scoring() -> None:
    """RESIL-8 for auto pools: a request with an image skips models without vision, and a prompt
    larger than a window skips that model, before the router picks; nothing fits → nobody removed."""
    gw = make_gw(
        [
            provider("blind", "b", 0.1, 0.1, caps=["tools"]),
            provider("eyes", "e", 5.0, 5.0, caps=["tools", "vision"]),
            provider("tiny", "t", 0.01, 0.01, caps=["tools", "vision"], context=100, max_output=50),
        ]
    )
    image = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:x"}}]
    cands, _, d = await plan(gw, body={"messages": [{"role": "user", "content": image}]})
    assert cands[0].provider.id == "tiny" and "blind" not in {c.provider.id for c in cands}
    assert any(e.provider == "blind" and "vision" in e.reason for e in d.exclusions)
    cands, _, d = await plan(gw, text="word " * 400, request_id="long")
    assert "tiny" not in {c.provider.id for c in cands} and cands[0].provider.id == "blind"
    assert any(e.provider == "tiny" and "context window" in e.reason for e in d.exclusions)
