"""OBS-1/PERF-5: the background writer never blocks the hot path and never grows without bound."""

from __future__ import annotations

import asyncio
import logging

import pytest

from omniroute.clock import FakeClock
from omniroute.observe.batch import BatchWriter


async def test_a_store_that_falls_behind_costs_the_oldest_rows_not_unbounded_memory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    written: list[int] = []

    async def sink(rows: list[int]) -> None:
        written.extend(rows)

    w: BatchWriter[int] = BatchWriter(sink, clock=FakeClock(), name="decisions", max_pending=3)
    with caplog.at_level(logging.WARNING, logger="omniroute.observe"):
        for i in range(5):
            w.put(i)
    assert w.dropped == 2
    assert "decisions writer: the store is behind; 1 oldest queued rows dropped" in caplog.text
    await w.flush()
    assert written == [2, 3, 4]


async def test_everything_queued_is_written_on_stop() -> None:
    written: list[int] = []

    async def sink(rows: list[int]) -> None:
        await asyncio.sleep(0)
        written.extend(rows)

    w: BatchWriter[int] = BatchWriter(sink, clock=FakeClock(), name="usage", max_batch=4, interval_s=10)
    w.start()
    for i in range(10):
        w.put(i)
    await w.stop()
    assert written == list(range(10)) and w.dropped == 0


async def test_rows_are_written_every_interval_and_at_once_when_a_batch_is_full() -> None:
    """OBS-1: a row waits ``interval_s`` on the writer's clock; a full batch goes at once."""
    clock = FakeClock()
    written: asyncio.Queue[list[int]] = asyncio.Queue()

    async def sink(rows: list[int]) -> None:
        written.put_nowait(rows)

    w: BatchWriter[int] = BatchWriter(sink, clock=clock, name="usage", max_batch=3, interval_s=1.0)
    w.start()
    w.put(1)
    assert await clock.run(written.get(), timeout_s=60) == [1]
    assert clock.monotonic() == 1.0
    for i in (2, 3, 4):
        w.put(i)
    assert await written.get() == [2, 3, 4]  # no time passed
    assert clock.monotonic() == 1.0
    await w.stop()


async def test_a_failing_store_is_retried_with_backoff_and_keeps_the_rows(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """OBS-1: a failed batch stays queued and is retried after a backoff that doubles (from the
    interval) and the interval, then written once the store answers again."""
    clock = FakeClock()
    calls: list[float] = []
    written: asyncio.Queue[list[int]] = asyncio.Queue()

    async def sink(rows: list[int]) -> None:
        calls.append(clock.monotonic())
        if len(calls) <= 2:
            raise OSError("database is down")
        written.put_nowait(rows)

    w: BatchWriter[int] = BatchWriter(sink, clock=clock, name="usage", interval_s=1.0)
    with caplog.at_level(logging.ERROR, logger="omniroute.observe"):
        w.start()
        w.put(7)
        assert await clock.run(written.get(), timeout_s=60) == [7]
    assert calls == [1.0, 4.0, 9.0]  # interval; backoff 2 + interval; backoff 4 + interval
    assert "usage writer: batch failed; 1 rows kept for retry" in caplog.text
    await w.stop()
