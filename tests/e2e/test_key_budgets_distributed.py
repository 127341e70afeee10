"""Two gateway processes on one Redis and one PostgreSQL share a key's budget and rate limit (API-8).

Each test starts two ``omniroute serve`` subprocesses on loopback ports with the same PostgreSQL
schema (``OMNIROUTE_TEST_PG_URL``, a fresh schema per test) and the same Redis key prefix
(``OMNIROUTE_TEST_REDIS_URL``), in front of the in-process fake provider ``o``, and sends a bounded
number of requests for one key to both at once from a small thread pool (skipped when PostgreSQL or
Redis is not reachable). The last test runs one ``serve --workers 2`` on a SQLite file instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import free_port
from omniroute.values import ChatRequest

PG_URL = os.environ.get("OMNIROUTE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("OMNIROUTE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
ROOT = Path(__file__).resolve().parents[2]


def _up(url: str, port: int) -> bool:
    parts = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or port), timeout=0.5):
            return True
    except OSError:
        return False


needs_services = pytest.mark.skipif(
    not (_up(PG_URL, 5432) and _up(REDIS_URL, 6379)), reason="needs PostgreSQL and Redis on loopback"
)

BUDGET_KEY = "sk-shared-budget-0123456789abcdef"
RPM_KEY = "sk-shared-rpm-0123456789abcdefgh"
CAP_USD = 0.005
RPM = 10
# 400 ten-letter words: the fake reports 400 prompt tokens, the gateway estimates ~1,100 (chars / 4)
PROMPT = "abcdefghij " * 400
BODY = {"model": "local-o/model-o", "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 50}


def _pg() -> str:
    return PG_URL.replace("postgresql+asyncpg://", "postgresql://", 1)


async def _sql(sql: str, *args: Any, schema: str | None = None) -> list[asyncpg.Record]:
    settings = {"search_path": schema} if schema else None
    conn = await asyncpg.connect(_pg(), timeout=5, server_settings=settings)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"keys_{uuid.uuid4().hex[:10]}"
    asyncio.run(_sql(f"CREATE SCHEMA {name}"))
    yield name
    asyncio.run(_sql(f"DROP SCHEMA {name} CASCADE"))


def _config(fakes: dict[str, FakeProviderThread], schema: str, prefix: str, port: int) -> dict[str, Any]:
    sep = "&" if "?" in PG_URL else "?"
    return {
        "server": {"host": "127.0.0.1", "port": port, "require_api_key": True},
        "database_url": f"{PG_URL}{sep}options=-csearch_path%3D{schema}",
        "redis_url": f"{REDIS_URL}?prefix={prefix}",
        "providers": [
            {
                "id": "local-o",
                "format": "openai",
                "base_url": f"{fakes['o'].base_url}/v1",
                "models": [
                    {"id": "model-o", "input_price": 1.0, "output_price": 2.0, "max_output_tokens": 16384}
                ],
            }
        ],
        "connections": [{"id": "o1", "provider": "local-o", "api_key": "sk-o1", "default_model": "model-o"}],
        "api_keys": [
            {"name": "budget", "key": BUDGET_KEY, "budget_usd": CAP_USD},
            {"name": "rpm", "key": RPM_KEY, "rpm": RPM},
        ],
    }


def _serve(cfg: Path) -> subprocess.Popen[bytes]:
    """``omniroute serve`` on ``cfg``; its log goes to ``cfg`` with the suffix ``.log``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with cfg.with_suffix(".log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "omniroute.cli", "serve", "--config", str(cfg)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def _wait_up(proc: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gateway exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("gateway did not start within 90 s")


@pytest.fixture
def two_gateways(fakes: dict[str, FakeProviderThread], schema: str, tmp_path: Path) -> Iterator[list[str]]:
    """Two ``omniroute serve`` processes sharing the schema and the Redis prefix; their base URLs. Started
    one after the other (the first applies the migrations); stopped with SIGTERM (usage flushed)."""
    prefix = f"keys-{uuid.uuid4().hex[:12]}"
    fakes["o"].set_behaviour("model-o", "")  # plain answers whatever an earlier test set
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    try:
        for i in range(2):
            port = free_port()
            cfg = tmp_path / f"gw{i}.yaml"
            cfg.write_text(json.dumps(_config(fakes, schema, prefix, port)))
            proc = _serve(cfg)
            procs.append(proc)
            url = f"http://127.0.0.1:{port}"
            _wait_up(proc, url)
            urls.append(url)
        yield urls
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        from omniroute.state.redis import RedisRoutingState

        async def clear() -> None:
            state = RedisRoutingState(url=REDIS_URL, prefix=prefix)
            try:
                await state.clear()
            finally:
                await state.aclose()

        asyncio.run(clear())


def _hammer(urls: list[str], key: str, per_gateway: int) -> list[int]:
    """``per_gateway`` requests to each gateway, 8 at a time; their status codes."""

    def one(url: str) -> int:
        r = httpx.post(
            f"{url}/v1/chat/completions", json=BODY, headers={"authorization": f"Bearer {key}"}, timeout=30
        )
        return r.status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(one, [u for _ in range(per_gateway) for u in urls]))


