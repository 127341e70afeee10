"""Micro-benchmarks, run apart from the test suite: ``python -m bench micro``.

Timed with a small ``timeit``-style harness (median of repeats, per call, microseconds) so they run
anywhere the project's venv runs, pytest-benchmark or not:

* the routing decision — ``resolve`` → ``Planner.candidates`` → ``Resilience.filter`` on a started
  in-process :class:`~omniroute.gateway.Gateway` (SQLite in a temp dir, no HTTP): ``provider/model``,
  a 3-target combo per combo strategy, and ``auto`` over pools of 5, 50 and 500 connections
  (PERF-3: 50 ≤ 100 µs median, linear in pool size);
* the ladder filters alone (``Resilience.filter``) on 1, 10 and 50 candidates;
* translation of a 20-chunk stream: upstream SSE ``data`` → canonical chunk (``OpenAIStreamParser``)
  → client SSE (``OpenAIStreamEncoder``; and ``AnthropicStreamEncoder`` from ``wire/anthropic``).

``bench/micro_auto.py`` (the auto engineer's), when present, is folded in: its ``run(quick=...)``
returns rows shaped like :func:`row`.
"""

from __future__ import annotations

import asyncio
import importlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson

from bench.upstream import CHUNKS, USAGE, chunk_obj

Row = dict[str, Any]
UPSTREAM = "http://127.0.0.1:9"  # never contacted: micro-benchmarks stop before any I/O
STRATEGIES = (
    "priority", "weighted", "round-robin", "fill-first", "p2c", "random", "least-used",
    "cost-optimized", "reset-aware", "reset-window", "headroom", "strict-random", "lkgp",
    "context-optimized", "cache-optimized", "context-relay",
)


def row(name: str, per_call_s: list[float], *, group: str, note: str = "") -> Row:
    """A result row: median / min / max per call in µs over the repeats."""
    us = [x * 1e6 for x in per_call_s]
    return {"group": group, "name": name, "median_us": statistics.median(us), "min_us": min(us),
            "max_us": max(us), "repeats": len(us), "note": note}


def na(name: str, group: str, why: str) -> Row:
    return {"group": group, "name": name, "median_us": None, "note": f"n/a ({why})"}


def time_sync(fn: Callable[[], object], *, number: int, repeat: int) -> list[float]:
    """Seconds per call for each of ``repeat`` batches of ``number`` calls."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return out


async def time_async(fn: Callable[[], Awaitable[object]], *, number: int, repeat: int) -> list[float]:
    """Like :func:`time_sync` for a coroutine function (awaited in the running loop)."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            await fn()
        out.append((time.perf_counter() - t0) / number)
    return out


def _config(pool: int, tmp: Path) -> Any:
    from bench.targets import gateway_config
    from omniroute.config import config_from_dict

    data = gateway_config(UPSTREAM, 1, tmp)
    data["api_keys"] = []
    data["database_url"] = f"sqlite:///{tmp}/micro-{pool}-{uuid.uuid4().hex[:6]}.db"
    data["providers"] = _providers(pool)
    data["connections"] = [
        {"id": f"c{i:03d}", "provider": f"bench-p{i:03d}", "api_key": f"sk-{i}", "default_model": "m",
         "priority": i + 1}
        for i in range(pool)
    ]
    data["combos"] = [
        {"name": f"combo-{s}", "strategy": s, "description": "micro",
         "targets": [{"model": f"bench-p{i:03d}/m", "weight": 1} for i in range(3)]}
        for s in STRATEGIES
    ]
    return config_from_dict(data, env={})


def _providers(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"bench-p{i:03d}", "format": "openai", "base_url": f"{UPSTREAM}/v1",
         "models": [{"id": "m", "input_price": 1 + i / 100, "output_price": 2.0, "context_window": 128000,
                     "max_output_tokens": 8192}]}
        for i in range(n)
    ]


def _request(model: str) -> Any:
    from omniroute.values import ChatRequest

    body = {"model": model, "messages": [{"role": "user", "content": "Write a haiku about routers."}]}
    return ChatRequest(body=body, model=model, request_id="req_micro", headers={})


async def _decision_rows(pool: int, tmp: Path, number: int, repeat: int, *, strategies: bool) -> list[Row]:
    """Routing-decision timings on a gateway with ``pool`` connections."""
    from omniroute.gateway import Gateway
    from omniroute.resilience.ladder import LadderContext
    from omniroute.routing.decision import Decision
    from omniroute.routing.resolve import resolve

    gw = Gateway(_config(pool, tmp))
    await gw.start()
    rows: list[Row] = []
    try:
        async def decide(model: str) -> int:
            req = _request(model)
            decision = Decision(request_id=req.request_id, requested_model=model)
            plan = resolve(gw.registry, model)
            cands, _ = await gw.planner.candidates(plan, req, decision)
            res = await gw.resilience.filter(cands, LadderContext.for_request(req.body, time.time()))
            return len(res.survivors)

        async def case(name: str, model: str, group: str) -> None:
            try:
                n = await decide(model)
            except Exception as exc:  # not implemented at this commit, or broken: say so, go on
                rows.append(na(name, group, f"{exc.__class__.__name__}: {str(exc)[:80]}"))
                return
            if n == 0:
                rows.append(na(name, group, "no candidate survives at this commit"))
                return
            t = await time_async(lambda: decide(model), number=number, repeat=repeat)
            rows.append(row(name, t, group=group, note=f"{n} candidate(s) after the ladder"))

        await case(f"auto, pool {pool}", "auto", "routing decision")
        if strategies:
            await case("provider/model", "bench-p000/m", "routing decision")
            for s in STRATEGIES:
                await case(f"combo strategy {s} (3 targets)", f"combo-{s}", "combo strategy")
            for k in (1, 10, 50):
                cands = await _ladder_candidates(gw, k)
                ctx = LadderContext.for_request(_request("x").body, time.time())
                t = await time_async(lambda c=cands, x=ctx: gw.resilience.filter(c, x), number=number,
                                     repeat=repeat)
                rows.append(row(f"Resilience.filter, {k} candidate(s)", t, group="ladder filters"))
    finally:
        await gw.stop()
    return rows


