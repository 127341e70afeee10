"""Provider circuit breaker (RESIL-1)."""

from __future__ import annotations

import asyncio
from typing import Any

from omniroute.errors import (
    ConnectionFailed,
    ContextOverflow,
    Overloaded,
    QuotaExhausted,
    RateLimited,
    ServerError,
    StreamBroken,
    Timeout,
    UpstreamBadRequest,
)
from omniroute.resilience.breaker import BreakerSettings, CircuitBreaker, is_counted
from omniroute.resilience.events import TransitionLog
from omniroute.state import BreakerState, FakeClock, MemoryRoutingState, ProbeVerdict, breaker_view

T0 = 1_700_000_000.0


def server_error(status: int = 500) -> ServerError:
    return ServerError(f"HTTP {status}", upstream_status=status)


# The doubling rules are exercised on RESIL-1's own timings (30 s, ×16 up to 480 s), which an operator
# gets by raising max_reset_timeout_s; the shipped defaults are covered by the recovery tests below.
RESIL1 = {"reset_timeout_s": 30.0, "max_reset_timeout_s": 480.0}


def make(**settings: Any) -> tuple[CircuitBreaker, TransitionLog]:
    log = TransitionLog()
    settings = BreakerSettings(**{**RESIL1, **settings})
    return CircuitBreaker(MemoryRoutingState(FakeClock(T0)), settings, log), log


async def view(b: CircuitBreaker, now: float) -> BreakerState:
    return breaker_view((await b.records(["p"]))["p"], now)


def test_counted_failures_are_5xx_timeouts_and_connection_errors() -> None:
    """RESIL-1: counted = 408, 500, 502, 503, 504, timeouts, connection errors; not 429, not 4xx."""
    for status in (408, 500, 502, 503, 504):
        assert is_counted(server_error(status))
    assert is_counted(Overloaded("x", upstream_status=503))
    assert is_counted(Timeout("TTFT timeout after 60s"))
    assert is_counted(ConnectionFailed("refused"))
    assert is_counted(StreamBroken("cut"))
    assert not is_counted(RateLimited("x", upstream_status=429))
    assert not is_counted(Overloaded("x", upstream_status=529))  # not in RESIL-1's list
    assert not is_counted(QuotaExhausted("x", upstream_status=402))
    assert not is_counted(UpstreamBadRequest("x", upstream_status=400))
    assert not is_counted(
        ContextOverflow("x", upstream_status=500)
    )  # the prompt's fault, whatever the status


def test_counted_statuses_are_configurable() -> None:
    """RESIL-1: an operator may count 529 as well."""
    settings = BreakerSettings(counted_statuses=frozenset({500, 529}))
    assert is_counted(Overloaded("x", upstream_status=529), settings)


async def test_breaker_opens_after_exactly_five_counted_failures() -> None:
    """RESIL-1: CLOSED → OPEN after failure_threshold (5) consecutive counted failures."""
    b, log = make()
    for _ in range(4):
        await b.on_failure("p", server_error(), T0)
    assert await view(b, T0) is BreakerState.CLOSED
    await b.on_failure("p", server_error(), T0)
    assert await view(b, T0) is BreakerState.OPEN
    assert [(e["from"], e["to"]) for e in log.to_list()] == [("CLOSED", "OPEN")]
    assert "5 consecutive failures" in log.to_list()[0]["reason"]


async def test_rate_limits_do_not_count_toward_the_breaker() -> None:
    """RESIL-1: 429s are not counted, however many."""
    b, _ = make()
    for _ in range(20):
        assert await b.on_failure("p", RateLimited("x", upstream_status=429), T0) is None
    assert await view(b, T0) is BreakerState.CLOSED
    rec = (await b.records(["p"]))["p"]
    assert rec.failures == 0


async def test_success_in_closed_resets_the_count() -> None:
    """RESIL-1: a success in CLOSED resets the consecutive count."""
    b, _ = make()
    for _ in range(4):
        await b.on_failure("p", server_error(), T0)
    await b.on_success("p", T0)
    for _ in range(4):
        await b.on_failure("p", server_error(), T0)
    assert await view(b, T0) is BreakerState.CLOSED


async def test_open_becomes_half_open_after_reset_timeout() -> None:
    """RESIL-1: after reset_timeout (30 s) the breaker admits a probe."""
    b, _ = make()
    for _ in range(5):
        await b.on_failure("p", server_error(), T0)
    assert await view(b, T0 + 29.9) is BreakerState.OPEN
    assert await view(b, T0 + 30) is BreakerState.HALF_OPEN


