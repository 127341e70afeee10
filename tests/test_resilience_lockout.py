"""Model lockout per (provider, connection, model) (RESIL-3)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

import pytest

from omniroute.errors import ModelUnavailable, QuotaExhausted, RateLimited
from omniroute.resilience.classify import classify_http
from omniroute.resilience.lockout import LockoutSettings, ModelLockout, next_local_midnight
from omniroute.state import FakeClock, LockKey, LockoutRecord, MemoryRoutingState

T0 = 1_700_000_000.0
KEY = LockKey("p", "c1", "m1")


@pytest.fixture
def india_tz(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A non-UTC local zone (UTC+5:30, POSIX form, no tz database needed)."""
    monkeypatch.setenv("TZ", "IST-5:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def make() -> ModelLockout:
    return ModelLockout(MemoryRoutingState(FakeClock(T0)), LockoutSettings())


async def record(lk: ModelLockout, key: LockKey = KEY) -> LockoutRecord:
    return (await lk.state.get_lockouts([key]))[key]


async def test_quota_failure_locks_the_model_for_base() -> None:
    """RESIL-3: a 402 locks the model on that connection for base (2 min)."""
    lk = make()
    await lk.on_failure(KEY, QuotaExhausted("pay", upstream_status=402), T0)
    rec = await record(lk)
    assert rec.until == T0 + 120
    assert rec.reason == "quota exhausted (402)"


async def test_repeated_lockouts_double_up_to_the_cap() -> None:
    """RESIL-3: base·2^n — 2, 4, 8, 16, 30, 30 min."""
    lk = make()
    now = T0
    waits = []
    for _ in range(6):
        await lk.on_failure(KEY, ModelUnavailable("gone", upstream_status=404), now)
        rec = await record(lk)
        waits.append(rec.until - now)
        now = rec.until
    assert waits == [120, 240, 480, 960, 1800, 1800]


async def test_level_resets_after_a_quiet_period() -> None:
    """RESIL-3: a lock long after the last one ended starts again at base."""
    lk = make()
    await lk.on_failure(KEY, QuotaExhausted("q", upstream_status=402), T0)
    await lk.on_failure(KEY, QuotaExhausted("q", upstream_status=402), T0 + 120)
    later = T0 + 120 + 240 + 1800
    await lk.on_failure(KEY, QuotaExhausted("q", upstream_status=402), later)
    assert (await record(lk)).until == later + 120


async def test_other_models_on_the_connection_stay_usable() -> None:
    """RESIL-3: only (provider, connection, model) is locked."""
    lk = make()
    await lk.on_failure(KEY, QuotaExhausted("q", upstream_status=402), T0)
    found = await lk.state.get_lockouts([KEY, LockKey("p", "c1", "m2"), LockKey("p", "c2", "m1")])
    assert list(found) == [KEY]


async def test_daily_quota_locks_until_next_local_midnight(india_tz: None) -> None:
    """RESIL-3: "daily quota" text locks until the next local midnight."""
    lk = make()
    err = classify_http(
        429, {}, b'{"error": {"message": "You exceeded your daily quota"}}', provider="p", now=T0
    )
    assert isinstance(err, QuotaExhausted) and err.until_midnight
    await lk.on_failure(KEY, err, T0)
    rec = await record(lk)
    local = datetime.fromtimestamp(rec.until)
    assert (local.hour, local.minute, local.second) == (0, 0, 0)
    assert 0 < rec.until - T0 <= 24 * 3600
    assert rec.until == next_local_midnight(T0)
    assert rec.reason == "daily quota (429)"


def test_next_local_midnight_is_local_not_utc(india_tz: None) -> None:
    """RESIL-3: midnight is the operator's local midnight."""
    # T0 = 2023-11-14 22:13:20 UTC = 2023-11-15 03:43:20 IST → next midnight 2023-11-16 00:00 IST
    assert next_local_midnight(T0) == 1_700_073_000.0  # 2023-11-15T18:30:00Z
    assert datetime.fromtimestamp(next_local_midnight(T0)).isoformat() == "2023-11-16T00:00:00"


async def test_long_upstream_hint_is_honoured() -> None:
    """RESIL-3: a quota reset hint longer than the backoff is honoured."""
    lk = make()
    await lk.on_failure(KEY, QuotaExhausted("q", upstream_status=429, retry_after_s=3600), T0)
    assert (await record(lk)).until == T0 + 3600


async def test_success_unlocks_and_resets_level() -> None:
    """RESIL-3: a success of that model on that connection drops the lock."""
    lk = make()
    await lk.on_failure(KEY, QuotaExhausted("q", upstream_status=402), T0)
    await lk.on_success(KEY, T0 + 1)
    assert await lk.state.get_lockouts([KEY]) == {}


async def test_rate_limits_are_not_lockouts() -> None:
    """RESIL-3: transient failures belong to the cooldown tier."""
    lk = make()
    assert await lk.on_failure(KEY, RateLimited("x", upstream_status=429), T0) is None
