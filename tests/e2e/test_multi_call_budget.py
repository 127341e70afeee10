"""Fusion and pipeline requests reserve their budget up front like single calls (API-8): the sum of one
estimate per member call, so a key whose budget cannot cover every call is refused with 402 before any
member runs, and the reservation is settled with the real cost afterwards.

Prices are the test models' (USD per 1M tokens): model-o 1.00 in / 2.00 out, model-c 0.50 in / 1.00
out. The prompt ``hi`` is estimated at 4 tokens; every call may answer ``max_tokens`` = 1000 tokens.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

P, OUT = 4, 1000
# fusion: panel o (P in, OUT out) + panel c (P, OUT) + judge o reading P and both answers
FUSION_USD = ((P * 1.0 + OUT * 2.0) + (P * 0.5 + OUT * 1.0) + ((P + 2 * OUT) * 1.0 + OUT * 2.0)) / 1e6
# pipeline: step 1 o reads P, step 2 c reads step 1's answer (OUT)
PIPELINE_USD = ((P * 1.0 + OUT * 2.0) + (OUT * 0.5 + OUT * 1.0)) / 1e6
SINGLE_O_USD = (P * 1.0 + OUT * 2.0) / 1e6
# agentic pipeline (planner o, executor c): the planner's decision on P, then the dearer of the
# planner's answer and the executor, each reading P plus the decision (OUT)
AGENTIC_USD = ((P * 1.0 + OUT * 2.0) + max((P + OUT) * 1.0 + OUT * 2.0, (P + OUT) * 0.5 + OUT * 1.0)) / 1e6

KEYS = {"tight": 0.005, "pipe": 0.003, "roomy": 0.0075, "agent": 0.004}


def key(name: str) -> str:
    return f"sk-multi-{name}-0123456789abcdefghij"


@pytest.fixture
def gt(make_gateway: Callable[..., GatewayThread]) -> GatewayThread:
    combos: list[dict[str, Any]] = [
        {
            "name": "panel",
            "strategy": "fusion",
            "targets": [{"model": "local-o/model-o"}, {"model": "local-c/model-c"}],
            "config": {"judgeModel": "local-o/model-o"},
        },
        {
            "name": "chain",
            "strategy": "pipeline",
            "targets": [{"model": "local-o/model-o"}, {"model": "local-c/model-c"}],
        },
        {
            "name": "agent",
            "strategy": "pipeline",
            "targets": [{"model": "local-o/model-o"}, {"model": "local-c/model-c"}],
            "config": {"agenticOrchestration": {"enabled": True}},
        },
    ]
    keys = [{"name": n, "key": key(n), "budget_usd": usd} for n, usd in KEYS.items()]
    return make_gateway({"combos": combos, "api_keys": keys})


def chat(gt: GatewayThread, name: str, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": OUT}
    return httpx.post(
        f"{gt.base_url}/chat/completions",
        json=body,
        headers={"authorization": f"Bearer {key(name)}"},
        timeout=20,
    )


def upstream_calls(fakes: dict[str, FakeProviderThread]) -> int:
    return sum(len(f.requests) for f in fakes.values())


def test_a_fusion_the_budget_cannot_cover_is_refused_before_any_member_runs(
    gt: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    assert SINGLE_O_USD < KEYS["tight"] < FUSION_USD  # one member's estimate alone would fit
    before = upstream_calls(fakes)
    r = chat(gt, "tight", "panel")
    assert r.status_code == 402, r.text
    assert f"needs up to ${FUSION_USD:.6f}".rstrip("0") in r.json()["error"]["message"]
    assert r.json()["budget"]["spent_usd"] == 0
    assert upstream_calls(fakes) == before
    assert chat(gt, "tight", "local-o/model-o").status_code == 200  # a single call still fits


def test_a_pipeline_reserves_the_sum_of_its_steps(
    gt: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    assert SINGLE_O_USD < KEYS["pipe"] < PIPELINE_USD
    before = upstream_calls(fakes)
    r = chat(gt, "pipe", "chain")
    assert r.status_code == 402, r.text
    assert f"needs up to ${PIPELINE_USD:.6f}".rstrip("0") in r.json()["error"]["message"]
    assert upstream_calls(fakes) == before


def test_an_agentic_pipeline_reserves_its_planner_and_executor_calls(
    gt: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    assert SINGLE_O_USD < KEYS["agent"] < AGENTIC_USD
    before = upstream_calls(fakes)
    r = chat(gt, "agent", "agent")
    assert r.status_code == 402, r.text
    assert f"needs up to ${AGENTIC_USD:.6f}".rstrip("0") in r.json()["error"]["message"]
    assert upstream_calls(fakes) == before


def test_a_fusion_is_settled_at_its_real_cost_so_the_next_one_fits(gt: GatewayThread) -> None:
    """The reservation is released after the call: two fusions in a row both fit a budget that holds
    one estimate and a little, because each is charged its real (small) cost once its usage row is
    written (reading ``/api/usage`` writes the pending rows)."""
    assert FUSION_USD < KEYS["roomy"] < 2 * FUSION_USD
    for _ in range(2):
        r = chat(gt, "roomy", "panel")
        assert r.status_code == 200, r.text
        rows = httpx.get(f"{gt.url}/api/usage", params={"key": "roomy"}, timeout=10).json()["data"]
    charged = [row for row in rows if row["member"] is None]
    assert len(charged) == 2 and all(0 < row["cost_usd"] < FUSION_USD for row in charged)


REDIS_URL = os.environ.get("OMNIROUTE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _redis_up() -> bool:
    parts = urllib.parse.urlsplit(REDIS_URL)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.mark.skipif(not _redis_up(), reason="needs Redis on loopback")
def test_a_failed_fusion_counts_its_members_cost_in_the_shared_redis_budget(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    """The panel answers (their rows charge the key: no main row carries their cost), the judge fails:
    the budget in Redis holds the panel's cost, so the next fusion no longer fits."""
    combos = [
        {
            "name": "panel",
            "strategy": "fusion",
            "targets": [{"model": "local-o/model-o"}, {"model": "local-c/model-c"}],
            "config": {"judgeModel": "local-g/model-g", "maxRetries": 0},
        }
    ]
    prefix = f"mc{uuid.uuid4().hex[:8]}"
    gt = make_gateway(
        {
            "redis_url": f"{REDIS_URL}?prefix={prefix}",
            "combos": combos,
            "api_keys": [{"name": "shared", "key": key("shared"), "budget_usd": 0.151}],
        }
    )
    fakes["o"].set_behaviour("model-o", "prompt-100000")  # $0.10 of input
    fakes["c"].set_behaviour("model-c", "prompt-100000")  # $0.05 of input
    fakes["g"].set_behaviour("model-g", "fail-500")
    try:
        r = chat(gt, "shared", "panel")
        assert r.status_code >= 500, r.text
        gt.call(lambda gw: gw.budgets.drain())  # the settlement runs in the background
        again = chat(gt, "shared", "panel")
        assert again.status_code == 402, again.text
        spent = again.json()["budget"]["spent_usd"]
        assert 0.15 < spent < 0.1501  # both panel answers: 100k prompt tokens each plus a few output
    finally:
        for n, m in (("o", "model-o"), ("c", "model-c"), ("g", "model-g")):
            fakes[n].set_behaviour(m, "")
