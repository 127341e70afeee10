"""RESIL-6: the attempt loop's waits — a transient failure's backoff and a wait hint waited out
— run on the gateway's clock, so a fake clock drives them without waiting.
The upstream is a fake provider on a real socket; only the waits between attempts are on the clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from omniroute.clock import FakeClock
from omniroute.providers.upstream import AttemptTimeouts, UpstreamClient
from omniroute.resilience.ladder import Resilience
from omniroute.routing.decision import Decision
from omniroute.routing.engine import Engine, Outcome, RetrySettings
from omniroute.state.memory import MemoryRoutingState
from omniroute.testing import FakeProvider
from omniroute.values import Candidate, ChatRequest, Connection, ModelInfo, ProviderInfo
from omniroute.wire import adapters


@pytest.fixture
async def fp() -> AsyncIterator[FakeProvider]:
    async with FakeProvider(name="p") as provider:
        yield provider


async def run_waiting(fp: FakeProvider, model: str, wait_s: float) -> tuple[FakeClock, Outcome, Decision]:
    """Run ``model`` as the only candidate; once the engine sleeps between attempts, check the fake saw
    one call and nothing was answered yet, move the clock by ``wait_s`` and return what came back."""
    clock = FakeClock()
    timeouts = AttemptTimeouts(connect_s=5, ttft_s=10, idle_s=10, total_s=30)
    client = UpstreamClient(timeouts)
    engine = Engine(
        clock=clock,
        client=client,
        resilience=Resilience(MemoryRoutingState(clock), clock),
        adapters=adapters(),
        retries=RetrySettings(per_target=1, max_attempts=5, total_s=30),
        timeouts=timeouts,
    )
    cand = Candidate(
        ProviderInfo(id="p", base_url=f"{fp.base_url}/v1"),
        Connection(id="c1", provider="p", api_key="sk"),
        ModelInfo(id=model),
    )
    req = ChatRequest(body={"model": model, "messages": [{"role": "user", "content": "hi"}]}, model=model)
    decision = Decision("r", model)
    try:
        task = asyncio.ensure_future(engine.run(req, [cand], decision))
        await clock.wait_for_sleepers(1)
        assert fp.calls() == 1 and not task.done()
        clock.advance(wait_s)
        out = await task
    finally:
        await client.close()
    assert isinstance(out, Outcome)
    return clock, out, decision


async def test_a_transient_failure_is_retried_after_a_backoff_on_the_clock(fp: FakeProvider) -> None:
    clock, out, decision = await run_waiting(fp, "m+fail-500-times-1", 0.05)
    assert out.response["choices"][0]["message"]["content"]
    assert [a.status for a in decision.attempts] == [500, 200] and fp.calls() == 2
    assert clock.monotonic() == 0.05


async def test_a_rate_limit_hint_on_the_last_candidate_is_waited_out_on_the_clock(fp: FakeProvider) -> None:
    clock, out, decision = await run_waiting(fp, "m+fail-429-times-1+retry-ms-500", 0.5)
    assert out.response["choices"][0]["message"]["content"]
    assert [a.status for a in decision.attempts] == [429, 200] and fp.calls() == 2
    assert clock.monotonic() == 0.5
