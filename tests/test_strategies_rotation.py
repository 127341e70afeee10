"""round-robin (sticky batches), strict-random (decks) and least-used (COMBO-3): counters kept in
RoutingState under the combo's namespace."""

from __future__ import annotations

from omniroute.routing.strategies import Ordering
from omniroute.state.memory import MemoryRoutingState
from strategy_support import first_keys, order, play, targets


async def test_round_robin_default_sticky_batches_of_three() -> None:
    """COMBO-3 round-robin: default ``stickyRoundRobinLimit`` 3 → O×3, C×3, G×3."""
    served = await play("round-robin", targets("o", "c", "g"), 9)
    assert served == ["o"] * 3 + ["c"] * 3 + ["g"] * 3


async def test_round_robin_limit_one_rotates_every_request() -> None:
    """COMBO-3 round-robin with ``stickyRoundRobinLimit`` 1 → O, C, G, O, C, G."""
    served = await play("round-robin", targets("o", "c", "g"), 6, config={"stickyRoundRobinLimit": 1})
    assert served == ["o", "c", "g", "o", "c", "g"]


async def test_round_robin_limit_comes_from_the_global_default_when_the_combo_inherits() -> None:
    """COMBO-3: limit = combo → global → default 3."""
    served = await play("round-robin", targets("o", "c"), 4, global_={"stickyRoundRobinLimit": 2})
    assert served == ["o", "o", "c", "c"]


async def test_round_robin_drops_an_unavailable_sticky_target_first() -> None:
    """Reference §2.3: when the sticky target cannot serve, the next one takes over and its batch
    continues from there."""
    state = MemoryRoutingState()
    ts = targets("o", "c", "g")

    def skip_o(o: Ordering) -> object:
        return next(t for t in o.targets if t.provider.id != "o")

    first = await play("round-robin", ts, 1, state=state, serve=skip_o)
    rest = await play("round-robin", ts, 5, state=state)
    assert first + rest == ["c", "c", "c", "g", "g", "g"]


async def test_round_robin_counters_are_per_combo() -> None:
    state = MemoryRoutingState()
    ts = targets("o", "c")
    a = await play("round-robin", ts, 2, state=state, config={"stickyRoundRobinLimit": 1}, combo="a")
    b = await play("round-robin", ts, 2, state=state, config={"stickyRoundRobinLimit": 1}, combo="b")
    assert a == b == ["o", "c"]


async def test_strict_random_covers_every_target_once_per_cycle() -> None:
    """COMBO-3 strict-random: each window of n requests from the start of a cycle covers all n."""
    state = MemoryRoutingState()
    ts = targets("o", "c", "g")
    served = await play("strict-random", ts, 15, state=state)
    for i in range(0, 15, 3):
        assert sorted(served[i : i + 3]) == ["c", "g", "o"], served


async def test_strict_random_orders_every_target_with_the_chosen_one_first() -> None:
    o = await order("strict-random", targets("o", "c", "g"))
    assert sorted(first_keys(o)) == ["c", "g", "o"]


async def test_least_used_prefers_the_target_with_fewer_served_requests() -> None:
    """COMBO-3 least-used: [O, C] with one prior request on O → C first."""
    state = MemoryRoutingState()
    ts = targets("o", "c")
    assert await play("least-used", ts, 1, state=state) == ["o"]
    assert first_keys(await order("least-used", ts, state=state)) == ["c", "o"]


async def test_least_used_ties_keep_definition_order_and_alternate() -> None:
    served = await play("least-used", targets("o", "c", "g"), 6)
    assert served == ["o", "c", "g", "o", "c", "g"]
