"""The ladder: filters, pre-call checks and the Resilience facade (RESIL-1/2/3/8, house style 7)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omniroute.errors import (
    AuthInvalid,
    ContextOverflow,
    ModelUnavailable,
    Overloaded,
    QuotaExhausted,
    RateLimited,
    ServerError,
    Timeout,
    UpstreamBadRequest,
)
from omniroute.resilience.breaker import BreakerSettings
from omniroute.resilience.ladder import LadderContext, PreCallFilter, Resilience
from omniroute.resilience.precall import estimate_prompt_tokens, prompt_profile, required_capabilities
from omniroute.state import FakeClock, MemoryRoutingState
from omniroute.values import Candidate, Connection, ModelInfo, ProviderInfo

T0 = 1_700_000_000.0
ALL_CAPS = frozenset({"tools", "vision", "structured_output"})


def cand(
    provider: str = "p",
    conn: str = "c1",
    model: str = "m",
    *,
    window: int = 128_000,
    caps: frozenset[str] | None = ALL_CAPS,
    active: bool = True,
    max_concurrent: int | None = None,
) -> Candidate:
    m = ModelInfo(id=model, context_window=window, capabilities=caps)
    return Candidate(
        provider=ProviderInfo(id=provider, models=(m,)),
        connection=Connection(id=conn, provider=provider, is_active=active, max_concurrent=max_concurrent),
        model=m,
    )


# RESIL-1's own breaker timings (30 s, doubling); the shipped 10 s defaults are covered by the
# recovery tests.
RESIL1 = {"reset_timeout_s": 30.0, "max_reset_timeout_s": 480.0}


def make(**breaker: Any) -> tuple[Resilience, FakeClock]:
    clock = FakeClock(T0)
    settings = BreakerSettings(**{**RESIL1, **breaker})
    return Resilience(MemoryRoutingState(clock), clock, settings), clock


def ctx(clock: FakeClock, **kw: Any) -> LadderContext:
    return LadderContext(now=clock.time(), **kw)


def keys(cands: list[Candidate]) -> list[str]:
    return [c.key for c in cands]


async def open_breaker(r: Resilience, c: Candidate) -> None:
    for _ in range(5):
        await r.record_failure(c, ServerError("HTTP 500", upstream_status=500))


async def test_healthy_candidates_all_survive_in_order() -> None:
    """House style 7: survivors keep their order; no exclusions when all is well."""
    r, clock = make()
    pool = [cand("a"), cand("b"), cand("c")]
    res = await r.filter(pool, ctx(clock))
    assert keys(res.survivors) == keys(pool)
    assert res.exclusions == [] and res.probes == frozenset()


async def test_open_breaker_excludes_the_provider_with_reason() -> None:
    """RESIL-1: OPEN excludes the provider from every decision, reason names the deadline."""
    r, clock = make()
    a1, a2, b = cand("a", "a1"), cand("a", "a2"), cand("b", "b1")
    await open_breaker(r, a1)
    clock.advance(3)
    res = await r.filter([a1, a2, b], ctx(clock))
    assert keys(res.survivors) == [b.key]
    assert len(res.exclusions) == 2
    assert res.exclusions[0].reason.startswith("circuit open until ")
    assert res.exclusions[0].reason.endswith("(27 s)")
    assert res.exclusions[0].connection == "a1"


async def test_half_open_admits_one_probe_among_twenty_concurrent_requests() -> None:
    """RESIL-1: 20 concurrent requests against a HALF_OPEN provider send exactly one probe."""
    r, clock = make()
    a = cand("a")
    await open_breaker(r, a)
    clock.advance(30)
    results = await asyncio.gather(*(r.filter([a], ctx(clock)) for _ in range(20)))
    admitted = [res for res in results if res.survivors]
    assert len(admitted) == 1
    assert admitted[0].probes == frozenset({a.key})
    rejected = [res.exclusions[0].reason for res in results if not res.survivors]
    assert len(rejected) == 19
    assert all("half-open" in reason for reason in rejected)


async def test_probe_success_closes_the_breaker() -> None:
    """RESIL-1: the probe's success closes the breaker; everyone gets through again."""
    r, clock = make()
    a = cand("a")
    await open_breaker(r, a)
    clock.advance(30)
    assert (await r.filter([a], ctx(clock))).probes
    await r.record_success(a, latency_ms=120.0)
    results = await asyncio.gather(*(r.filter([a], ctx(clock)) for _ in range(5)))
    assert all(res.survivors and not res.probes for res in results)


