"""The sustained run (PERF-5): 200,000 requests through a fresh gateway while its RSS is
sampled every second; the benchmark fails (exit code 1) when RSS grows more than 10 %.

The mix rotates over ``provider/model``, the combo (and ``auto`` when it answers), streaming and not, at
concurrency 64. Growth is measured from the end of a warm-up (default 20,000 requests — past the
gateway's bounded in-memory caches such as the last 10,000 decisions) to the end of the run; the RSS
of the cold gateway at rest is reported beside it.

Standalone: ``python -m bench soak [--requests N]`` (starts its own upstream).
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import targets as T
from bench.load import Load, chat_body, lua_script, run_python_load, run_wrk
from bench.procs import Server

LIMIT_PCT = 10.0
CONCURRENCY = 64


def _sampler(srv: Server, samples: list[tuple[float, float]], stop: threading.Event) -> None:
    t0 = time.monotonic()
    while not stop.wait(1.0):
        samples.append((round(time.monotonic() - t0, 1), srv.rss_bytes() / 1e6))


def _drive(load: Load, srv: Server, bodies: list[bytes], n: int, tmp: Path) -> dict[str, Any]:
    """Send at least ``n`` requests: wrk in segments of up to 15 s sized from the rate so far (wrk
    cannot stop at a count), or the Python load generator."""
    url = srv.url + "/v1/chat/completions"
    headers = T.GW_MODEL.headers
    if not load.wrk:
        return run_python_load(url, bodies, headers, concurrency=CONCURRENCY, duration_s=3600,
                               max_requests=n).to_dict()
    script = lua_script(bodies, headers)
    done = errors = 0
    elapsed = 0.0
    p50: list[float] = []
    p99: list[float] = []
    rate = 500.0
    while done < n:
        seg = min(15.0, max(1.0, (n - done) / rate))
        res = run_wrk(load.wrk, url, script, concurrency=CONCURRENCY, duration_s=seg, script_dir=tmp)
        done, errors, elapsed = done + res.requests, errors + res.errors, elapsed + res.duration_s
        p50.append(res.p50_ms)
        p99.append(res.p99_ms)
        rate = max(res.rps, 1.0)
        if res.requests == 0:
            raise RuntimeError("soak: the gateway answered no request in a whole segment")
    return {"requests": done, "errors": errors, "duration_s": elapsed, "rps": done / elapsed,
            "p50_ms_max_segment": max(p50), "p99_ms_max_segment": max(p99), "generator": "wrk"}


def soak(
    upstream: Server,
    load: Load,
    tmp: Path,
    cpu: int | None,
    *,
    requests: int,
    warmup: int,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the soak against a fresh gateway; returns the RSS series and the verdict."""
    srv = T.gateway_server(upstream.url, tmp, tmp, cpu)
    srv.start()
    try:
        from bench.run import check_route

        models = [r.model for r in T.GATEWAY_ROUTES if check_route(srv.url, r) is None]
        bodies = [chat_body(m, s) for m in models for s in (False, True)]
        time.sleep(2)
        cold = srv.rss_bytes() / 1e6
        log(f"soak: gateway at rest {cold:.1f} MB; warm-up {warmup:,} requests over {', '.join(models)}")
        warm = _drive(load, srv, bodies, warmup, tmp) if warmup else None
        time.sleep(1)
        base = srv.rss_bytes() / 1e6
        samples: list[tuple[float, float]] = []
        stop = threading.Event()
        th = threading.Thread(target=_sampler, args=(srv, samples, stop), daemon=True)
        th.start()
        log(f"soak: {requests:,} requests at concurrency {CONCURRENCY}, RSS sampled every second "
            f"(baseline {base:.1f} MB)")
        t0 = time.monotonic()
        res = _drive(load, srv, bodies, requests, tmp)
        stop.set()
        th.join()
        time.sleep(2)
        end = srv.rss_bytes() / 1e6
        peak = max([end, *(s[1] for s in samples)])
        growth = (end - base) / base * 100 if base else 0.0
        out = {
            "requests": requests, "warmup": warmup, "concurrency": CONCURRENCY, "models": models,
            "rss_cold_rest_mb": cold, "rss_baseline_mb": base, "rss_end_rest_mb": end, "rss_peak_mb": peak,
            "growth_pct": growth, "growth_vs_cold_pct": (end - cold) / cold * 100 if cold else 0.0,
            "limit_pct": LIMIT_PCT, "failed": growth > LIMIT_PCT, "elapsed_s": time.monotonic() - t0,
            "load": res, "warmup_load": warm, "samples": samples,
        }
        log(f"soak: {res['requests']:,} ok, {res['errors']} errors, {res['rps']:.0f} req/s; RSS "
            f"{base:.1f} → {end:.1f} MB ({growth:+.1f} %), peak {peak:.1f} MB → "
            f"{'FAIL' if out['failed'] else 'ok'}")
        return out
    finally:
        srv.stop()


def main(requests: int, warmup: int, *, install_wrk: bool = True) -> int:
    """``python -m bench soak``: own upstream, own gateway; exit code 1 when RSS grows > 10 %."""
    import orjson

    from bench.load import ensure_wrk
    from bench.procs import LOAD_CPU, SERVER_CPU, can_pin, pin_self
    from bench.run import RESULTS_DIR

    pinned = can_pin()
    if pinned:
        pin_self(LOAD_CPU)
    tmp = Path(tempfile.mkdtemp(prefix="omniroute-soak-"))
    load = Load(ensure_wrk(install=install_wrk), tmp)
    up = T.upstream_server(tmp, LOAD_CPU if pinned else None).start()
    try:
        out = soak(up, load, tmp, SERVER_CPU if pinned else None, requests=requests, warmup=warmup)
    finally:
        up.stop()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"soak-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    path.write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))
    print(f"results: {path}")
    return 1 if out["failed"] else 0
