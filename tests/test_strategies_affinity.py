"""lkgp, cache-optimized, context-relay and the prompt-cache affinity stage (COMBO-3, COMBO-4)."""

from __future__ import annotations

from collections import Counter

from omniroute.routing.strategies.affinity import (
    HANDOFF_MARKER,
    apply_cache_affinity,
    cache_key,
    lkgp_record_key,
)
from omniroute.state.memory import MemoryRoutingState
from omniroute.values import ChatRequest
from strategy_support import context, first_keys, order, request, target, targets


async def test_lkgp_puts_the_recorded_target_first() -> None:
    """COMBO-3 lkgp: record says C for this combo → C first, then definition order."""
    state = MemoryRoutingState()
    await state.set_json(lkgp_record_key("c"), {"provider": "c", "connection": "c1", "model": "m"})
    assert first_keys(await order("lkgp", targets("o", "c", "g"), state=state)) == ["c", "o", "g"]


async def test_lkgp_without_a_record_keeps_definition_order_and_a_success_writes_it() -> None:
    """COMBO-3 lkgp: no record → definition order; a success updates the record."""
    state = MemoryRoutingState()
    ts = targets("o", "c")
    o = await order("lkgp", ts, state=state)
    assert first_keys(o) == ["o", "c"]
    assert o.on_success is not None
    await o.on_success(ts[1], ts[1].candidates()[0])
    assert await state.get_json(lkgp_record_key("c")) == {"provider": "c", "connection": "c1", "model": "m"}
    assert first_keys(await order("lkgp", ts, state=state)) == ["c", "o"]


async def test_lkgp_falls_back_to_provider_match_when_the_connection_changed() -> None:
    state = MemoryRoutingState()
    await state.set_json(lkgp_record_key("c"), {"provider": "g", "connection": "gone", "model": "m"})
    assert first_keys(await order("lkgp", targets("o", "c", "g"), state=state)) == ["g", "o", "c"]


def _keyed(key: str) -> ChatRequest:
    return request({"model": "x", "prompt_cache_key": key, "messages": [{"role": "user", "content": "hi"}]})


async def test_cache_optimized_keeps_one_key_on_one_connection() -> None:
    """COMBO-3 cache-optimized: the same ``prompt_cache_key`` always lands on the same connection."""
    ts = [target("o", conns=["o1", "o2"], index=0, pinned=True), target("c", index=1, pinned=True)]
    firsts = {
        (await order("cache-optimized", ts, req=_keyed("conv-1"), seed=s)).targets[0].key for s in range(50)
    }
    assert len(firsts) == 1


async def test_cache_optimized_spreads_different_keys_over_connections() -> None:
    ts = [target(p, index=i, pinned=True) for i, p in enumerate(("o", "c", "g"))]
    firsts = Counter(
        [(await order("cache-optimized", ts, req=_keyed(f"k{i}"))).targets[0].key for i in range(60)]
    )
    assert len(firsts) == 3


async def test_cache_optimized_hashes_system_and_first_turn_without_a_key() -> None:
    body = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q1"}]}
    later = {
        "messages": [
            *body["messages"],
            {"role": "assistant", "content": "A"},
            {"role": "user", "content": "Q2"},
        ]
    }
    assert cache_key(request(body)) == cache_key(request(later))
    assert cache_key(request(body)) != cache_key(
        request({"messages": [{"role": "user", "content": "other"}]})
    )
    assert cache_key(request(body), explicit_only=True) is None


def test_affinity_reorders_accounts_of_one_model_but_never_displaces_a_protected_first() -> None:
    """COMBO-4 promptCacheAffinityEnabled: pinned accounts of one model follow the rendezvous hash;
    the first target of priority/fill-first/lkgp/weighted stays first."""
    ts = [target("o", conns=[c], index=i, pinned=True) for i, c in enumerate(("o1", "o2", "o3"))]
    winners = set()
    for k in range(30):
        req = _keyed(f"key-{k}")
        protected, _ = apply_cache_affinity(ts, req, protect_first=True)
        assert protected[0] is ts[0]
        free, _ = apply_cache_affinity(ts, req, protect_first=False)
        again, _ = apply_cache_affinity(ts, req, protect_first=False)
        assert free == again
        winners.add(free[0].key)
    assert len(winners) > 1


def test_affinity_reorders_connections_inside_a_step_level_target() -> None:
    t = target("o", conns=["o1", "o2", "o3"])
    firsts = {
        apply_cache_affinity([t], _keyed(f"k{i}"), protect_first=True)[0][0].connections[0].id
        for i in range(30)
    }
    assert len(firsts) > 1


def test_affinity_needs_an_explicit_key_or_a_long_prefix() -> None:
    ts = [target("o", conns=[c], index=i, pinned=True) for i, c in enumerate(("o1", "o2"))]
    out, moved = apply_cache_affinity(ts, request(), protect_first=False)
    assert out == ts and not moved


async def test_context_relay_injects_a_handoff_when_the_session_switches_model() -> None:
    """COMBO-3 context-relay: last model O, now C serves → a handoff system message for C."""
    state = MemoryRoutingState()
    ts = targets("o", "c")
    body = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Plan a trip to Lisbon"},
            {"role": "assistant", "content": "Day 1: Alfama."},
            {"role": "user", "content": "And day 2?"},
        ]
    }
    first = await order("context-relay", ts, state=state, req=request(body, session="s1"))
    assert first.body is None and first.on_success is not None
    await first.on_success(ts[0], ts[0].candidates()[0])
    switched = await order(
        "context-relay", ts, state=state, req=request(body, session="s1"), unavailable={0: "cooldown"}
    )
    assert switched.body is not None
    msgs = switched.body["messages"]
    assert msgs[0]["content"] == "Be brief." and msgs[-1]["content"] == "And day 2?"
    handoff = msgs[1]
    assert handoff["role"] == "system" and HANDOFF_MARKER in handoff["content"]
    assert "o/m" in handoff["content"] and "c/m" in handoff["content"] and "Alfama" in handoff["content"]


async def test_context_relay_without_session_or_without_switch_adds_nothing() -> None:
    state = MemoryRoutingState()
    ts = targets("o", "c")
    no_session = await order("context-relay", ts, state=state)
    assert no_session.body is None and first_keys(no_session) == ["o", "c"]
    ctx = context("context-relay", ts, state=state, req=request(session="s2"))
    from omniroute.routing.strategies import get_strategy

    o = await get_strategy("context-relay").order(ctx)
    assert o.on_success is not None
    await o.on_success(ts[0], ts[0].candidates()[0])
    same = await order("context-relay", ts, state=state, req=request(session="s2"))
    assert same.body is None
