"""Bounded resources: a week of traffic on the injected clock, with hundreds of distinct model names,
leaves Redis with only expiring keys and none for made-up names, and the database with only the rows
``retention_days`` keeps."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import redis

from omniroute.clock import FakeClock
from omniroute.state.redis.backend import COUNTER_HORIZON_S, RECORD_GRACE_S, WINDOW_HORIZON_S
from omniroute.store import Store
from omniroute.store.retention import DAY_S
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

REDIS_URL = "redis://127.0.0.1:6379/0"


def _chat(gw: GatewayThread, model: str) -> int:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=10).status_code


def test_a_week_of_traffic_with_many_model_names_leaves_redis_and_the_database_bounded(
    tmp_path: Path, make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    prefix = f"bounded-{uuid.uuid4().hex[:10]}"
    clock = FakeClock()
    gw = make_gateway({"redis_url": f"{REDIS_URL}?prefix={prefix}", "retention_days": 2}, clock=clock)
    client = redis.Redis.from_url(REDIS_URL)
    pattern = f"omniroute:{{{prefix}}}:*"
    try:
        for day in range(7):
            for i in range(20):
                assert _chat(gw, f"ghost-{day}-{i}") == 404  # no provider lists it
                assert _chat(gw, f"local-o/typo-{day}-{i}+fail-404") >= 400  # the upstream does not know it
            for _ in range(5):
                assert _chat(gw, "local-o/model-o") == 200
            gw.advance(DAY_S)
        keys = [k.decode() for k in client.scan_iter(match=pattern, count=1000)]
        assert keys, "the routing state is in Redis"
        assert not [k for k in keys if "ghost" in k or "typo" in k], keys
        assert len(keys) < 20, keys  # a handful of keys, not one per model name
        horizon = {":window:": WINDOW_HORIZON_S, ":counter:": COUNTER_HORIZON_S, ":lockout:": RECORD_GRACE_S}
        for k in keys:
            for part, limit_s in horizon.items():
                if part in k:
                    assert 0 < client.pttl(k) <= limit_s * 1000, (k, client.pttl(k))
        assert any(":window:" in k for k in keys)
    finally:
        gw.stop()
        stale = list(client.scan_iter(match=pattern, count=1000))
        if stale:
            client.delete(*stale)
        client.close()

    async def rows() -> list[float]:
        store = await Store.open(f"sqlite:///{tmp_path}/omniroute.db", data_dir=str(tmp_path))
        try:
            return [float(r["ts"]) for r in await store.recent_usage(limit=10_000)]
        finally:
            await store.close()

    stamps = asyncio.run(rows())
    assert stamps and min(stamps) >= clock.time() - 2 * DAY_S  # older days were pruned
    assert len(stamps) <= 3 * 45  # at most the requests of the days retention_days keeps


def _metric(text: str, name: str, table: str) -> float:
    prefix = f'{name}{{table="{table}"}} '
    return next(float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix))


def test_in_process_state_is_bounded_by_state_max_entries_and_evictions_are_exported(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    gw = make_gateway({"state_max_entries": 20})
    for i in range(30):  # each model served once: one latency window each
        assert _chat(gw, f"local-o/model-{i}") == 200
    text = httpx.get(f"{gw.url}/metrics", timeout=10).text
    assert _metric(text, "omniroute_state_entries", "windows") == 20
    assert _metric(text, "omniroute_state_evictions_total", "windows") == 10
    assert _metric(text, "omniroute_state_evictions_total", "lockouts") == 0