async def _ladder_candidates(gw: Any, k: int) -> list[Any]:
    from omniroute.routing.decision import Decision
    from omniroute.routing.resolve import PlanTarget

    reg = gw.registry
    targets = []
    for i in range(k):
        p = reg.catalog.provider(f"bench-p{i:03d}")
        targets.append(PlanTarget(p, reg.model_info(p, "m")))
    return list(gw.planner.expand(targets, Decision("r", "x")))


def _stream_rows(number: int, repeat: int) -> list[Row]:
    """Translation of one 20-chunk stream (upstream bytes → client bytes), per stream."""
    from omniroute.values import Usage
    from omniroute.wire.anthropic.outbound import AnthropicStreamEncoder
    from omniroute.wire.openai.outbound import OpenAIStreamEncoder
    from omniroute.wire.openai.upstream import OpenAIStreamParser

    events = [orjson.dumps(chunk_obj(i)) for i in range(CHUNKS)]
    usage = Usage.from_openai(USAGE)
    rows: list[Row] = []

    def openai_stream() -> int:
        parser, enc = OpenAIStreamParser("p"), OpenAIStreamEncoder(False)
        n = len(enc.start())
        for data in events:
            for ch in parser.feed("", data):
                n += len(enc.chunk(ch))
        return n + len(enc.end(usage))

    rows.append(row("OpenAI → OpenAI (parse + OpenAIStreamEncoder), 20 chunks",
                    time_sync(openai_stream, number=number, repeat=repeat), group="stream translation"))

    def anthropic_stream() -> int:
        parser, enc = OpenAIStreamParser("p"), AnthropicStreamEncoder("m")
        n = len(enc.start())
        for data in events:
            for ch in parser.feed("", data):
                n += len(enc.chunk(ch))
        return n + len(enc.end(usage))

    rows.append(row("OpenAI → Anthropic (parse + AnthropicStreamEncoder), 20 chunks",
                    time_sync(anthropic_stream, number=number, repeat=repeat), group="stream translation"))
    return rows


def _folded_auto(quick: bool) -> list[Row]:
    """Rows from ``bench/micro_auto.py`` (auto scoring micro-benchmarks) when it exists."""
    try:
        mod = importlib.import_module("bench.micro_auto")
    except ModuleNotFoundError as exc:
        if exc.name != "bench.micro_auto":
            return [na("bench/micro_auto.py", "auto (micro_auto)", f"import failed: {exc}")]
        return []
    fn = getattr(mod, "run", None)
    if fn is None:
        return [na("bench/micro_auto.py", "auto (micro_auto)", "defines no run(quick=...)")]
    try:
        out = fn(quick=quick)
    except Exception as exc:
        return [na("bench/micro_auto.py", "auto (micro_auto)", f"{exc.__class__.__name__}: {exc}")]
    return [dict(r, group=r.get("group", "auto (micro_auto)")) for r in out]


def run(*, quick: bool = False) -> list[Row]:
    """Every micro-benchmark; ``quick`` cuts the iterations (smoke runs)."""
    number, repeat = (20, 3) if quick else (400, 9)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="omniroute-micro-") as d:
        tmp = Path(d)

        async def decisions() -> None:
            for pool in (5, 50) if quick else (5, 50, 500):
                n = number if pool < 500 else max(5, number // 10)
                rows.extend(await _decision_rows(pool, tmp, n, repeat, strategies=pool == 50))

        asyncio.run(decisions())
    rows.extend(_stream_rows(number, repeat))
    rows.extend(_folded_auto(quick))
    order = ["routing decision", "combo strategy", "ladder filters", "stream translation"]
    return sorted(rows, key=lambda r: order.index(r["group"]) if r["group"] in order else len(order))


def perf3(rows: list[Row]) -> Row | None:
    """The PERF-3 row (auto, pool 50)."""
    return next((r for r in rows if r["name"] == "auto, pool 50"), None)


def print_rows(rows: list[Row]) -> None:
    group = None
    for r in rows:
        if r["group"] != group:
            group = r["group"]
            print(f"\n{group}")
        med = r.get("median_us")
        val = f"{med:10.1f} µs" if med is not None else "       n/a"
        print(f"  {r['name']:<66} {val}  {r.get('note', '')}")
