"""The fake clock that tests and the simulator run on: sleepers wake only when the clock moves, and
a workload can be driven from one wake-up to the next without waiting."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from omniroute.clock import FakeClock, wait_any

T0 = 1_700_000_000.0


async def test_a_sleeper_wakes_only_once_the_clock_passes_its_time() -> None:
    clock = FakeClock(T0)
    sleeper = asyncio.create_task(clock.sleep(2.0))
    await clock.wait_for_sleepers(1)
    assert clock.next_wake == 2.0
    clock.advance(1.5)
    await asyncio.sleep(0)
    assert not sleeper.done()
    assert clock.advance(0.5) == T0 + 2.0
    await sleeper
    assert clock.sleepers == 0 and clock.next_wake is None


async def test_cancelled_sleepers_are_not_counted() -> None:
    clock = FakeClock()
    sleepers = [asyncio.create_task(clock.sleep(s)) for s in (1.0, 2.0)]
    await clock.wait_for_sleepers(2)
    sleepers[0].cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sleepers[0]
    assert clock.sleepers == 1 and clock.next_wake == 2.0
    sleepers[1].cancel()


async def test_wait_any_returns_on_the_first_future_or_the_clock_timeout() -> None:
    clock = FakeClock()
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(wait_any(clock, [fut], 5.0))
    await clock.wait_for_sleepers(1)
    fut.set_result(None)
    await waiting
    assert clock.monotonic() == 0.0 and not fut.cancelled()
    other: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    await clock.run(wait_any(clock, [other], 5.0))
    assert clock.monotonic() == 5.0 and not other.done()


async def test_run_jumps_from_one_wake_up_to_the_next() -> None:
    clock = FakeClock(T0)
    woke: list[float] = []

    async def worker(delays: list[float]) -> str:
        for d in delays:
            await clock.sleep(d)
            woke.append(clock.monotonic())
        return "done"

    assert await clock.run(worker([0.5, 2.0, 0.1])) == "done"
    assert woke == [0.5, 2.5, 2.6] and clock.time() == pytest.approx(T0 + 2.6)


async def test_run_stops_at_its_virtual_timeout_and_cancels_the_work() -> None:
    clock = FakeClock()
    work = asyncio.ensure_future(clock.sleep(100.0))
    with pytest.raises(TimeoutError):
        await clock.run(work, timeout_s=10.0)
    assert work.cancelled() and clock.monotonic() == 0.0


async def test_run_refuses_work_that_waits_on_something_else() -> None:
    clock = FakeClock()
    with pytest.raises(RuntimeError, match="something other than this clock"):
        await clock.run(asyncio.Event().wait())
