"""Connection cooldown and invalid credentials (RESIL-2)."""

from __future__ import annotations

from omniroute.errors import AuthInvalid, Overloaded, QuotaExhausted, RateLimited, ServerError
from omniroute.resilience.classify import classify_http
from omniroute.resilience.cooldown import ConnectionCooldown, CooldownSettings
from omniroute.resilience.events import TransitionLog
from omniroute.state import CooldownRecord, FakeClock, MemoryRoutingState

T0 = 1_700_000_000.0


def make() -> tuple[ConnectionCooldown, TransitionLog]:
    log = TransitionLog()
    return ConnectionCooldown(MemoryRoutingState(FakeClock(T0)), CooldownSettings(), log), log


async def record(cd: ConnectionCooldown, cid: str = "c1") -> CooldownRecord:
    return (await cd.state.get_cooldowns([cid]))[cid]


async def test_hint_sets_the_deadline() -> None:
    """RESIL-2: a 429 with Retry-After 10 cools the connection for 10 s."""
    cd, log = make()
    await cd.on_failure("c1", "p", RateLimited("slow", upstream_status=429, retry_after_s=10), T0)
    rec = await record(cd)
    assert rec.until == T0 + 10
    assert rec.reason == "rate limited (429)"
    assert rec.backoff_level == 0
    assert log.to_list()[0]["kind"] == "cooldown"


async def test_deadline_never_moves_earlier() -> None:
    """RESIL-2: Retry-After 1 after Retry-After 10 keeps the 10 s deadline."""
    cd, _ = make()
    await cd.on_failure("c1", "p", RateLimited("a", upstream_status=429, retry_after_s=10), T0)
    await cd.on_failure("c1", "p", RateLimited("b", upstream_status=429, retry_after_s=1), T0 + 1)
    assert (await record(cd)).until == T0 + 10


async def test_later_hint_moves_the_deadline_later() -> None:
    """RESIL-2: deadlines are the max of old and new."""
    cd, _ = make()
    await cd.on_failure("c1", "p", RateLimited("a", upstream_status=429, retry_after_s=10), T0)
    await cd.on_failure("c1", "p", RateLimited("b", upstream_status=429, retry_after_s=20), T0 + 1)
    assert (await record(cd)).until == T0 + 21


async def test_hint_is_capped_by_max_hint() -> None:
    """RESIL-2: hints are capped at max_hint (30 min)."""
    cd, _ = make()
    await cd.on_failure("c1", "p", RateLimited("a", upstream_status=429, retry_after_s=99_999), T0)
    assert (await record(cd)).until == T0 + 1800


async def test_exponential_backoff_without_hint() -> None:
    """RESIL-2: no hint → base·2^level (3, 6, 12 … s), capped at 5 min; level rises each time."""
    cd, _ = make()
    now = T0
    waits = []
    for _ in range(10):
        await cd.on_failure("c1", "p", Overloaded("busy", upstream_status=503), now)
        rec = await record(cd)
        waits.append(rec.until - now)
        now = rec.until  # next failure right after expiry
    assert waits == [3, 6, 12, 24, 48, 96, 192, 300, 300, 300]
    assert (await record(cd)).backoff_level == 10


async def test_classified_503_and_text_cool_down() -> None:
    """RESIL-2: 503 and "overloaded"/"rate limit" texts cool the connection down."""
    cd, _ = make()
    err = classify_http(503, {"Retry-After": "4"}, b"down", provider="p", now=T0)
    await cd.on_failure("c1", "p", err, T0)
    assert (await record(cd)).until == T0 + 4
    assert (await record(cd)).reason == "overloaded (503)"
    text = classify_http(400, {}, b"rate limit exceeded", provider="p", now=T0)
    await cd.on_failure("c2", "p", text, T0)
    assert (await record(cd, "c2")).until == T0 + 3


async def test_success_resets_backoff_and_clears_deadline() -> None:
    """RESIL-2: success resets backoff."""
    cd, log = make()
    for _ in range(3):
        await cd.on_failure("c1", "p", Overloaded("busy", upstream_status=503), T0)
    await cd.on_success("c1", T0 + 1)
    rec = (await cd.state.get_cooldowns(["c1"])).get("c1")
    assert rec is None or (rec.until == 0 and rec.backoff_level == 0)
    assert log.to_list()[-1]["to"] == "ready"


async def test_auth_failure_marks_connection_invalid_until_fixed() -> None:
    """RESIL-2: 401/403 auth marks the connection invalid; success does not clear it, mark_valid does."""
    cd, log = make()
    err = classify_http(
        401, {}, b'{"error": {"message": "Incorrect API key provided"}}', provider="p", now=T0
    )
    assert isinstance(err, AuthInvalid)
    await cd.on_failure("c1", "p", err, T0)
    rec = await record(cd)
    assert rec.invalid
    assert rec.invalid_reason == "401 Incorrect API key provided"
    await cd.on_success("c1", T0 + 5)
    assert (await record(cd)).invalid
    await cd.mark_valid("c1", T0 + 6)
    assert not (await record(cd)).invalid
    assert [(e["from"], e["to"]) for e in log.to_list() if e["kind"] == "credentials"] == [
        ("valid", "invalid"),
        ("invalid", "valid"),
    ]


async def test_other_failures_are_not_this_tiers() -> None:
    """RESIL-2: server errors and quota failures do not cool the connection down."""
    cd, _ = make()
    assert await cd.on_failure("c1", "p", ServerError("x", upstream_status=500), T0) is None
    assert await cd.on_failure("c1", "p", QuotaExhausted("x", upstream_status=402), T0) is None
    assert await cd.state.get_cooldowns(["c1"]) == {}


async def test_other_connections_stay_usable() -> None:
    """RESIL-2: cooling one connection leaves the provider's other connections alone."""
    cd, _ = make()
    await cd.on_failure("c1", "p", RateLimited("x", upstream_status=429), T0)
    assert "c2" not in await cd.state.get_cooldowns(["c1", "c2"])
