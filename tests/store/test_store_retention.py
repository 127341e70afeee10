"""Retention: usage rows and routing decisions older than ``retention_days`` are deleted by the
background pruner, in batches, on the injected clock."""

from __future__ import annotations

from omniroute.clock import FakeClock
from omniroute.store import Store
from omniroute.store.retention import DAY_S, RetentionPruner

NOW = 1_700_000_000.0


def _row(rid: str, ts: float) -> dict[str, object]:
    return {"request_id": rid, "ts": ts, "requested_model": "m", "provider": "p", "model": "m", "status": 200}


async def test_a_pass_deletes_rows_older_than_the_retention_in_batches(store: Store) -> None:
    old = [(f"old-{i}", NOW - 3 * DAY_S - i) for i in range(11)]
    new = [(f"new-{i}", NOW - DAY_S + i) for i in range(4)]
    await store.write_usage([_row(rid, ts) for rid, ts in old + new])
    await store.save_decisions([(rid, ts, {"request_id": rid}) for rid, ts in old + new])
    calls: list[dict[str, int]] = []
    real = store.prune_batch

    async def counting(before_ts: float, limit: int) -> dict[str, int]:
        calls.append(result := await real(before_ts, limit))
        return result

    store.prune_batch = counting  # type: ignore[method-assign]
    pruner = RetentionPruner(store, FakeClock(NOW), retention_days=2, batch=4)
    assert await pruner.prune_once() == {"usage_log": 11, "routing_decisions": 11, "responses_store": 0}
    assert [c["usage_log"] for c in calls] == [4, 4, 3]  # batches of at most 4, until one comes back short
    left = {r["request_id"] for r in await store.recent_usage(limit=100)}
    assert left == {rid for rid, _ in new}
    assert await store.get_decision("old-0") is None and await store.get_decision("new-0") is not None


async def test_the_background_task_prunes_every_interval_of_the_injected_clock(store: Store) -> None:
    clock = FakeClock(NOW)
    pruner = RetentionPruner(store, clock, retention_days=1, interval_s=3600)
    pruner.start()
    try:
        await clock.wait_for_sleepers(1)  # the task sleeps until its first pass
        await store.write_usage([_row("a", NOW - 0.5 * DAY_S), _row("b", NOW)])
        clock.advance(60)  # the first pass: nothing is older than a day yet
        await clock.wait_for_sleepers(1)  # the woken pass finished and the task sleeps again
        assert len(await store.recent_usage()) == 2
        clock.advance(0.6 * DAY_S)  # "a" is now older than a day; the hourly pass has come
        await clock.wait_for_sleepers(1)
        assert [r["request_id"] for r in await store.recent_usage()] == ["b"]
    finally:
        await pruner.stop()