async def test_probe_failure_reopens_with_doubled_timeout() -> None:
    """RESIL-1: the probe fails → OPEN again for 60 s."""
    r, clock = make()
    a = cand("a")
    await open_breaker(r, a)
    clock.advance(30)
    await r.filter([a], ctx(clock))
    await r.record_failure(a, Timeout("TTFT timeout after 60s"))
    clock.advance(59)
    assert not (await r.filter([a], ctx(clock))).survivors
    clock.advance(1)
    assert (await r.filter([a], ctx(clock))).probes == frozenset({a.key})


async def test_released_probe_lets_the_next_request_probe() -> None:
    """RESIL-1: an admitted probe that was never attempted is given back."""
    r, clock = make()
    a = cand("a")
    await open_breaker(r, a)
    clock.advance(30)
    assert (await r.filter([a], ctx(clock))).probes
    assert not (await r.filter([a], ctx(clock))).survivors
    await r.release_probe(a)
    assert (await r.filter([a], ctx(clock))).probes


async def test_probe_failing_with_a_rate_limit_frees_the_slot() -> None:
    """RESIL-1: a non-counted probe failure (429) is inconclusive: the slot is freed, still HALF_OPEN."""
    r, clock = make()
    a1, a2 = cand("a", "a1"), cand("a", "a2")
    await open_breaker(r, a1)
    clock.advance(30)
    assert (await r.filter([a1], ctx(clock))).probes
    await r.record_failure(a1, RateLimited("slow", upstream_status=429, retry_after_s=5))
    res = await r.filter([a1, a2], ctx(clock))
    assert keys(res.survivors) == [a2.key]
    assert res.probes == frozenset({a2.key})


async def test_probe_is_not_claimed_for_a_candidate_a_later_tier_removes() -> None:
    """RESIL-1/2: a cooling connection never takes the half-open slot from a usable one."""
    r, clock = make()
    a1, a2 = cand("a", "a1"), cand("a", "a2")
    await open_breaker(r, a2)
    await r.record_failure(a1, RateLimited("slow", upstream_status=429, retry_after_s=600))
    clock.advance(30)
    res = await r.filter([a1, a2], ctx(clock))
    assert keys(res.survivors) == [a2.key]
    assert res.probes == frozenset({a2.key})


async def test_cooldown_excludes_the_connection_with_cause_and_deadline() -> None:
    """RESIL-2: a cooling connection is skipped, the provider's other connections are not."""
    r, clock = make()
    a1, a2 = cand("a", "a1"), cand("a", "a2")
    await r.record_failure(a1, RateLimited("slow", upstream_status=429, retry_after_s=20))
    res = await r.filter([a1, a2], ctx(clock))
    assert keys(res.survivors) == [a2.key]
    assert res.exclusions[0].reason.startswith("rate limited (429) until ")
    assert res.exclusions[0].reason.endswith("(20 s)")
    clock.advance(20)
    assert len((await r.filter([a1, a2], ctx(clock))).survivors) == 2


async def test_invalid_and_inactive_connections_are_excluded() -> None:
    """RESIL-2, PROV-3: invalid credentials and inactive connections are skipped with reasons."""
    r, clock = make()
    bad, off, ok = cand("a", "bad"), cand("a", "off", active=False), cand("a", "ok")
    await r.record_failure(bad, AuthInvalid("Incorrect API key provided", upstream_status=401))
    res = await r.filter([bad, off, ok], ctx(clock))
    assert keys(res.survivors) == [ok.key]
    assert [e.reason for e in res.exclusions] == [
        "credentials invalid: 401 Incorrect API key provided",
        "connection inactive",
    ]
    await r.mark_connection_valid("bad")
    assert bad.key in keys((await r.filter([bad], ctx(clock))).survivors)


