"""The quota provider and the quota strategies: fill-first, reset-aware, reset-window, headroom
(COMBO-3). Quota comes from header snapshots in RoutingState and optional configured limits; no
data is neutral."""

from __future__ import annotations

import math

from omniroute.resilience.hints import parse_quota_headers
from omniroute.routing.quota import NEUTRAL, ConnectionLimit, QuotaInfo, StateQuotaProvider, parse_limits
from omniroute.routing.strategies.quota_based import reset_aware_score
from omniroute.state.memory import MemoryRoutingState
from omniroute.state.records import QuotaSnapshot
from strategy_support import NOW, first_keys, order, targets


async def quota(
    state: MemoryRoutingState, conn: str, remaining: float, reset_in: float | None = None
) -> None:
    await state.set_quota(
        conn, QuotaSnapshot(remaining, None if reset_in is None else NOW + reset_in, observed_at=NOW)
    )


async def test_provider_reads_header_snapshots_and_is_neutral_without_data() -> None:
    """Quota from ``x-ratelimit-*`` headers as stored by Resilience.record_success; none → neutral."""
    state = MemoryRoutingState()
    snap = parse_quota_headers(
        {
            "x-ratelimit-limit-requests": "100",
            "x-ratelimit-remaining-requests": "25",
            "x-ratelimit-reset-requests": "60s",
        },
        NOW,
    )
    assert snap is not None
    await state.set_quota("o1", snap)
    qp = StateQuotaProvider(state)
    q = await qp.get("o1", NOW)
    assert q.remaining == 0.25 and q.reset_at == NOW + 60 and q.source == "headers"
    assert await qp.get("c1", NOW) is NEUTRAL


async def test_provider_treats_a_passed_reset_as_untouched_and_old_snapshots_as_unknown() -> None:
    state = MemoryRoutingState()
    await state.set_quota("o1", QuotaSnapshot(0.0, NOW - 1, observed_at=NOW - 100))
    await state.set_quota("c1", QuotaSnapshot(0.3, None, observed_at=NOW - 7200))
    qp = StateQuotaProvider(state)
    assert (await qp.get("o1", NOW)).remaining == 1.0
    assert not (await qp.get("c1", NOW)).known


async def test_configured_limits_count_served_requests_per_window() -> None:
    """Optional per-connection limits: ``connectionLimits: {id: {requests, window_s}}``."""
    state = MemoryRoutingState()
    limits = parse_limits({"o1": {"requests": 4, "window_s": 60}, "bad": {"requests": "x"}})
    assert limits == {"o1": ConnectionLimit(4, 60.0)}
    qp = StateQuotaProvider(state, limits)
    for _ in range(3):
        await qp.note_served("o1", NOW)
    q = await qp.get("o1", NOW)
    assert q.remaining == 0.25 and q.reset_at is not None and q.reset_at > NOW
    await qp.note_served("o1", NOW)
    assert (await qp.get("o1", NOW)).limit_reached
    assert (await qp.get("o1", NOW + 60)).remaining == 1.0  # next window


async def test_headroom_prefers_more_remaining_quota() -> None:
    """COMBO-3 headroom: O at 90 % utilisation, C at 10 % → C first."""
    state = MemoryRoutingState()
    await quota(state, "o1", 0.10)
    await quota(state, "c1", 0.90)
    assert first_keys(await order("headroom", targets("o", "c"), state=state)) == ["c", "o"]


async def test_headroom_scores_unknown_quota_as_neutral() -> None:
    state = MemoryRoutingState()
    await quota(state, "o1", 0.2)
    await quota(state, "g1", 0.8)
    assert first_keys(await order("headroom", targets("o", "c", "g"), state=state)) == ["g", "c", "o"]


async def test_reset_aware_puts_a_spent_quota_behind_unknown() -> None:
    """COMBO-3 reset-aware: O's quota limit reached (−∞), C unknown (0.5) → C first."""
    state = MemoryRoutingState()
    await quota(state, "o1", 0.0, reset_in=3600)
    assert first_keys(await order("reset-aware", targets("o", "c"), state=state)) == ["c", "o"]


def test_reset_aware_score_follows_the_reference_formula() -> None:
    """Reference §2.3 scoreResetAwareQuota (one window): neutral 0.5, spent −∞, guard below 10 %."""
    assert reset_aware_score(NEUTRAL, NOW) == 0.5
    assert reset_aware_score(QuotaInfo(0.0, NOW + 10, "headers"), NOW) == -math.inf
    full = reset_aware_score(QuotaInfo(1.0, None, "headers"), NOW)
    assert math.isclose(full, 0.45)
    soon = reset_aware_score(QuotaInfo(0.5, NOW + 60, "headers"), NOW)
    late = reset_aware_score(QuotaInfo(0.5, NOW + 4 * 3600, "headers"), NOW)
    assert soon > late
    unguarded = 0.45 * 0.05 + 0.55 * 0.5 * 0.95
    assert math.isclose(reset_aware_score(QuotaInfo(0.05, None, "headers"), NOW), unguarded * 0.5)


async def test_reset_aware_rotates_targets_within_the_tie_band() -> None:
    """COMBO-3 reset-aware: targets within 5 % of the best rotate across requests."""
    state = MemoryRoutingState()
    ts = targets("o", "c")
    firsts = [first_keys(await order("reset-aware", ts, state=state))[0] for _ in range(4)]
    assert firsts == ["o", "c", "o", "c"]


async def test_reset_window_puts_the_earliest_reset_first() -> None:
    """COMBO-3 reset-window: G resets in 1 h, O unknown → G first."""
    state = MemoryRoutingState()
    await quota(state, "g1", 0.5, reset_in=3600)
    assert first_keys(await order("reset-window", targets("o", "g"), state=state)) == ["g", "o"]


async def test_reset_window_rotates_resets_within_60_s_and_puts_spent_last() -> None:
    state = MemoryRoutingState()
    await quota(state, "a1", 0.5, reset_in=100)
    await quota(state, "b1", 0.5, reset_in=130)
    await quota(state, "c1", 0.0, reset_in=10)  # spent: last despite the earliest reset
    await quota(state, "d1", 0.5, reset_in=1000)
    ts = targets("a", "b", "c", "d")
    one = first_keys(await order("reset-window", ts, state=state))
    two = first_keys(await order("reset-window", ts, state=state))
    assert one == ["a", "b", "d", "c"]
    assert two == ["b", "a", "d", "c"]


async def test_fill_first_stays_on_the_first_target_until_its_quota_is_spent() -> None:
    """COMBO-3 fill-first: definition order; a spent first target moves behind the others."""
    state = MemoryRoutingState()
    ts = targets("o", "c")
    assert first_keys(await order("fill-first", ts, state=state)) == ["o", "c"]
    await quota(state, "o1", 0.0, reset_in=60)
    assert first_keys(await order("fill-first", ts, state=state)) == ["c", "o"]
    assert first_keys(await order("fill-first", ts, state=state, now=NOW + 61)) == ["o", "c"]


async def test_quota_strategies_see_one_target_per_connection() -> None:
    """COMBO-3: reset-aware, reset-window and headroom rank accounts (connection expansion)."""
    from omniroute.routing.strategies import get_strategy

    for name in ("reset-aware", "reset-window", "headroom", "cache-optimized"):
        assert get_strategy(name).expands_connections
    for name in ("priority", "round-robin", "weighted", "fill-first"):
        assert not get_strategy(name).expands_connections
