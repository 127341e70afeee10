"""The in-process routing state keeps at most ``max_entries`` entries per table that grows with
traffic, evicting the least recently written and counting the evictions."""

from __future__ import annotations

import pytest

from omniroute.clock import FakeClock
from omniroute.state.memory import MemoryRoutingState
from omniroute.state.primitives import LOCKOUT
from omniroute.state.records import LockKey, LockoutRecord


async def test_windows_counters_lockouts_and_records_stay_within_max_entries() -> None:
    clock = FakeClock()
    state = MemoryRoutingState(clock, max_entries=100)
    await state.record_sample("keep", clock.time(), latency_ms=5.0, ok=True)
    for i in range(1000):
        await state.record_sample(f"p/c/model-{i}", clock.time(), latency_ms=10.0, ok=True)
        await state.incr_counter(f"n:{i}")
        await state.put(LOCKOUT, LockKey("p", "c", f"model-{i}"), LockoutRecord("p", "c", f"model-{i}", 1e12))
        await state.set_bytes(f"r:{i}", b"x")
        if i % 50 == 0:  # written again: the most recently written entries are the ones kept
            await state.record_sample("keep", clock.time(), latency_ms=5.0, ok=True)
    assert state.entry_counts() == {"windows": 100, "counters": 100, "lockouts": 100, "records": 100}
    assert state.evictions == {"windows": 901, "counters": 900, "lockouts": 900, "records": 900}
    stats = await state.get_window_stats(["keep", "p/c/model-999", "p/c/model-0"])
    assert stats["keep"].count == 21 and stats["p/c/model-999"].count == 1 and stats["p/c/model-0"].count == 0
    assert await state.get_counter("n:999") == 1 and await state.get_counter("n:0") == 0
    assert await state.get_bytes("r:999") == b"x" and await state.get_bytes("r:0") is None


def test_max_entries_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        MemoryRoutingState(max_entries=0)