async def test_connection_at_max_concurrent_is_excluded() -> None:
    """PROV-3: a connection with max_concurrent in-flight attempts is skipped."""
    r, clock = make()
    c = cand("a", "a1", max_concurrent=1)
    await r.state.incr_inflight("a1")
    res = await r.filter([c], ctx(clock))
    assert res.exclusions[0].reason == "connection at max_concurrent (1/1 in flight)"
    await r.state.decr_inflight("a1")
    assert (await r.filter([c], ctx(clock))).survivors


async def test_lockout_excludes_only_that_model_on_that_connection() -> None:
    """RESIL-3: the locked model is skipped on that connection; other models and connections stay."""
    r, clock = make()
    m1, m2, other = cand("a", "a1", "m1"), cand("a", "a1", "m2"), cand("a", "a2", "m1")
    await r.record_failure(m1, QuotaExhausted("pay", upstream_status=402))
    res = await r.filter([m1, m2, other], ctx(clock))
    assert keys(res.survivors) == [m2.key, other.key]
    assert res.exclusions[0].reason.startswith(
        "model locked on this connection: quota exhausted (402) until "
    )
    await r.record_failure(m2, ModelUnavailable("gone", upstream_status=404))
    assert keys((await r.filter([m1, m2, other], ctx(clock))).survivors) == [other.key]


async def test_precall_excludes_small_windows_and_missing_capabilities() -> None:
    """RESIL-8: too-small context windows and missing capabilities are skipped with reasons."""
    small = cand("a", model="small", window=8192)
    novision = cand("b", model="text", caps=frozenset({"tools"}))
    big = cand("c", model="big")
    res = await PreCallFilter()(
        [small, novision, big],
        LadderContext(now=T0, estimated_prompt_tokens=12000, required_capabilities=frozenset({"vision"})),
    )
    assert keys(res.survivors) == [big.key]
    assert [e.reason for e in res.exclusions] == [
        "context window 8192 < estimated prompt 12000 tokens",
        "lacks capability: vision",
    ]


async def test_precall_fails_open_when_it_would_remove_everyone() -> None:
    """RESIL-8: if the checks would remove every candidate, none is removed."""
    pool = [cand("a", window=4096), cand("b", caps=frozenset({"vision"}))]
    res = await PreCallFilter()(
        pool, LadderContext(now=T0, estimated_prompt_tokens=9000, required_capabilities=frozenset({"tools"}))
    )
    assert keys(res.survivors) == keys(pool)
    assert res.exclusions == []


async def test_precall_keeps_unknown_windows_and_capabilities() -> None:
    """RESIL-8: unknown (0) windows and unknown capabilities are not grounds to skip."""
    unknown = cand("a", window=0, caps=None)
    res = await PreCallFilter()(
        [unknown],
        LadderContext(now=T0, estimated_prompt_tokens=10**6, required_capabilities=frozenset({"tools"})),
    )
    assert res.survivors == [unknown]


async def test_precall_skips_declared_empty_capabilities_but_keeps_unknown_ones() -> None:
    """RESIL-8: capabilities declared empty mean none (skipped when tools are needed); unknown
    capabilities are kept."""
    none, unknown = cand("a", caps=frozenset()), cand("b", caps=None)
    res = await PreCallFilter()(
        [none, unknown], LadderContext(now=T0, required_capabilities=frozenset({"tools"}))
    )
    assert keys(res.survivors) == [unknown.key]
    assert [e.reason for e in res.exclusions] == ["lacks capability: tools"]


async def test_after_context_overflow_only_larger_windows_remain() -> None:
    """RESIL-5: after a ContextOverflow only targets with a larger window are tried (hard limit)."""
    small, same, bigger = cand("a", window=8192), cand("b", window=8192), cand("c", window=32768)
    c = LadderContext(now=T0, estimated_prompt_tokens=100)
    c.note_context_overflow(8192)
    res = await PreCallFilter()([small, same, bigger], c)
    assert keys(res.survivors) == [bigger.key]
    none_fit = await PreCallFilter()([small, same], c)
    assert none_fit.survivors == []  # a fact from the upstream, not an estimate: no fail-open


