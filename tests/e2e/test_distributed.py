"""Two gateways sharing routing state through Redis behave like one gateway (STORE-2, RESIL-1, RESIL-2).

Each test starts two real gateways (uvicorn, real sockets) in front of the shared fake providers, both
with ``redis_url: redis://…/0?prefix=<random>`` — the ``prefix`` query parameter namespaces the keys
(``omniroute:{<prefix>}:…``) so tests never see each other's state; the keys are deleted afterwards.
Each gateway keeps its own SQLite file: the point here is the shared routing state, not the database.
Redis comes from ``OMNIROUTE_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); the tests skip
when it is down.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.clock import FakeClock
from omniroute.state.redis import RedisRoutingState
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

REDIS_URL = os.environ.get("OMNIROUTE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _redis_up() -> bool:
    parts = urllib.parse.urlsplit(REDIS_URL)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=0.5):
            return True
    except OSError:
        return False


needs_redis = pytest.mark.skipif(not _redis_up(), reason=f"no Redis at {REDIS_URL}")

COMBO = {
    "name": "dist",
    "strategy": "priority",
    "targets": [{"model": "local-o/model-o"}, {"model": "local-c/model-c"}],
}


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A fresh key prefix; its keys are deleted after the test (after the gateways stopped)."""
    prefix = f"e2e-{uuid.uuid4().hex[:12]}"
    yield prefix

    async def clear() -> None:
        state = RedisRoutingState(url=REDIS_URL, prefix=prefix)
        try:
            await state.clear()
        finally:
            await state.aclose()

    asyncio.run(clear())


@pytest.fixture
def pair(
    redis_prefix: str,
    make_gateway: Callable[..., GatewayThread],
    fakes: dict[str, FakeProviderThread],
    tmp_path: Path,
) -> Iterator[tuple[GatewayThread, GatewayThread]]:
    """Two gateways on one Redis prefix, each with its own SQLite file, on fake clocks that read the
    same time (replicas with synchronised clocks; advance both)."""
    extra: dict[str, Any] = {
        "redis_url": f"{REDIS_URL}?prefix={redis_prefix}",
        "combos": [COMBO],
        "resilience": {
            "circuit_breaker": {"failure_threshold": 2, "reset_timeout_s": 30},
            "cooldown": {"base_s": 0.01, "max_s": 0.02},
        },
    }
    g1 = make_gateway({**extra, "database_url": f"sqlite:///{tmp_path}/gw1.db"}, clock=FakeClock())
    g2 = make_gateway({**extra, "database_url": f"sqlite:///{tmp_path}/gw2.db"}, clock=FakeClock())
    try:
        yield g1, g2
    finally:
        fakes["o"].set_behaviour("model-o", "")


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """One keep-alive client for every call (a fresh client per call costs ~0.1 s)."""
    with httpx.Client(timeout=20) as client:
        yield client


def chat(http: httpx.Client, gw: GatewayThread, model: str = "dist") -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hello there"}]}
    return http.post(f"{gw.base_url}/chat/completions", json=body)


def served_by(r: httpx.Response) -> str:
    return r.headers.get("x-omniroute-provider", "")


def resilience(http: httpx.Client, gw: GatewayThread) -> dict[str, Any]:
    return http.get(f"{gw.url}/api/resilience").json()


@needs_redis
def test_429_through_one_gateway_cools_the_connection_for_the_other(
    pair: tuple[GatewayThread, GatewayThread], fakes: dict[str, FakeProviderThread], http: httpx.Client
) -> None:
    """RESIL-2 + STORE-2: a 429 Retry-After 30 seen by gateway 1 → gateway 2 skips connection o1 too."""
    g1, g2 = pair
    fakes["o"].set_behaviour("model-o", "fail-429-retry-30")
    r = chat(http, g1)
    assert r.status_code == 200 and served_by(r) == "local-c"
    assert fakes["o"].calls() == 1
    cooldown = resilience(http, g2)["cooldowns"]["o1"]
    assert cooldown["until"] - g2.clock.time() > 25
    r = chat(http, g2)
    assert r.status_code == 200 and served_by(r) == "local-c"
    assert fakes["o"].calls() == 1, "gateway 2 must skip the connection gateway 1 saw rate-limited"


@needs_redis
def test_breaker_opened_through_one_gateway_is_open_in_the_other(
    pair: tuple[GatewayThread, GatewayThread], fakes: dict[str, FakeProviderThread], http: httpx.Client
) -> None:
    """RESIL-1 + STORE-2: two 503s through gateway 1 open local-o's breaker; gateway 2 reports it OPEN
    and keeps traffic away; a reset through gateway 2 closes it for gateway 1."""
    g1, g2 = pair
    fakes["o"].set_behaviour("model-o", "fail-503")
    for _ in range(2):
        assert served_by(chat(http, g1)) == "local-c"
        for gw in pair:  # past the tiny cooldown, so the second request reaches o again
            gw.advance(0.05)
    assert fakes["o"].calls() == 2
    breaker = resilience(http, g2)["breakers"]["local-o"]
    assert breaker["state"] == "OPEN" and breaker["failures"] == 2
    assert served_by(chat(http, g2)) == "local-c"
    assert fakes["o"].calls() == 2, "an OPEN breaker keeps gateway 2 away from o as well"
    fakes["o"].set_behaviour("model-o", "")
    assert http.post(f"{g2.url}/api/resilience/reset", json={}).status_code == 200
    assert "local-o" not in resilience(http, g1)["breakers"]
    assert served_by(chat(http, g1)) == "local-o"


@needs_redis
def test_both_gateways_report_the_shared_state_ready(
    pair: tuple[GatewayThread, GatewayThread], http: httpx.Client
) -> None:
    """OBS-4 + STORE-2: /health/ready pings Redis."""
    for gw in pair:
        ready = http.get(f"{gw.url}/health/ready")
        assert ready.status_code == 200 and ready.json()["state"] is True


def test_unreachable_redis_serves_requests_and_reports_degraded_but_ready(
    make_gateway: Callable[..., GatewayThread], http: httpx.Client
) -> None:
    """STORE-2 + OBS-4: Redis down → requests still succeed from local state; readiness stays 200
    (the replica can serve) and reports the degraded state."""
    gw = make_gateway({"redis_url": "redis://127.0.0.1:1/0"})
    t0 = time.monotonic()
    r = chat(http, gw, "local-o/model-o")
    assert r.status_code == 200 and served_by(r) == "local-o"
    assert time.monotonic() - t0 < 2
    ready = http.get(f"{gw.url}/health/ready")
    assert ready.status_code == 200
    assert ready.json()["status"] == "degraded"
    assert ready.json()["state"] is False and ready.json()["database"] is True
