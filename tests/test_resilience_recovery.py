"""Recovery rules of the ladder with the shipped defaults (RESIL-11): capped server-error cooldowns,
capped breaker backoff, and the half-open probe admitted through a failure cooldown."""

from __future__ import annotations

import itertools

from omniroute.errors import Overloaded, RateLimited
from omniroute.resilience.breaker import BreakerSettings
from omniroute.resilience.cooldown import CooldownSettings
from omniroute.resilience.filters import LadderContext
from omniroute.resilience.ladder import Resilience
from omniroute.state import FakeClock, MemoryRoutingState
from omniroute.values import Candidate, Connection, ModelInfo, ProviderInfo

T0 = 1_700_000_000.0


def cand(provider: str) -> Candidate:
    m = ModelInfo(id="m", context_window=128_000)
    return Candidate(
        provider=ProviderInfo(id=provider, models=(m,)),
        connection=Connection(id=f"{provider}1", provider=provider),
        model=m,
    )


def make(
    breaker: BreakerSettings | None = None, cooldown: CooldownSettings | None = None
) -> tuple[Resilience, FakeClock]:
    clock = FakeClock(T0)
    return Resilience(MemoryRoutingState(clock), clock, breaker, cooldown), clock


async def first_choice(r: Resilience, clock: FakeClock, *cands: Candidate) -> Candidate | None:
    survivors = (await r.filter(list(cands), LadderContext(now=clock.time()))).survivors
    for extra in survivors[1:]:
        await r.release_probe(extra)
    return survivors[0] if survivors else None


def test_shipped_defaults_probe_every_ten_seconds() -> None:
    """RESIL-11: the breaker opens for 10 s and re-opens for 10 s after each failed probe."""
    s = BreakerSettings()
    assert (s.reset_timeout_s, s.max_reset_timeout_s, s.effective_multiplier) == (10, 10, 1)
    assert BreakerSettings(reset_timeout_s=3).effective_multiplier == 10 / 3
    assert BreakerSettings(reset_timeout_s=30).effective_multiplier == 1  # never below the base
    assert BreakerSettings(reset_timeout_s=1, max_reset_timeout_s=1000).effective_multiplier == 16
    assert CooldownSettings().server_error_max_s == 10


async def test_outage_of_sixty_seconds_then_recovery_at_the_ladder() -> None:
    """RESIL-11: A overloaded for 60 s, a request every 4 s, B as fallback: A is chosen again within
    15 s of recovering, and after its breaker opened A is tried at most once per 10 s."""
    r, clock = make()
    a, b = cand("a"), cand("b")
    tried: list[float] = []
    back: float | None = None
    for step in range(40):
        t = step * 4.0
        clock.set(T0 + t)
        chosen = await first_choice(r, clock, a, b)
        assert chosen is not None
        if chosen is a:
            if t < 60:
                tried.append(t)
                await r.record_failure(a, Overloaded("busy", upstream_status=503))
            else:
                back = t
                break
    assert back is not None and back - 60 <= 15
    probes = tried[4:]  # the fifth failure opened the breaker; every later try is a probe
    assert probes and all(y - x >= 10 for x, y in itertools.pairwise(probes)), tried


async def test_half_open_probe_passes_a_failure_cooldown() -> None:
    """RESIL-11: a connection still cooling down after 503s gets the half-open probe; once the probe
    is taken, the cooldown holds everyone else back again."""
    cooldown = CooldownSettings(server_error_max_s=600)
    r, clock = make(BreakerSettings(failure_threshold=1), cooldown)
    a, b = cand("a"), cand("b")
    await r.record_failure(a, Overloaded("busy", upstream_status=503, retry_after_s=300))
    clock.advance(10)  # breaker HALF_OPEN, connection still cooling for 290 s
    res = await r.filter([a, b], LadderContext(now=clock.time()))
    assert [c.key for c in res.survivors] == [a.key, b.key]
    assert res.probes == {a.key}
    again = await r.filter([a, b], LadderContext(now=clock.time()))
    assert [c.key for c in again.survivors] == [b.key]


async def test_half_open_probe_does_not_pass_a_rate_limit() -> None:
    """RESIL-11: a 429 cooldown is the upstream's own reset: even a half-open probe waits for it."""
    r, clock = make(BreakerSettings(failure_threshold=1))
    a, b = cand("a"), cand("b")
    await r.record_failure(a, Overloaded("busy", upstream_status=503))
    await r.record_failure(a, RateLimited("slow down", upstream_status=429, retry_after_s=120))
    clock.advance(10)
    res = await r.filter([a, b], LadderContext(now=clock.time()))
    assert [c.key for c in res.survivors] == [b.key]
    assert res.exclusions[0].reason.startswith("rate limited (429) until")
    assert not res.probes