def test_estimate_prompt_tokens_is_chars_over_four_plus_four_per_message() -> None:
    """RESIL-8: cheap estimate; image data is not counted."""
    body = {
        "messages": [
            {"role": "system", "content": "x" * 400},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "y" * 400},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 100_000}},
                ],
            },
        ]
    }
    assert estimate_prompt_tokens(body) == 800 // 4 + 2 * 4


def test_required_capabilities_from_the_body() -> None:
    """RESIL-8: tools, vision and structured output are read from the request."""
    body = {
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}],
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {}}},
    }
    assert required_capabilities(body) == ALL_CAPS
    assert required_capabilities(
        {**body, "tool_choice": "none", "response_format": {"type": "json_object"}}
    ) == {"vision"}
    assert required_capabilities({"messages": [{"role": "user", "content": "hi"}]}) == frozenset()


def test_context_for_request() -> None:
    """RESIL-8: the ladder context is built from the canonical body."""
    c = LadderContext.for_request(
        {"messages": [{"role": "user", "content": "abcd" * 10}], "tools": []}, now=T0
    )
    assert c.now == T0 and c.estimated_prompt_tokens == 14 and c.required_capabilities == frozenset()


async def test_recheck_sees_state_changed_during_the_request() -> None:
    """RESIL-2: a candidate that passed the filter is re-checked before a later attempt."""
    r, clock = make()
    a = cand("a")
    assert await r.recheck(a) is None
    await r.record_failure(a, RateLimited("slow", upstream_status=429, retry_after_s=9))
    excl = await r.recheck(a, clock.time())
    assert excl is not None and excl.reason.startswith("rate limited (429)")


async def test_recheck_keeps_a_probe_we_hold_and_drops_it_when_excluded() -> None:
    """RESIL-1: the probe holder passes the re-check; excluded probes give their slot back."""
    r, clock = make()
    a = cand("a")
    await open_breaker(r, a)
    clock.advance(30)
    assert (await r.filter([a], ctx(clock))).probes
    assert await r.recheck(a) is None
    await r.state.cooldown_extend(
        "c1",
        clock.time(),
        provider="a",
        hint_s=5,
        base_s=3,
        max_s=300,
        max_hint_s=1800,
        reason="rate limited (429)",
        last_error="",
    )
    assert await r.recheck(a) is not None
    await r.state.reset_cooldowns()
    assert (await r.filter([a], ctx(clock))).probes  # the slot came back


async def test_failures_route_to_the_tier_that_owns_them() -> None:
    """RESIL-1/2/3: a bad request touches no tier and no window; a 503 cools down and counts."""
    r, _ = make()
    a = cand("a")
    await r.record_failure(a, UpstreamBadRequest("bad field", upstream_status=400))
    await r.record_failure(a, ContextOverflow("too long", upstream_status=400))
    snap = await r.snapshot()
    assert snap["breakers"] == {} and snap["cooldowns"] == {} and snap["lockouts"] == []
    assert (await r.state.get_window_stats([a.key]))[a.key].count == 0
    await r.record_failure(a, Overloaded("busy", upstream_status=503), latency_ms=12.0)
    snap = await r.snapshot()
    assert snap["breakers"]["a"]["failures"] == 1
    assert snap["cooldowns"]["c1"]["reason"] == "overloaded (503)"
    assert (await r.state.get_window_stats([a.key]))[a.key].error_rate == 1.0


