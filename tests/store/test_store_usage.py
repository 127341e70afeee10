"""Usage log (OBS-1), routing decisions (OBS-2) and the Responses API store."""

from __future__ import annotations

import time
from typing import Any

import pytest

from omniroute.store import Store


def _row(**kw: object) -> dict[str, object]:
    row: dict[str, object] = {
        "request_id": "r",
        "requested_model": "fast",
        "provider": "openai",
        "model": "gpt-4o",
        "connection_id": "c1",
        "strategy": "priority",
        "attempts": 1,
        "status": 200,
        "latency_ms": 100.0,
        "ttft_ms": 20.0,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cost_usd": 0.001,
    }
    row.update(kw)
    return row


async def test_write_usage_and_stats(store: Store) -> None:
    """OBS-1: rows are written in bulk; stats aggregate per ``provider/model@connection``."""
    now = time.time()
    await store.write_usage(
        [
            _row(ts=now - 10, latency_ms=100.0),
            _row(ts=now - 9, latency_ms=300.0, ttft_ms=None, stream=True),
            _row(ts=now - 8, status=503, latency_ms=5.0, error="overloaded"),
            _row(ts=now - 7, status=499, latency_ms=50.0),  # client went away: not a failure
            _row(ts=now - 6, connection_id="c2", status=429, latency_ms=1.0),
            _row(ts=now - 5, provider=None, model=None, connection_id=None, status=404),
            _row(ts=now - 5000, latency_ms=9999.0),  # before the window
            {"request_id": "sparse"},  # every column has a default
        ]
    )
    stats = await store.usage_stats(now - 60)
    assert set(stats) == {"openai/gpt-4o@c1", "openai/gpt-4o@c2"}
    c1 = stats["openai/gpt-4o@c1"]
    assert (c1["requests"], c1["failures"]) == (4, 1)
    assert c1["avg_latency_ms"] == pytest.approx(200.0)
    assert c1["avg_ttft_ms"] == pytest.approx(20.0)
    assert c1["cost_usd"] == pytest.approx(0.004)
    c2 = stats["openai/gpt-4o@c2"]
    assert (c2["requests"], c2["failures"], c2["avg_latency_ms"]) == (1, 1, None)
    await store.write_usage([])


async def test_recent_usage_newest_first(store: Store) -> None:
    now = time.time()
    await store.write_usage(
        [_row(ts=now - i, request_id=f"r{i}", member="m" if i == 1 else None) for i in range(5)]
    )
    recent = await store.recent_usage(limit=3)
    assert [r["request_id"] for r in recent] == ["r0", "r1", "r2"]
    assert recent[1]["member"] == "m" and recent[0]["stream"] is False and isinstance(recent[0]["id"], int)


async def test_decisions_round_trip_and_replace(store: Store) -> None:
    """OBS-2: a decision is queryable by request id; saving again replaces it."""
    d1 = {"candidates": [{"key": "openai/gpt-4o@c1", "scores": {"quota": 0.5}}], "exclusions": []}
    await store.save_decisions([("req-1", time.time(), d1), ("req-2", time.time(), {"attempts": []})])
    assert await store.get_decision("req-1") == d1
    await store.save_decisions([("req-1", time.time(), {"replaced": True})])
    assert await store.get_decision("req-1") == {"replaced": True}
    assert await store.get_decision("nope") is None
    await store.save_decisions([])


async def test_response_store_ttl_and_key_isolation(store: Store) -> None:
    """Responses API: a stored response is visible only to its key and only until it expires."""
    data = {"id": "resp_1", "output": [{"type": "message"}]}
    await store.save_response("resp_1", "key-a", data, ttl_s=3600)
    await store.save_response("resp_old", "key-a", {"id": "resp_old"}, ttl_s=-1)
    await store.save_response("resp_anon", None, {"id": "resp_anon"}, ttl_s=3600)
    assert await store.get_response("resp_1", "key-a") == data
    assert await store.get_response("resp_1", "key-b") is None
    assert await store.get_response("resp_1", None) is None
    assert await store.get_response("resp_old", "key-a") is None
    assert await store.get_response("resp_anon", None) == {"id": "resp_anon"}
    assert await store.get_response("missing", "key-a") is None


async def test_prune_drops_old_rows(store: Store) -> None:
    now = time.time()
    await store.write_usage([_row(ts=now - 100), _row(ts=now)])
    await store.save_decisions([("old", now - 100, {}), ("new", now, {})])
    await store.save_response("expired", "k", {}, ttl_s=-1)
    await store.save_response("live", "k", {}, ttl_s=60)
    assert await store.prune(now - 50) == {"usage_log": 1, "routing_decisions": 1, "responses_store": 1}
    assert len(await store.recent_usage()) == 1
    assert await store.get_decision("new") == {} and await store.get_decision("old") is None


async def test_ping(store: Store) -> None:
    """OBS-4: the readiness probe sees the database."""
    assert await store.ping() is True


