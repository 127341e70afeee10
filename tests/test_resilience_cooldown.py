"""Connection cooldown and invalid credentials (RESIL-2)."""

from __future__ import annotations

from typing import Any

from omniroute.errors import AuthInvalid, Overloaded, QuotaExhausted, RateLimited, ServerError, UpstreamError
from omniroute.resilience.classify import classify_http
from omniroute.resilience.cooldown import ConnectionCooldown, CooldownSettings
from omniroute.resilience.events import TransitionLog
from omniroute.state import CooldownRecord, FakeClock, MemoryRoutingState

T0 = 1_700_000_000.0


def make(**settings: Any) -> tuple[ConnectionCooldown, TransitionLog]:
    log = TransitionLog()
    return ConnectionCooldown(MemoryRoutingState(FakeClock(T0)), CooldownSettings(**settings), log), log


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


async def waits_after(cd: ConnectionCooldown, err: UpstreamError, n: int = 10) -> list[float]:
    """Cooldown lengths of ``n`` failures, each arriving right after the previous cooldown expired."""
    now = T0
    waits = []
    for _ in range(n):
        await cd.on_failure("c1", "p", err, now)
        rec = await record(cd)
        waits.append(rec.until - now)
        now = rec.until
    return waits


async def test_exponential_backoff_without_hint() -> None:
    """RESIL-2: a rate limit without hint → base·2^level (3, 6, 12 … s), capped at 5 min; level
    rises each time."""
    cd, _ = make()
    waits = await waits_after(cd, RateLimited("slow down", upstream_status=429))
    assert waits == [3, 6, 12, 24, 48, 96, 192, 300, 300, 300]
    assert (await record(cd)).backoff_level == 10


async def test_server_error_cooldowns_never_exceed_ten_seconds_by_default() -> None:
    """RESIL-11: an overloaded provider backs off 3, 6, then 10 s at most, however long it stays
    down, so it is tried again within 10 s of recovering."""
    cd, _ = make()
    assert await waits_after(cd, Overloaded("busy", upstream_status=503)) == [3, 6] + [10] * 8


async def test_server_error_hint_is_capped_but_a_rate_limit_hint_is_honoured() -> None:
    """RESIL-11: a 503 or 500 asking for 10 minutes cools for server_error_max_s; a 429 asking for
    10 minutes cools for 10 minutes (the upstream's reset stands)."""
    for err, expected in (
        (Overloaded("busy", upstream_status=503, retry_after_s=600), 10),
        (ServerError("down", upstream_status=500, retry_after_s=600), 10),
        (RateLimited("slow down", upstream_status=429, retry_after_s=600), 600),
    ):
        cd, _ = make()
        await cd.on_failure("c1", "p", err, T0)
        assert (await record(cd)).until == T0 + expected, err


async def test_server_error_cap_is_configurable() -> None:
    """RESIL-11: ``cooldown.server_error_max_s`` sets the cap."""
    cd, _ = make(server_error_max_s=30)
    assert await waits_after(cd, Overloaded("busy", upstream_status=503), 5) == [3, 6, 12, 24, 30]


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
