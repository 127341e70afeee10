"""Reset hints written in words in 429/403 bodies (RESIL-13): durations, clock times and dates, in
every provider's error shape and every quota/rate-limit wording the classification table knows; a
hint longer than the cap still cools for the cap, and the state names the real reset."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from omniroute.errors import QuotaExhausted, RateLimited
from omniroute.resilience._fmt import iso
from omniroute.resilience.classify import classify_http
from omniroute.resilience.cooldown import ConnectionCooldown
from omniroute.resilience.hints import parse_text_wait
from omniroute.resilience.lockout import LockoutSettings, ModelLockout
from omniroute.state import FakeClock, LockKey, MemoryRoutingState

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z

# (hint as written, seconds from T0)
HINTS = [
    ("Resets in 92h27m28s.", 92 * 3600 + 27 * 60 + 28),
    ("Please try again in 3 days.", 3 * 86400),
    ("Try again in 1h 5m.", 3900),
    ("Please try again in 1 hour and 5 minutes.", 3900),
    ("try again in 20s", 20),
    ("Your quota resets at 2027-01-15T10:00:00Z.", 7200),
    ("It resets at 2027-01-15 10:30 UTC.", 9000),
    ("Limit will reset at 10:00 UTC.", 7200),
    ("Try again at 7:00 am.", 23 * 3600),  # already past today: tomorrow
    ("Credits renew on 2027-01-16.", 16 * 3600),
    ("Available again in 2 weeks.", 14 * 86400),
]

# (quota or rate-limit wording the table classifies, statuses it comes with)
WORDINGS: list[tuple[str, tuple[int, ...]]] = [
    ("You exceeded your current quota, please check your plan and billing details.", (429, 403)),
    ("Your credit balance is too low to access the API.", (429, 403)),
    ("Quota exceeded for quota metric 'Generate Content requests'.", (429, 403)),
    ("Rate limit reached for gpt-4o in organization org-x on requests per min.", (429,)),
    ("You have hit your usage limit.", (429,)),
    ("Too many requests.", (429,)),
]

Body = Callable[[int, str], bytes]


def openai(status: int, msg: str) -> bytes:
    return orjson.dumps({"error": {"message": msg, "type": "requests", "param": None, "code": None}})


def anthropic(status: int, msg: str) -> bytes:
    kind = "rate_limit_error" if status == 429 else "permission_error"
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": msg}})


def gemini(status: int, msg: str) -> bytes:
    rpc = "RESOURCE_EXHAUSTED" if status == 429 else "PERMISSION_DENIED"
    return orjson.dumps([{"error": {"code": status, "message": msg, "status": rpc}}])


def ollama(status: int, msg: str) -> bytes:
    return orjson.dumps({"error": msg})


def plain(status: int, msg: str) -> bytes:
    return msg.encode()


FORMATS: list[Body] = [openai, anthropic, gemini, ollama, plain]

CASES = [
    pytest.param(fmt, status, wording, hint, seconds, id=f"{fmt.__name__}-{status}-{i}-{j}")
    for fmt in FORMATS
    for i, (wording, statuses) in enumerate(WORDINGS)
    for status in statuses
    for j, (hint, seconds) in enumerate(HINTS)
]


@pytest.mark.parametrize(("fmt", "status", "wording", "hint", "seconds"), CASES)
def test_reset_written_in_words_is_the_wait_hint(
    fmt: Body, status: int, wording: str, hint: str, seconds: float
) -> None:
    """RESIL-13: every wording × every provider shape × every way of writing the reset becomes the
    wait hint of the quota or rate-limit error the table makes of it."""
    err = classify_http(status, {}, fmt(status, f"{wording} {hint}"), provider="p", now=T0)
    assert isinstance(err, QuotaExhausted | RateLimited), err
    assert err.retry_after_s == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    ["Please try again later.", "retry 3 times", "wait for 2 requests", "resets at 25:00", "at 10:00 UTC"],
)
def test_text_without_a_reset_gives_no_hint(text: str) -> None:
    """RESIL-13: no lead word or no valid duration/instant after it: no hint."""
    assert parse_text_wait(text, T0) is None


def test_instants_need_a_clock_and_past_ones_give_zero() -> None:
    """RESIL-13: without ``now`` only durations are read; a reset already past waits 0."""
    assert parse_text_wait("resets at 2027-01-15T10:00:00Z") is None
    assert parse_text_wait("resets at 2020-01-01T00:00:00Z", T0) == 0.0
    assert parse_text_wait("resets at 2027-01-15T12:00:00+02:00", T0) == 7200


async def test_long_reset_cools_for_max_hint_and_names_the_real_reset() -> None:
    """RESIL-13: "Resets in 92h27m28s" on a 429 cools the connection for max_hint_s (30 min) and
    the cooldown's reason names the upstream's own reset; a short hint says nothing extra."""
    cd = ConnectionCooldown(MemoryRoutingState(FakeClock(T0)))
    err = classify_http(429, {}, anthropic(429, "Usage limit. Resets in 92h27m28s"), provider="p", now=T0)
    await cd.on_failure("c1", "p", err, T0)
    rec = (await cd.state.get_cooldowns(["c1"]))["c1"]
    assert rec.until == T0 + 1800
    assert rec.reason == f"rate limited (429, resets {iso(T0 + 332848)})"
    await cd.on_failure("c2", "p", RateLimited("slow", upstream_status=429, retry_after_s=20), T0)
    assert (await cd.state.get_cooldowns(["c2"]))["c2"].reason == "rate limited (429)"


async def test_long_quota_reset_locks_for_max_hint_and_names_the_real_reset() -> None:
    """RESIL-13: a quota 403 resetting in 3 days locks the model for the lockout's max_hint_s and
    names the real reset."""
    lock = ModelLockout(MemoryRoutingState(FakeClock(T0)), LockoutSettings(max_hint_s=86400))
    body = openai(403, "You exceeded your current quota. Please try again in 3 days.")
    err = classify_http(403, {}, body, provider="p", now=T0)
    key = LockKey("p", "c1", "m")
    await lock.on_failure(key, err, T0)
    rec = (await lock.state.get_lockouts([key]))[key]
    assert rec.until == T0 + 86400
    assert rec.reason == f"quota exhausted (403, resets {iso(T0 + 3 * 86400)})"
