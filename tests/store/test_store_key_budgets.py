"""Key budget counters in the database (API-8): reservations are atomic across connections, settlement
swaps the estimate for the real cost, a new period starts the spend over, key edits show in the
fingerprint. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

from omniroute.store import Store

DAY1 = 1_796_256_000.0  # 2026-12-03T00:00:00Z
DAY2 = DAY1 + 86_400


async def test_concurrent_reservations_never_commit_more_than_the_cap(store: Store) -> None:
    rec, _ = await store.create_api_key("team", budget_usd=1.0, budget_period="daily")
    results = await asyncio.gather(*(store.reserve_spend(rec["id"], DAY1, 0.3) for _ in range(20)))
    assert sum(ok for ok, _, _ in results) == 3  # 0.9 fits in 1.0; a fourth 0.3 would not
    listed = {k["name"]: k for k in await store.list_api_keys()}
    assert listed["team"]["reserved_usd"] == pytest.approx(0.9)
    refused = [r for r in results if not r[0]]
    assert refused[-1][1:] == (pytest.approx(0.0), pytest.approx(0.9))  # (spent, reserved) reported


async def test_settling_replaces_the_estimate_with_the_real_cost(store: Store) -> None:
    rec, _ = await store.create_api_key("team", budget_usd=1.0)
    assert (await store.reserve_spend(rec["id"], 0.0, 0.3))[0]
    await store.settle_spend(rec["id"], 0.0, 0.1, 0.3)
    k = (await store.list_api_keys())[0]
    assert k["spent_usd"] == pytest.approx(0.1) and k["reserved_usd"] == 0 and k["last_used_at"] is not None
    await store.settle_spend(rec["id"], 0.0, 0.0, 5.0)  # an over-release never goes below zero
    assert (await store.list_api_keys())[0]["reserved_usd"] == 0


async def test_nothing_is_admitted_once_the_spend_reaches_the_cap(store: Store) -> None:
    rec, _ = await store.create_api_key("team", budget_usd=0.5)
    await store.settle_spend(rec["id"], 0.0, 0.5, 0.0)
    ok, spent, _ = await store.reserve_spend(rec["id"], 0.0, 0.0)  # even a zero estimate
    assert not ok and spent == pytest.approx(0.5)


async def test_a_new_period_starts_the_spend_over(store: Store) -> None:
    rec, _ = await store.create_api_key("team", budget_usd=1.0, budget_period="daily")
    assert (await store.reserve_spend(rec["id"], DAY1, 0.9))[0]
    await store.settle_spend(rec["id"], DAY1, 0.95, 0.9)
    assert not (await store.reserve_spend(rec["id"], DAY1, 0.1))[0]
    ok, spent, reserved = await store.reserve_spend(rec["id"], DAY2, 0.1)
    assert ok and spent == 0 and reserved == pytest.approx(0.1)
    k = (await store.list_api_keys())[0]
    assert k["period_start"] == DAY2 and k["spent_usd"] == 0


async def test_a_key_without_a_budget_is_always_admitted(store: Store) -> None:
    rec, _ = await store.create_api_key("free")
    assert (await store.reserve_spend(rec["id"], 0.0, 100.0))[0]


async def test_update_changes_only_the_given_fields_and_the_snapshot_fingerprint(store: Store) -> None:
    rec, _ = await store.create_api_key("team", budget_usd=1.0, allowed_models=["a/*"])
    before = await store.snapshot_fingerprint()
    got = await store.update_api_key("team", {"budget_usd": 2.0, "budget_period": "weekly", "tpm": 1000})
    assert got is not None
    assert (got["budget_usd"], got["budget_period"], got["tpm"]) == (2.0, "weekly", 1000)
    assert got["allowed_models"] == ["a/*"] and got["rpm"] is None and got["id"] == rec["id"]
    assert await store.snapshot_fingerprint() != before
    assert await store.update_api_key("nobody", {"rpm": 1}) is None


async def test_an_unreachable_redis_leaves_the_budget_to_the_database(store: Store) -> None:
    from omniroute.accounting.budget import Budgets
    from omniroute.clock import FakeClock
    from omniroute.errors import BudgetExceeded
    from omniroute.state.redis import RedisRoutingState

    rec, _ = await store.create_api_key("team", budget_usd=1.0)
    dead = RedisRoutingState(url="redis://127.0.0.1:1/0", connect_timeout_s=0.2, timeout_s=0.2)
    budgets = Budgets(FakeClock(DAY1), lambda: store, dead)
    try:
        held = await budgets.reserve(rec, 0.8)
        assert held is not None and not held.in_redis
        assert (await store.list_api_keys())[0]["reserved_usd"] == pytest.approx(0.8)
        with pytest.raises(BudgetExceeded):
            await budgets.reserve(rec, 0.3)
        assert budgets.settle(held, 0.5) == pytest.approx(0.8)  # the usage writer releases it with the cost
    finally:
        await dead.aclose()