async def test_success_records_latency_and_quota() -> None:
    """AUTO-3: successes feed the latency window and the quota snapshot."""
    r, _ = make()
    a = cand("a")
    await r.record_success(
        a,
        latency_ms=250.0,
        ttft_ms=80.0,
        headers={"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "4"},
    )
    stats = (await r.state.get_window_stats([a.key]))[a.key]
    assert stats.p95_ms == 250.0 and stats.p95_ttft_ms == 80.0
    quota = await r.state.get_quota("c1")
    assert quota is not None and quota.remaining_fraction == 0.4


async def test_snapshot_shows_active_entries_and_events() -> None:
    """GET /api/resilience: breakers, cooldowns, invalid connections, lockouts, events."""
    r, clock = make()
    a, b, c = cand("a", "a1"), cand("b", "b1", "mb"), cand("c", "c1")
    await open_breaker(r, a)
    await r.record_failure(b, RateLimited("slow", upstream_status=429, retry_after_s=60))
    await r.record_failure(b, QuotaExhausted("pay", upstream_status=402))
    await r.record_failure(c, AuthInvalid("bad key", upstream_status=401))
    snap = await r.snapshot()
    assert snap["breakers"]["a"]["state"] == "OPEN"
    assert snap["breakers"]["a"]["next_probe_at"] == T0 + 30
    assert snap["breakers"]["a"]["next_probe_at_iso"].endswith("Z")
    assert snap["cooldowns"]["b1"]["until"] == T0 + 60
    assert snap["invalid"]["c1"]["reason"] == "401 bad key"
    assert snap["lockouts"] == [
        {
            "provider": "b",
            "connection": "b1",
            "model": "mb",
            "until": T0 + 120,
            "until_iso": snap["lockouts"][0]["until_iso"],
            "level": 1,
            "reason": "quota exhausted (402)",
        }
    ]
    kinds = [e["kind"] for e in snap["events"]]
    assert kinds == ["breaker", "cooldown", "lockout", "credentials"]
    clock.advance(30)
    assert (await r.snapshot())["breakers"]["a"]["state"] == "HALF_OPEN"


async def test_event_log_is_bounded() -> None:
    """The transitions log keeps the last 200 events."""
    r, clock = make()
    a = cand("a")
    for _ in range(150):
        await r.record_failure(a, RateLimited("slow", upstream_status=429, retry_after_s=1))
        await r.record_success(a, latency_ms=1.0)
        clock.advance(0.5)
    assert len((await r.snapshot())["events"]) == 200


async def test_reset_clears_provider_connection_or_everything() -> None:
    """POST /api/resilience/reset: per provider, per connection, or all."""
    r, clock = make()
    a, b = cand("a", "a1"), cand("b", "b1")
    await open_breaker(r, a)
    await r.record_failure(b, AuthInvalid("bad", upstream_status=401))
    await r.record_failure(b, QuotaExhausted("pay", upstream_status=402))
    await r.reset(connection="b1")
    snap = await r.snapshot()
    assert snap["invalid"] == {} and snap["lockouts"] == [] and "a" in snap["breakers"]
    await r.reset(provider="a")
    assert (await r.snapshot())["breakers"] == {}
    await open_breaker(r, a)
    await r.record_failure(b, RateLimited("x", upstream_status=429, retry_after_s=30))
    await r.reset()
    snap = await r.snapshot()
    assert snap["breakers"] == {} and snap["cooldowns"] == {}
    assert snap["events"][-1]["kind"] == "reset"
    assert len((await r.filter([a, b], ctx(clock))).survivors) == 2


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": "nope"},
        {"messages": [{"role": "user", "content": "hello there"}, "junk", {"role": "system"}]},
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url"}, "raw"]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}],
                },
            ],
            "tools": [{"type": "function", "function": {"name": "f"}}],
            "response_format": {"type": "json_schema"},
            "system": "be brief",
        },
        {"messages": [{"role": "user", "content": "x"}], "functions": [{}], "tool_choice": "none"},
        {"messages": [{"role": "user", "content": "x"}], "functions": [{}], "prompt": ["a", {"text": "bc"}]},
        {"messages": [{"content": [{"type": "input_image"}]}], "response_format": {"type": "json_object"}},
    ],
)
def test_prompt_profile_matches_the_two_estimates(body: dict[str, Any]) -> None:
    """RESIL-8: the one-pass profile the ladder context uses equals the separate estimates."""
    assert prompt_profile(body) == (estimate_prompt_tokens(body), required_capabilities(body))
