"""random, weighted and p2c (COMBO-3): seeded draws, weight semantics, stickiness and the p2c
health comparison."""

from __future__ import annotations

from collections import Counter

from omniroute.state.memory import MemoryRoutingState
from strategy_support import first_keys, order, play, target, targets


async def test_random_is_reproducible_for_a_seed_and_uses_every_target() -> None:
    """COMBO-3 random: uniform shuffle from the request's seeded source."""
    ts = targets("o", "c", "g")
    assert first_keys(await order("random", ts, seed=11)) == first_keys(await order("random", ts, seed=11))
    firsts = Counter([first_keys(await order("random", ts, seed=s))[0] for s in range(300)])
    assert set(firsts) == {"o", "c", "g"}
    assert all(n > 60 for n in firsts.values())


async def test_weighted_70_30_share_over_2000_requests() -> None:
    """COMBO-3 weighted: draw probability weight/Σweight (0.70 ± 0.04 over 2,000 seeded draws)."""
    ts = [target("o", index=0, weight=70), target("c", index=1, weight=30)]
    firsts = [first_keys(await order("weighted", ts, seed=s))[0] for s in range(2000)]
    share = firsts.count("o") / len(firsts)
    assert abs(share - 0.70) <= 0.04


async def test_weighted_zero_weight_never_drawn_while_another_is_reachable() -> None:
    """COMBO-3 weighted: weight 0 is never drawn while a step with weight > 0 is reachable; it stays
    a fallback."""
    ts = [target("o", index=0, weight=1), target("c", index=1, weight=0)]
    for s in range(300):
        assert first_keys(await order("weighted", ts, seed=s)) == ["o", "c"]


async def test_weighted_draws_only_reachable_steps() -> None:
    """COMBO-3 weighted: only steps with a reachable target take part (the 0-weight step serves
    when the other is filtered by the ladder)."""
    ts = [target("o", index=0, weight=1), target("c", index=1, weight=0)]
    o = await order("weighted", ts, unavailable={0: "circuit open"})
    assert first_keys(o) == ["c", "o"]


async def test_weighted_all_zero_is_uniform_and_rest_is_by_weight_desc() -> None:
    """COMBO-3 weighted: all 0 → uniform; the rest by weight descending, ties in definition order."""
    zero = targets("o", "c", "g")
    firsts = Counter([first_keys(await order("weighted", zero, seed=s))[0] for s in range(300)])
    assert set(firsts) == {"o", "c", "g"}
    ts = [
        target("a", index=0, weight=10),
        target("b", index=1, weight=50),
        target("c", index=2, weight=40),
        target("d", index=3, weight=40),
    ]
    for s in range(50):
        keys = first_keys(await order("weighted", ts, seed=s))
        rest = [k for k in ["b", "c", "d", "a"] if k != keys[0]]
        assert keys[1:] == rest


async def test_weighted_steps_keep_nested_targets_together() -> None:
    """COMBO-3 weighted draws a step: the targets of one step (nested combo, connections) stay adjacent."""
    ts = [
        target("o", index=0, step=0, weight=60),
        target("c", index=1, step=1, weight=40),
        target("g", index=2, step=1, weight=40),
    ]
    for s in range(40):
        keys = first_keys(await order("weighted", ts, seed=s))
        assert keys in (["o", "c", "g"], ["c", "g", "o"])


async def test_weighted_sticky_limit_keeps_the_drawn_step_for_n_successes() -> None:
    """COMBO-3 weighted: ``stickyWeightedLimit`` N keeps the drawn step first for N served requests."""
    ts = [target("o", index=0, weight=50), target("c", index=1, weight=50)]
    served = await play("weighted", ts, 12, config={"stickyWeightedLimit": 3})
    runs = [served[i : i + 3] for i in range(0, 12, 3)]
    assert all(len(set(r)) == 1 for r in runs), served


async def test_p2c_never_prefers_half_open_over_a_healthy_target() -> None:
    """COMBO-3 p2c: breaker state comes first — HALF_OPEN never wins a pair against CLOSED."""
    state = MemoryRoutingState()
    now = 1_700_000_000.0
    for _ in range(5):
        await state.breaker_failure(
            "g", now - 100, failure_threshold=5, reset_timeout_s=30, max_multiplier=16, reason="503"
        )
    # g had a great history before it opened: HALF_OPEN must still lose
    for _ in range(20):
        await state.record_sample("g/m@g1", now - 200, latency_ms=5, ok=True)
    ts = targets("o", "c", "g")
    firsts = Counter()
    for s in range(300):
        o = await order("p2c", ts, state=state, seed=s, now=now)
        firsts[first_keys(o)[0]] += 1
    assert firsts["g"] == 0
    assert firsts["o"] > 0 and firsts["c"] > 0


async def test_p2c_keeps_the_healthier_of_the_pair_first_and_the_rest_in_order() -> None:
    """COMBO-3 p2c: success rate + latency decide within one breaker state."""
    state = MemoryRoutingState()
    now = 1_700_000_000.0
    for i in range(10):
        await state.record_sample("o/m@o1", now, latency_ms=100, ok=i % 2 == 0)  # 50 % errors
        await state.record_sample("c/m@c1", now, latency_ms=100, ok=True)
    ts = targets("o", "c")
    for s in range(20):
        assert first_keys(await order("p2c", ts, state=state, seed=s, now=now)) == ["c", "o"]


async def test_p2c_with_one_target_is_unchanged() -> None:
    assert first_keys(await order("p2c", targets("o"))) == ["o"]


async def test_p2c_treats_close_scores_as_a_tie_and_prefers_fewer_in_flight() -> None:
    """COMBO-3 p2c: noise-level health differences do not decide; load (in flight) does."""
    state = MemoryRoutingState()
    now = 1_700_000_000.0
    for _ in range(10):
        await state.record_sample("o/m@o1", now, latency_ms=5, ok=True)
        await state.record_sample("c/m@c1", now, latency_ms=6, ok=True)
    for _ in range(3):
        await state.incr_inflight("c1")
    ts = targets("o", "c")
    for s in range(20):
        assert first_keys(await order("p2c", ts, state=state, seed=s, now=now)) == ["o", "c"]
    for _ in range(6):
        await state.incr_inflight("o1")
    for s in range(20):
        assert first_keys(await order("p2c", ts, state=state, seed=s, now=now)) == ["c", "o"]


async def test_p2c_does_not_starve_a_target_without_samples() -> None:
    """COMBO-3 p2c: a new target (no samples) is not scored below a measured one."""
    state = MemoryRoutingState()
    now = 1_700_000_000.0
    for _ in range(10):
        await state.record_sample("o/m@o1", now, latency_ms=5, ok=True)
    ts = targets("o", "c")
    firsts = Counter(
        [first_keys(await order("p2c", ts, state=state, seed=s, now=now))[0] for s in range(100)]
    )
    assert firsts["c"] > 20 and firsts["o"] > 20
