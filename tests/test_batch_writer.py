"""OBS-1/PERF-5: the background writer never blocks the hot path and never grows without bound."""

from __future__ import annotations

import asyncio
import logging

import pytest

from omniroute.observe.batch import BatchWriter


async def test_a_store_that_falls_behind_costs_the_oldest_rows_not_unbounded_memory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    written: list[int] = []

    async def sink(rows: list[int]) -> None:
        written.extend(rows)

    w: BatchWriter[int] = BatchWriter(sink, name="decisions", max_pending=3)
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

    w: BatchWriter[int] = BatchWriter(sink, name="usage", max_batch=4, interval_s=10)
    w.start()
    for i in range(10):
        w.put(i)
    await w.stop()
    assert written == list(range(10)) and w.dropped == 0