@needs_services
def test_two_processes_never_spend_a_key_past_its_budget_by_more_than_one_estimate(
    two_gateways: list[str], schema: str
) -> None:
    statuses = _hammer(two_gateways, BUDGET_KEY, per_gateway=30)
    assert set(statuses) <= {200, 402}, statuses
    assert statuses.count(402) > 0 and statuses.count(200) > 0
    estimate = (ChatRequest(body=BODY, model="local-o/model-o").prompt_estimate * 1.0 + 50 * 2.0) / 1e6
    rows = asyncio.run(
        _sql(
            "SELECT u.status, u.cost_usd FROM usage_log u JOIN api_keys k ON k.id = u.api_key_id "
            "WHERE k.name = 'budget'",
            schema=schema,
        )
    )
    served = [float(r["cost_usd"]) for r in rows if r["status"] == 200]
    # rows are written every 0.25 s: wait for the 200s the clients saw to be stored
    deadline = time.monotonic() + 10
    while len(served) < statuses.count(200) and time.monotonic() < deadline:
        time.sleep(0.3)
        rows = asyncio.run(
            _sql(
                "SELECT u.status, u.cost_usd FROM usage_log u JOIN api_keys k ON k.id = u.api_key_id "
                "WHERE k.name = 'budget'",
                schema=schema,
            )
        )
        served = [float(r["cost_usd"]) for r in rows if r["status"] == 200]
    assert len(served) == statuses.count(200)
    assert sum(served) <= CAP_USD + estimate, (sum(served), CAP_USD, estimate)
    # without reservations 60 calls of ~$0.0004 would have spent ~$0.024
    assert sum(served) > CAP_USD / 2


@needs_services
def test_two_processes_share_one_requests_per_minute_limit(two_gateways: list[str]) -> None:
    statuses = _hammer(two_gateways, RPM_KEY, per_gateway=15)
    assert set(statuses) <= {200, 429}, statuses
    assert 1 <= statuses.count(200) <= RPM, statuses
    assert statuses.count(429) >= 30 - RPM


def test_two_workers_on_one_sqlite_file_never_spend_a_key_past_its_budget_by_more_than_one_estimate(
    fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """Without Redis the reservation is one conditional UPDATE in the database, which the workers of
    ``serve --workers 2`` share."""
    import sqlite3

    fakes["o"].set_behaviour("model-o", "")
    port = free_port()
    cfg_data = _config(fakes, "unused", "unused", port)
    del cfg_data["redis_url"]
    cfg_data["database_url"] = f"sqlite:///{tmp_path}/workers.db"
    cfg_data["server"]["workers"] = 2
    cfg = tmp_path / "workers.yaml"
    cfg.write_text(json.dumps(cfg_data))
    proc = _serve(cfg)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_up(proc, url)
        statuses = _hammer([url], BUDGET_KEY, per_gateway=40)
    finally:
        proc.terminate()
        proc.wait(30)
    assert set(statuses) <= {200, 402}, statuses
    with sqlite3.connect(tmp_path / "workers.db") as db:
        served = [
            cost
            for status, cost in db.execute(
                "SELECT u.status, u.cost_usd FROM usage_log u JOIN api_keys k ON k.id = u.api_key_id "
                "WHERE k.name = 'budget'"
            )
            if status == 200
        ]
    estimate = (ChatRequest(body=BODY, model="local-o/model-o").prompt_estimate * 1.0 + 50 * 2.0) / 1e6
    assert len(served) == statuses.count(200) and statuses.count(402) > 0
    assert CAP_USD / 2 < sum(served) <= CAP_USD + estimate, (sum(served), CAP_USD, estimate)
