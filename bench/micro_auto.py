"""Auto-combo micro-benchmarks (PERF-3): median µs per call for pools of 5, 50 and 500 candidates.

* ``score`` — :func:`~omniroute.routing.auto.scoring.score_pool` + the ``rules`` router over measured
  inputs (the 16-factor scoring itself; PERF-3 target: 50 candidates ≤ 100 µs median, linear);
* ``plan_auto`` — the whole auto planning step for one request on a never-started in-process gateway
  (memory routing state, no store, no HTTP): pool factory, controls, LKGP/self-healing reads,
  measuring from routing state, scoring, routing and the decision record.

Run alone: ``python -m bench.micro_auto [--quick]``; ``bench/micro.py`` folds :func:`run` in.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from omniroute.config import AutoConfig, Config
from omniroute.gateway import Gateway
from omniroute.providers.catalog import Catalog
from omniroute.routing.auto import plan_auto
from omniroute.routing.auto.inputs import MeasureHints, measure
from omniroute.routing.auto.routers import RouterContext, select_with_strategy
from omniroute.routing.auto.scoring import DEFAULT_WEIGHT_VECTOR, score_pool
from omniroute.routing.decision import Decision
from omniroute.routing.registry import Registry
from omniroute.routing.resolve import resolve
from omniroute.values import ChatRequest, Connection, ModelInfo, ProviderInfo

Row = dict[str, Any]
SIZES = (5, 50, 500)
GROUP = "auto (micro_auto)"


def _gateway(n: int) -> Gateway:
    """A gateway whose ``auto`` pool has ``n`` candidates: 5 providers × n/5 connections."""
    gw = Gateway(Config(auto=AutoConfig(exploration_rate=0.05)))
    providers = [
        ProviderInfo(
            id=f"p{i}",
            base_url="http://127.0.0.1:9/v1",
            models=(
                ModelInfo(
                    id=f"model-{i}", input_price=0.5 + i, output_price=1.0 + 2 * i, context_window=128_000
                ),
            ),
        )
        for i in range(5)
    ]
    conns = [
        Connection(id=f"p{i}-c{j}", provider=f"p{i}", api_key="sk", priority=j)
        for i in range(5)
        for j in range(max(1, n // 5))
    ]
    gw.catalog = Catalog(providers)
    gw.registry = Registry.build(gw.catalog, conns)
    return gw


def _row(name: str, per_call_s: list[float], note: str = "") -> Row:
    us = [x * 1e6 for x in per_call_s]
    return {
        "group": GROUP,
        "name": name,
        "median_us": statistics.median(us),
        "min_us": min(us),
        "max_us": max(us),
        "repeats": len(us),
        "note": note,
    }


def _time(fn: Callable[[], object], number: int, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return out


async def _time_async(fn: Callable[[int], Any], number: int, repeat: int) -> list[float]:
    out = []
    k = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            await fn(k)
            k += 1
        out.append((time.perf_counter() - t0) / number)
    return out


async def _bench(n: int, number: int, repeat: int) -> list[Row]:
    gw = _gateway(n)
    pool, _ = await plan_auto(gw, resolve(gw.registry, "auto"), _req("warm"), Decision("warm", "auto"))
    inputs = await measure(gw, pool, MeasureHints(), time.time())
    ctx = RouterContext()

    def score() -> None:
        score_pool(inputs, DEFAULT_WEIGHT_VECTOR)
        select_with_strategy(inputs, ctx, "rules")

    plan = resolve(gw.registry, "auto")

    async def one(k: int) -> None:
        rid = f"r{k}"
        await plan_auto(gw, plan, _req(rid), Decision(rid, "auto"))

    rows = [_row(f"score_pool + rules, pool {n}", _time(score, number, repeat), "PERF-3: 50 ≤ 100 µs")]
    scale = max(1, n // 50)
    rows.append(
        _row(f"plan_auto (whole step), pool {n}", await _time_async(one, max(5, number // scale), repeat))
    )
    return rows


def _req(rid: str) -> ChatRequest:
    body = {"model": "auto", "messages": [{"role": "user", "content": "write a python function"}]}
    return ChatRequest(body=body, model="auto", request_id=rid)


def run(*, quick: bool = False) -> list[Row]:
    """Rows ``{group, name, median_us, min_us, max_us, repeats, note}`` for pools of 5, 50 and 500."""
    number, repeat = (20, 3) if quick else (400, 9)

    async def main() -> list[Row]:
        rows: list[Row] = []
        for n in SIZES:
            rows.extend(await _bench(n, max(2, number * 50 // max(n, 50)), repeat))
        return rows

    return asyncio.run(main())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    args = ap.parse_args()
    for r in run(quick=args.quick):
        print(
            f"{r['name']:<40} median {r['median_us']:9.1f} µs  (min {r['min_us']:.1f}, max {r['max_us']:.1f})"
        )