async def test_half_open_admits_exactly_one_probe_among_twenty_concurrent() -> None:
    """RESIL-1: half_open_probes = 1 — of 20 concurrent claims exactly one becomes the probe."""
    b, log = make()
    for _ in range(5):
        await b.on_failure("p", server_error(), T0)
    verdicts = await asyncio.gather(*(b.claim_probe("p", T0 + 31) for _ in range(20)))
    assert [v for v, _ in verdicts].count(ProbeVerdict.PROBE) == 1
    assert ("OPEN", "HALF_OPEN") in [(e["from"], e["to"]) for e in log.to_list()]


async def test_probe_success_closes_and_resets_timeout() -> None:
    """RESIL-1: a probe success closes the breaker; the reset timeout returns to base."""
    b, log = make()
    for _ in range(5):
        await b.on_failure("p", server_error(), T0)
    await b.claim_probe("p", T0 + 30)
    await b.on_failure("p", server_error(), T0 + 30)  # re-open: 60 s
    await b.claim_probe("p", T0 + 90)
    await b.on_success("p", T0 + 91)
    rec = (await b.records(["p"]))["p"]
    assert rec.state is BreakerState.CLOSED
    assert rec.reset_timeout_s == 30
    assert log.to_list()[-1]["to"] == "CLOSED"


async def test_probe_failure_reopens_with_doubled_timeout() -> None:
    """RESIL-1: a probe failure re-opens the breaker and doubles reset_timeout."""
    b, _ = make()
    for _ in range(5):
        await b.on_failure("p", server_error(), T0)
    await b.claim_probe("p", T0 + 30)
    await b.on_failure("p", Timeout("TTFT timeout after 60s"), T0 + 31)
    rec = (await b.records(["p"]))["p"]
    assert rec.state is BreakerState.OPEN
    assert rec.opened_at == T0 + 31
    assert rec.reset_timeout_s == 60
    assert await view(b, T0 + 31 + 59) is BreakerState.OPEN
    assert await view(b, T0 + 31 + 60) is BreakerState.HALF_OPEN


async def test_reset_timeout_doubling_is_capped_at_sixteen_times_base() -> None:
    """RESIL-1: 30 → 60 → 120 → 240 → 480 s, then stays at 480 (×16 cap)."""
    b, _ = make()
    for _ in range(5):
        await b.on_failure("p", server_error(), T0)
    now = T0
    seen = []
    for _ in range(7):
        rec = (await b.records(["p"]))["p"]
        assert rec.next_probe_at is not None
        now = rec.next_probe_at
        await b.claim_probe("p", now)
        await b.on_failure("p", server_error(), now)
        seen.append((await b.records(["p"]))["p"].reset_timeout_s)
    assert seen == [60, 120, 240, 480, 480, 480, 480]


async def test_late_failures_while_open_are_ignored() -> None:
    """RESIL-1: results of calls sent before the breaker opened do not extend it."""
    b, _ = make()
    for _ in range(5):
        await b.on_failure("p", server_error(), T0)
    await b.on_failure("p", server_error(), T0 + 10)
    rec = (await b.records(["p"]))["p"]
    assert rec.opened_at == T0
    assert rec.reset_timeout_s == 30


async def test_success_while_open_does_not_close() -> None:
    """RESIL-1: only a probe closes an OPEN breaker."""
    b, _ = make()
    for _ in range(5):
        await b.on_failure("p", server_error(), T0)
    await b.on_success("p", T0 + 1)
    assert await view(b, T0 + 1) is BreakerState.OPEN


async def test_several_probes_when_configured() -> None:
    """RESIL-1: half_open_probes = 3 admits three probes."""
    b, _ = make(half_open_probes=3)
    for _ in range(5):
        await b.on_failure("p", server_error(), T0)
    verdicts = await asyncio.gather(*(b.claim_probe("p", T0 + 30) for _ in range(10)))
    assert [v for v, _ in verdicts].count(ProbeVerdict.PROBE) == 3


async def test_breakers_are_per_provider() -> None:
    """RESIL-1: one provider's failures never open another's breaker."""
    b, _ = make()
    for _ in range(5):
        await b.on_failure("p", server_error(), T0)
    recs = await b.records(["p", "q"])
    assert breaker_view(recs["q"], T0) is BreakerState.CLOSED
