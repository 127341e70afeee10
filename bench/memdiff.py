"""``python -m bench memdiff``: where the gateway's memory grows over many requests (PERF-5).

Starts the benchmark gateway with a thread that starts ``tracemalloc`` and dumps a snapshot on request,
drives the soak's mix (``provider/model``, the combo and ``auto``, streaming and not) with wrk,
snapshots after a warm-up and again after ``requests`` more, and prints the allocation sites whose live
size grew most, with RSS before and after. Slower than a plain soak (tracemalloc costs CPU); the sizes
are what matters.
"""

from __future__ import annotations

import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import yaml

from bench import targets as T
from bench.load import Load, chat_body, ensure_wrk
from bench.procs import LOAD_CPU, SERVER_CPU, Server, can_pin, free_port, pin_self

_BOOT = """
import os, sys, threading, time, tracemalloc
def _watch(base):
    # a file ``<base>.want<N>`` asks for snapshot N; the first one starts tracing (after start-up and
    # the warm-up, which ran at full speed): what is alive at the second and was allocated since is
    # the growth. A thread, not a signal: the event loop may not run Python signal handlers promptly.
    n = 0
    while True:
        time.sleep(0.2)
        if os.path.exists(f"{base}.want{n + 1}"):
            n += 1
            if not tracemalloc.is_tracing():
                tracemalloc.start(6)
            tracemalloc.take_snapshot().dump(f"{base}.tmp")
            os.replace(f"{base}.tmp", f"{base}.{n}")
threading.Thread(target=_watch, args=(sys.argv[1],), daemon=True).start()
sys.argv = ["omniroute", "serve", "--config", sys.argv[2]]
from omniroute.cli.main import main
main()
"""


def _drive(load: Load, url: str, n: int, rps_guess: float = 600.0) -> int:
    done = 0
    routes = [(r, s) for r in T.GATEWAY_ROUTES for s in (False, True)]
    while done < n:
        for r, stream in routes:
            res = load.run(url, [chat_body(r.model, stream)], r.headers, concurrency=64,
                           duration_s=max(1.0, n / len(routes) / rps_guess))
            done += res.requests
    return done


def _snapshot(base: Path, i: int) -> tracemalloc.Snapshot:
    Path(f"{base}.want{i}").touch()
    path = Path(f"{base}.{i}")
    for _ in range(1200):
        if path.exists():
            return tracemalloc.Snapshot.load(str(path))
        time.sleep(0.5)
    raise RuntimeError("no snapshot")


def main(requests: int = 40_000, warmup: int = 10_000, top: int = 12, rest_s: float = 30.0) -> int:
    wrk = ensure_wrk(install=True)
    if wrk is None:
        raise SystemExit("wrk is required")
    pinned = can_pin()
    if pinned:
        pin_self(LOAD_CPU)
    tmp = Path(tempfile.mkdtemp(prefix="omniroute-memdiff-"))
    load = Load(wrk, tmp)
    with T.upstream_server(tmp, LOAD_CPU if pinned else None) as up:
        port = free_port()
        cfg = tmp / "gateway.yaml"
        cfg.write_text(yaml.safe_dump(T.gateway_config(up.url, port, tmp), sort_keys=False))
        snap = tmp / "snap"
        cmd = [sys.executable, "-c", _BOOT, str(snap), str(cfg)]
        with Server("gateway", cmd, port=port, cpu=SERVER_CPU if pinned else None, log_dir=tmp,
                    env={"OMNIROUTE_LOG_LEVEL": "WARNING"}, ready_timeout_s=180) as gw:
            url = gw.url + "/v1/chat/completions"
            _drive(load, url, warmup)
            time.sleep(2)
            rss0 = gw.rss_bytes()
            s1 = _snapshot(snap, 1)
            n = _drive(load, url, requests)
            time.sleep(2)
            rss1 = gw.rss_bytes()
            s2 = _snapshot(snap, 2)
            time.sleep(rest_s)  # the writers drain their queues: what is left then is held for good
            rss2 = gw.rss_bytes()
            s3 = _snapshot(snap, 3)
    print(f"{n} requests after a {warmup}-request warm-up: RSS {rss0 / 1e6:.1f} → {rss1 / 1e6:.1f} MB; "
          f"traced {sum(s.size for s in s1.statistics('filename')) / 1e6:.1f} → "
          f"{sum(s.size for s in s2.statistics('filename')) / 1e6:.1f} MB")
    for title, later in (("right after the load", s2), (f"after {rest_s:g} s at rest", s3)):
        print(f"-- grown {title} (RSS {(rss1 if later is s2 else rss2) / 1e6:.1f} MB)")
        for st in later.compare_to(s1, "traceback")[:top]:
            print(f"  {st.size_diff / 1e3:+9.1f} kB {st.count_diff:+7d} blocks")
            for line in st.traceback.format(limit=6, most_recent_first=True):
                print(f"      {line}")
    return 0
