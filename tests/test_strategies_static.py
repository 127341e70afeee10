"""priority, cost-optimized and context-optimized orderings, the registry, the option cascade and
the seeded random source (COMBO-3, COMBO-4, DESIGN 6/11)."""

from __future__ import annotations

import pytest

from omniroute.core.combo import ROUTING_STRATEGY_VALUES
from omniroute.routing.strategies import (
    INHERIT,
    ComboSettings,
    Ordering,
    StrategyContext,
    get_strategy,
    register_strategy,
    rng_for,
    strategy_names,
)
from strategy_support import first_keys, order, request, target, targets


async def test_priority_keeps_definition_order() -> None:
    """COMBO-3 priority: definition order."""
    o = await order("priority", targets("o", "c", "g"))
    assert first_keys(o) == ["o", "c", "g"]


async def test_priority_honours_explicit_priority_lower_first_unset_last() -> None:
    """COMBO-3 priority: explicit ``priority`` lower first; targets without one follow in order."""
    ts = [
        target("o", index=0),
        target("c", index=1, priority=5),
        target("g", index=2, priority=1),
        target("x", index=3),
    ]
    o = await order("priority", ts)
    assert first_keys(o) == ["g", "c", "o", "x"]


async def test_cost_optimized_puts_the_cheapest_blended_price_first() -> None:
    """COMBO-3 cost-optimized: gemini-2.5-pro ($2.00/M in) vs gpt-4o-mini ($0.15/M in) → mini first."""
    ts = [
        target("gemini", "gemini-2.5-pro", index=0, input_price=2.0, output_price=12.0),
        target("openai", "gpt-4o-mini", index=1, input_price=0.15, output_price=0.6),
    ]
    o = await order("cost-optimized", ts)
    assert [t.model.id for t in o.targets] == ["gpt-4o-mini", "gemini-2.5-pro"]


async def test_cost_optimized_blends_60_40_and_puts_unknown_prices_last() -> None:
    """COMBO-3: blended = .6 in + .4 out; unknown last; ties keep definition order."""
    ts = [
        target("unknown", index=0),
        target("a", index=1, input_price=1.0, output_price=10.0),  # 4.6
        target("b", index=2, input_price=5.0, output_price=1.0),  # 3.4
        target("b2", index=3, input_price=5.0, output_price=1.0),  # 3.4 (tie)
    ]
    o = await order("cost-optimized", ts)
    assert first_keys(o) == ["b", "b2", "a", "unknown"]


async def test_context_optimized_puts_the_largest_window_first() -> None:
    """COMBO-3 context-optimized: gpt-4o-mini (128k) vs gemini-2.5-flash (1M) → gemini first."""
    ts = [
        target("openai", "gpt-4o-mini", index=0, context_window=128_000),
        target("gemini", "gemini-2.5-flash", index=1, context_window=1_048_576),
    ]
    o = await order("context-optimized", ts)
    assert first_keys(o) == ["gemini", "openai"]


async def test_context_optimized_without_known_windows_keeps_definition_order() -> None:
    """Reference §2.3: no target with a known limit → unchanged."""
    o = await order("context-optimized", targets("o", "c"))
    assert first_keys(o) == ["o", "c"]


def test_registry_holds_all_19_strategies_in_spec_order() -> None:
    """COMBO-3: the 19 names of ROUTING_STRATEGY_VALUES are registered."""
    assert strategy_names()[:19] == ROUTING_STRATEGY_VALUES
    for name in ROUTING_STRATEGY_VALUES:
        assert get_strategy(name).name == name


def test_unknown_strategy_lists_the_valid_names() -> None:
    with pytest.raises(KeyError, match="round-robin"):
        get_strategy("nope")


async def test_a_registered_strategy_is_found_by_name() -> None:
    """DESIGN 6: strategies are registered by name."""

    class Reverse:
        name = "test-reverse"
        expands_connections = False
        protects_first = False

        async def order(self, ctx: StrategyContext) -> Ordering:
            return Ordering(list(reversed(ctx.targets)), "reversed")

    register_strategy("test-reverse", Reverse())
    o = await order("test-reverse", targets("o", "c"))
    assert first_keys(o) == ["c", "o"]


def test_settings_cascade_combo_then_global_then_default_with_inherit_sentinel() -> None:
    """COMBO-4 / DESIGN 11: combo → global → default; ``None`` inherits; INHERIT when unset."""
    s = ComboSettings({"stickyRoundRobinLimit": None, "maxRetries": 0}, {"stickyRoundRobinLimit": 5})
    assert s.get("stickyRoundRobinLimit") == 5
    assert s.get("maxRetries") == 0  # 0 is a value, not "inherit"
    assert ComboSettings().get("stickyRoundRobinLimit") == 3
    assert s.raw("notAnOption") is INHERIT
    assert s.get("notAnOption", "x") == "x"
    assert ComboSettings({"promptCacheAffinityEnabled": False}).bool_("promptCacheAffinityEnabled") is False
    assert ComboSettings({"stickyRoundRobinLimit": 5000}).int_("stickyRoundRobinLimit", 3, 1, 1000) == 1000


def test_random_source_is_seeded_by_header_else_request_id() -> None:
    """DESIGN 6: ``X-OmniRoute-Seed`` makes one request's draws reproducible."""
    a, b = rng_for(request(seed=7)), rng_for(request(seed=7))
    assert [a.random() for _ in range(3)] == [b.random() for _ in range(3)]
    r1, r2 = request(), request()
    r1.headers, r2.headers = {}, {}
    r1.request_id = r2.request_id = "req_same"
    assert rng_for(r1).random() == rng_for(r2).random()
