"""Per-chunk streaming cost, the cost of Redis-backed state, and scaling out over worker processes.

Three measurements for ``python -m bench run`` (and ``python -m bench scale`` alone), all on
``provider/model`` at one concurrency, CPU taken from ``/proc`` (utime+stime of the server's process
tree) so that other load on the machine moves them far less than it moves requests/s:

* **per-chunk CPU**: the CPU per request of a 200-chunk stream minus that of the 20-chunk stream,
  divided by the 180 extra chunks, for the bare proxy and for the gateway (both receive all chunks of a
  stream in one upstream write, so this is the cost of handling a chunk, not of waiting for one);
* **state**: the gateway with its routing state in process and with it on Redis (``redis_url``), one
  worker each, pinned to the same CPU — CPU µs per request side by side;
* **workers**: the gateway on Redis with ``--workers 2`` against one worker, requests/s; the two
  workers get both CPUs, which they share with the fake upstream and wrk (there is no third CPU), so
  the ratio is a lower bound of what two free cores give.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import targets as T
from bench.load import Load, chat_body
from bench.procs import SERVER_CPU, Server
from bench.upstream import CHUNKS, LONG_CHUNKS

MIN_PER_CHUNK_US = 0.1
"""Below this the bare proxy's per-chunk CPU is taken as zero (no ratio is formed)."""
REDIS_URL = os.environ.get("OMNIROUTE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
"""Where the gateway's shared state goes for the Redis rows (a database of its own)."""


def redis_available(url: str = REDIS_URL) -> str | None:
    """``None`` when Redis answers a PING at ``url``, else why not."""
    try:
        import redis
    except ImportError:
        return "the redis client is not installed"
    try:
        client = redis.Redis.from_url(url, socket_timeout=2)
        client.ping()
        client.close()
    except Exception as exc:  # any failure means: no Redis rows
        return f"Redis at {url} unavailable ({exc.__class__.__name__})"
    return None


def _cpu_cell(load: Load, srv: Server, model: str, headers: dict[str, str], stream: bool, conc: int,
              duration_s: float) -> dict[str, Any]:
    url = srv.url + "/v1/chat/completions"
    body = [chat_body(model, stream)]
    c0 = srv.cpu_seconds()
    res = load.run(url, body, headers, concurrency=conc, duration_s=duration_s)
    n = max(res.requests, 1)
    return {"rps": res.rps, "cpu_us_per_req": (srv.cpu_seconds() - c0) / n * 1e6, "errors": res.errors,
            "p50_ms": res.p50_ms, "p99_ms": res.p99_ms}


def _warm(load: Load, srv: Server, model: str, headers: dict[str, str]) -> None:
    for stream in (False, True):
        load.run(srv.url + "/v1/chat/completions", [chat_body(model, stream)], headers, concurrency=16,
                 duration_s=1.0)


def chunk_cost(load: Load, upstream: str, tmp: Path, cpu: int | None, *, conc: int, duration_s: float,
               reps: int, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Per-chunk CPU (µs) of the bare proxy and the gateway: (long − short) / extra chunks."""
    extra = LONG_CHUNKS - CHUNKS
    out: dict[str, Any] = {"extra_chunks": extra, "concurrency": conc}
    for label, make, short, long_, headers in (
        ("bare", lambda: T.bare_server(upstream, tmp, cpu), "m", "long", {}),
        ("gw-model", lambda: T.gateway_server(upstream, tmp, tmp, cpu), "bench-p00/m", "bench-p00/long",
         T.GW_MODEL.headers),
    ):
        per_chunk, shorts, longs = [], [], []
        with make() as srv:
            _warm(load, srv, short, headers)
            for _ in range(reps):
                s = _cpu_cell(load, srv, short, headers, True, conc, duration_s)
                lg = _cpu_cell(load, srv, long_, headers, True, conc, duration_s)
                shorts.append(s["cpu_us_per_req"])
                longs.append(lg["cpu_us_per_req"])
                per_chunk.append((lg["cpu_us_per_req"] - s["cpu_us_per_req"]) / extra)
        out[label] = {"stream_cpu_us": statistics.median(shorts),
                      "long_stream_cpu_us": statistics.median(longs),
                      "per_chunk_cpu_us": statistics.median(per_chunk)}
        say(f"per-chunk CPU {label}: {out[label]['per_chunk_cpu_us']:.2f} µs "
            f"({CHUNKS} chunks {out[label]['stream_cpu_us']:.0f} µs/req, "
            f"{LONG_CHUNKS} chunks {out[label]['long_stream_cpu_us']:.0f} µs/req)")
    bare = out["bare"]["per_chunk_cpu_us"]
    # The bare proxy forwards a read's bytes whatever they hold: its per-chunk cost is within the noise
    # of zero, and a ratio to it means nothing then.
    out["ratio"] = out["gw-model"]["per_chunk_cpu_us"] / bare if bare >= MIN_PER_CHUNK_US else None
    return out


def state_and_workers(load: Load, upstream: str, tmp: Path, cpu: int | None, *, conc: int,
                      duration_s: float, reps: int, say: Callable[[str], None] = print
                      ) -> dict[str, Any]:
    """In-process vs Redis state (one worker, CPU µs/req), and Redis with 1 vs 2 workers (req/s)."""
    why = redis_available()
    if why is not None:
        say(f"state/workers rows skipped: {why}")
        return {"skipped": why}
    configs: list[tuple[str, dict[str, Any], int | None]] = [
        ("memory-w1", {}, cpu),
        ("redis-w1", {"redis_url": REDIS_URL}, cpu),
        ("redis-w2", {"redis_url": REDIS_URL, "workers": 2}, None),
    ]
    m = T.GW_MODEL
    cells: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for rep in range(reps):
        for name, extra, pin in (configs if rep % 2 == 0 else list(reversed(configs))):
            with T.gateway_server(upstream, tmp, tmp, pin, extra=extra) as srv:
                _warm(load, srv, m.model, m.headers)
                for stream in (False, True):
                    c = _cpu_cell(load, srv, m.model, m.headers, stream, conc, duration_s)
                    cells.setdefault(name, {}).setdefault("stream" if stream else "json", []).append(c)
                    say(f"{name} {'stream' if stream else 'json  '} c{conc}: {c['rps']:.0f} req/s, "
                        f"{c['cpu_us_per_req']:.0f} µs CPU/req")
    out: dict[str, Any] = {"concurrency": conc, "redis_url": REDIS_URL}
    for name, modes in cells.items():
        out[name] = {mode: {k: statistics.median(c[k] for c in cs) for k in ("rps", "cpu_us_per_req")}
                     for mode, cs in modes.items()}
    for mode in ("json", "stream"):
        out[f"redis_cost_us_{mode}"] = (out["redis-w1"][mode]["cpu_us_per_req"]
                                        - out["memory-w1"][mode]["cpu_us_per_req"])
        out[f"workers_ratio_{mode}"] = out["redis-w2"][mode]["rps"] / max(out["redis-w1"][mode]["rps"], 1e-9)
    return out


def main(duration_s: float = 3.0, conc: int = 64, reps: int = 2) -> int:
    """``python -m bench scale``: the three measurements above, printed (no JSON, no docs)."""
    import tempfile

    from bench.load import ensure_wrk
    from bench.procs import LOAD_CPU, can_pin, pin_self

    wrk = ensure_wrk(install=True)
    if wrk is None:
        raise SystemExit("wrk is required")
    pinned = can_pin()
    if pinned:
        pin_self(LOAD_CPU)
    tmp = Path(tempfile.mkdtemp(prefix="omniroute-scale-"))
    load = Load(wrk, tmp)
    cpu = SERVER_CPU if pinned else None
    with T.upstream_server(tmp, LOAD_CPU if pinned else None) as up:
        cc = chunk_cost(load, up.url, tmp, cpu, conc=16, duration_s=duration_s, reps=reps)
        sw = state_and_workers(load, up.url, tmp, cpu, conc=conc, duration_s=duration_s, reps=reps)
    print("per-chunk CPU gateway/bare: " + (f"{cc['ratio']:.2f}" if cc["ratio"] else "n/a (bare ≈ 0)"))
    if "skipped" not in sw:
        for mode in ("json", "stream"):
            print(f"{mode}: Redis state costs {sw[f'redis_cost_us_{mode}']:+.0f} µs CPU/req; "
                  f"2 workers / 1 worker = {sw[f'workers_ratio_{mode}']:.2f}")
    return 0