async def test_usage_summary_sums_token_classes_by_key_model_and_utc_day(store: Store) -> None:
    """OBS-1: sums per key and UTC day (a row one second before midnight is the earlier day), every
    token class and the cost; member rows are left out; rows outside the window are ignored."""
    midnight = 1_764_633_600.0  # 2025-12-02T00:00:00Z
    await store.write_usage(
        [
            _row(ts=midnight - 1, api_key_id="k1", cached_tokens=4, cost_usd=0.25),
            _row(ts=midnight, api_key_id="k1", cache_write_tokens=3, cache_write_1h_tokens=1, cost_usd=0.5),
            _row(ts=midnight + 60, api_key_id="k1", reasoning_tokens=2, price_unknown=True, cost_usd=0.0),
            _row(ts=midnight + 61, api_key_id="k1", member="panel[0]", cost_usd=9.0),
            _row(ts=midnight + 62, api_key_id="k2", model="gpt-5", cost_usd=0.125),
            _row(ts=midnight + 86_400, api_key_id="k1", cost_usd=7.0),
        ]
    )
    data = await store.usage_summary(["key", "day"], midnight - 86_400, midnight + 86_400)
    assert [(d["key"], d["day"], d["requests"], d["cost_usd"]) for d in data] == [
        ("k1", "2025-12-01", 1, 0.25),
        ("k1", "2025-12-02", 2, 0.5),
        ("k2", "2025-12-02", 1, 0.125),
    ]
    k1 = data[1]
    assert (k1["prompt_tokens"], k1["completion_tokens"], k1["cache_write_tokens"]) == (20, 10, 3)
    assert (k1["cache_write_1h_tokens"], k1["reasoning_tokens"], k1["price_unknown_requests"]) == (1, 2, 1)
    by_model = await store.usage_summary(["model"], midnight - 86_400, midnight + 86_400)
    assert [(d["model"], d["requests"]) for d in by_model] == [("gpt-4o", 3), ("gpt-5", 1)]
    with pytest.raises(ValueError, match="colour"):
        await store.usage_summary(["colour"], 0, midnight)


async def test_recent_usage_filters_and_pages(store: Store) -> None:
    """OBS-1: recent requests filter by key, model (requested, served id or provider/model), status and
    request id, and page with an offset."""
    now = time.time()
    await store.write_usage(
        [
            _row(ts=now - 1, request_id="a", api_key_id="k1", requested_model="combo-x", status=200),
            _row(ts=now - 2, request_id="b", api_key_id="k2", status=503),
            _row(ts=now - 3, request_id="c", api_key_id="k1", status=429),
            _row(ts=now - 4, request_id="d", api_key_id=None, provider="anthropic", model="claude"),
        ]
    )

    async def ids(**kw: Any) -> list[str]:
        return [r["request_id"] for r in await store.recent_usage(limit=10, **kw)]

    assert await ids(api_key_id="k1") == ["a", "c"]
    assert await ids(model="combo-x") == ["a"]
    assert await ids(model="anthropic/claude") == ["d"] == await ids(model="claude")
    assert await ids(status="error") == ["b", "c"]
    assert await ids(status="ok") == ["a", "d"]
    assert await ids(status="429") == ["c"]
    assert await ids(request_id="b") == ["b"]
    assert [r["request_id"] for r in await store.recent_usage(limit=2, offset=1)] == ["b", "c"]
    with pytest.raises(ValueError):
        await ids(status="bad")


async def test_traffic_summary_counts_percentiles_and_tops(store: Store) -> None:
    """Console overview: per-bucket and total requests, errors (not 499), fallbacks, nearest-rank
    p50/p95 latency and TTFT over successful main rows, spend; member rows count once via the main
    row; rows before the window are left out."""
    base = 1_699_999_980.0  # a multiple of 60: buckets are aligned
    rows = [_row(ts=base + i, latency_ms=float(10 * (i + 1)), ttft_ms=float(i + 1)) for i in range(20)]
    rows += [
        _row(ts=base + 61, status=503, latency_ms=5000.0, api_key_id="k1"),
        _row(ts=base + 62, status=499, latency_ms=7000.0, api_key_id="k1"),
        _row(ts=base + 63, attempts=3, latency_ms=300.0, ttft_ms=None, api_key_id="k1", model="m2"),
        _row(ts=base + 63, member="panel-1", latency_ms=99999.0),
        _row(ts=base - 1, latency_ms=88888.0),
    ]
    await store.write_usage(rows)
    s = await store.traffic_summary(base, 60)
    t = s["totals"]
    assert (t["requests"], t["errors"], t["fallbacks"]) == (23, 1, 1)
    assert t["p50_latency_ms"] == 110.0 and t["p95_latency_ms"] == 200.0  # 21 ok rows: ranks 11 and 20
    assert t["p50_ttft_ms"] == 10.0 and t["p95_ttft_ms"] == 19.0  # 20 rows with a TTFT: ranks 10, 19
    assert t["cost_usd"] == pytest.approx(23 * 0.001)
    first, second = s["series"]
    assert first["ts"] == base and first["requests"] == 20 and first["p95_latency_ms"] == 190.0
    assert second["ts"] == base + 60 and (second["requests"], second["errors"]) == (3, 1)
    assert second["p50_latency_ms"] == 300.0 and second["p50_ttft_ms"] is None
    assert s["top_models"][0] == {
        "provider": "openai",
        "model": "gpt-4o",
        "requests": 22,
        "cost_usd": pytest.approx(0.022),
    }
    assert [k["api_key_id"] for k in s["top_keys"]] == [None, "k1"]
    empty = await store.traffic_summary(base + 10_000, 60)
    assert empty["series"] == [] and empty["totals"]["requests"] == 0
    assert empty["totals"]["p50_latency_ms"] is None
