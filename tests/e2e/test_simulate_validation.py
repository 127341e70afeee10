"""The simulator against reality: one small workload through a real gateway (real sockets) in front of
fault-injecting fake providers, and through ``omniroute simulate`` with a fleet configured like them.

The fleet: a weighted combo over three providers — ``local-o`` answers every attempt with 503, and
``local-c``/``local-g`` are healthy with weights 3 : 1. Both runs must agree on the success rate
(within 2 points), the fallback count (within 2 requests: the first pick of ``local-o`` falls back,
then its cooldown keeps it out in both), and the traffic shares of ``local-c``/``local-g`` (within 12
points: the weighted picks are random in both, 120 requests give a standard deviation of about 4
points per share).
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import base_config
from omniroute.clock import FakeClock
from omniroute.simulate.fleet import load_fleet
from omniroute.simulate.report import summarize
from omniroute.simulate.run import run_variant
from omniroute.simulate.workload import TraceRecord
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

REQUESTS = 120
SHARE_TOLERANCE = 0.12
SUCCESS_TOLERANCE = 0.02
FALLBACK_TOLERANCE = 2


def _config(fakes: dict[str, FakeProviderThread], tmp: Path) -> dict[str, Any]:
    data = base_config(fakes, tmp)
    data["combos"] = [
        {
            "name": "mix",
            "strategy": "weighted",
            "targets": [
                {"model": "local-o/model-o", "weight": 2},
                {"model": "local-c/model-c", "weight": 3},
                {"model": "local-g/model-g", "weight": 1},
            ],
        }
    ]
    # nothing recovers during the run in either world: the real gateway's clock stands still
    data["resilience"]["circuit_breaker"] = {"reset_timeout_s": 3600, "max_reset_timeout_s": 3600}
    data["resilience"]["cooldown"] = {"base_s": 3600, "max_s": 3600, "server_error_max_s": 3600}
    return data


def _fleet(config: dict[str, Any]) -> dict[str, Any]:
    fast = {"ttft_ms": {"median": 5}, "tokens_per_s": {"median": 10000}}
    return {
        "config": copy.deepcopy(config),
        "targets": [
            {"provider": "local-o", **fast, "outages": [{"start_s": 0, "duration_s": 1e6}]},  # 503 throughout
            {"provider": "local-c", **fast},
            {"provider": "local-g", **fast},
        ],
    }


def test_simulator_agrees_with_the_real_gateway_in_front_of_fake_providers(
    fakes: dict[str, FakeProviderThread],
    make_gateway: Callable[..., GatewayThread],
    tmp_path: Path,
) -> None:
    config = _config(fakes, tmp_path)
    fakes["o"].set_behaviour("model-o", "fail-503")
    gw = make_gateway(replace=config, clock=FakeClock())
    real_status: Counter[int] = Counter()
    real_share: Counter[str] = Counter()
    real_fallbacks = 0
    with httpx.Client(timeout=30) as client:
        for i in range(REQUESTS):
            r = client.post(
                f"{gw.base_url}/chat/completions",
                json={"model": "mix", "messages": [{"role": "user", "content": f"hi {i}"}], "max_tokens": 8},
            )
            real_status[r.status_code] += 1
            if r.status_code == 200:
                real_share[r.headers["x-omniroute-provider"]] += 1
                real_fallbacks += int(r.headers["x-omniroute-attempts"]) > 1
    assert fakes["o"].calls() >= 1  # the failing provider was really tried

    fleet = load_fleet(_fleet(config))
    trace = [TraceRecord(i * 0.05, "mix", 20, 8) for i in range(REQUESTS)]
    sim = asyncio.run(run_variant(fleet, trace, None, seed=11))
    fig = summarize(sim)

    real_ok = real_status[200]
    assert fig["success_rate"] == pytest.approx(real_ok / REQUESTS, abs=SUCCESS_TOLERANCE)
    assert abs(fig["fallbacks"] - real_fallbacks) <= FALLBACK_TOLERANCE
    for provider in ("local-c", "local-g"):
        assert fig["traffic_share"].get(provider, 0.0) == pytest.approx(
            real_share[provider] / real_ok, abs=SHARE_TOLERANCE
        ), (provider, fig["traffic_share"], real_share)
    assert "local-o" not in fig["traffic_share"] and real_share["local-o"] == 0
    assert fig["traffic_share"]["local-c"] > 0.6  # the 3 : 1 weights show in the simulation too
