"""``python -m bench profile``: where the gateway's CPU goes, per route and mode.

For each gateway route (``provider/model``, the 3-target combo, ``auto`` over 50) streaming and not,
wrk drives the gateway at one concurrency twice: once bare, for the CPU µs per request (``/proc``
utime+stime of the gateway over the requests served — robust to other load on the machine, unlike
requests/s), and once under ``py-spy record`` (sampling, ``--format raw``, the default blocking mode:
``--nonblocking`` misattributes samples to aiosqlite's thread here) for the profile. The top
entries by self and by inclusive samples go to ``bench/results/profile-<timestamp>.{json,txt}``;
the raw collapsed stacks are kept next to them for flame graphs.
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench import targets as T
from bench.load import Load, chat_body, ensure_wrk
from bench.procs import LOAD_CPU, ROOT, SERVER_CPU, can_pin, pin_self

RESULTS_DIR = ROOT / "bench" / "results"


def _frame_name(frame: str) -> str:
    """``func (path/to/module.py:123)`` → ``func (module.py)`` so lines of one function merge."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    return f"{name} ({'/'.join(Path(path).parts[-2:])})" if path else name


def top_entries(raw: str, n: int = 40) -> dict[str, list[tuple[str, float]]]:
    """From py-spy's collapsed stacks: the ``n`` functions with most self and inclusive samples,
    as ``(function, percent of all samples)``."""
    self_c: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        total += count
        frames = [_frame_name(f) for f in stack.split(";")]
        self_c[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    pct = 100.0 / max(total, 1)
    return {
        "self": [(f, round(c * pct, 1)) for f, c in self_c.most_common(n)],
        "inclusive": [(f, round(c * pct, 1)) for f, c in incl.most_common(n)],
        "samples": [("total", float(total))],
    }


def main(duration_s: float = 5.0, concurrency: int = 64, rate: int = 250) -> int:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(pyspy).exists():
        raise SystemExit("py-spy is required (pip install py-spy)")
    wrk = ensure_wrk(install=True)
    if wrk is None:
        raise SystemExit("wrk is required")
    pinned = can_pin()
    if pinned:
        pin_self(LOAD_CPU)
    tmp = Path(tempfile.mkdtemp(prefix="omniroute-profile-"))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    load = Load(wrk, tmp)
    doc: dict[str, Any] = {"date": stamp, "concurrency": concurrency, "duration_s": duration_s, "rows": []}
    text: list[str] = []
    with T.upstream_server(tmp, LOAD_CPU if pinned else None) as up, \
            T.gateway_server(up.url, tmp, tmp, SERVER_CPU if pinned else None) as gw:
        url = gw.url + "/v1/chat/completions"
        for stream in (False, True):
            for r in T.GATEWAY_ROUTES:
                body = [chat_body(r.model, stream)]
                load.run(url, body, r.headers, concurrency=16, duration_s=1.0)  # warm-up
                c0 = gw.cpu_seconds()
                res = load.run(url, body, r.headers, concurrency=concurrency, duration_s=duration_s)
                cpu_us = (gw.cpu_seconds() - c0) / max(res.requests, 1) * 1e6
                raw_path = RESULTS_DIR / f"profile-{stamp}-{r.label}-{'stream' if stream else 'json'}.raw"
                spy = subprocess.Popen(
                    [pyspy, "record", "--pid", str(gw.pid), "--format", "raw", "--rate", str(rate),
                     "--output", str(raw_path), "--duration", str(int(duration_s) + 1)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )
                time.sleep(0.5)  # py-spy attaches
                load.run(url, body, r.headers, concurrency=concurrency, duration_s=duration_s)
                spy.wait(duration_s + 30)
                top = top_entries(raw_path.read_text() if raw_path.exists() else "")
                row = {"route": r.label, "stream": stream, "rps": res.rps, "cpu_us_per_req": cpu_us,
                       "errors": res.errors, "top": top}
                doc["rows"].append(row)
                head = (f"== {r.label} {'stream' if stream else 'json'} c{concurrency}: "
                        f"{res.rps:.0f} req/s, {cpu_us:.0f} µs CPU/req")
                print(head, flush=True)
                text.append(head)
                for kind in ("self", "inclusive"):
                    text.append(f"  -- top by {kind} samples (% of all)")
                    text.extend(f"  {p:5.1f}  {f}" for f, p in top[kind])
    (RESULTS_DIR / f"profile-{stamp}.json").write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    (RESULTS_DIR / f"profile-{stamp}.txt").write_text("\n".join(text) + "\n")
    print(f"profile: {RESULTS_DIR / f'profile-{stamp}.txt'}")
    return 0


def compare(baseline_src: str, reps: int = 3, duration_s: float = 3.0, concurrency: int = 64) -> int:
    """A/B of the gateway's CPU µs per request: this checkout against ``baseline_src`` (another
    tree's ``src``), started alternately on the same upstream, ``reps`` times per route and mode.
    Prints the medians and the ratio; CPU per request is far less sensitive to other load on the
    machine than requests/s, and alternating spreads what remains over both sides."""
    import statistics

    wrk = ensure_wrk(install=True)
    if wrk is None:
        raise SystemExit("wrk is required")
    pinned = can_pin()
    if pinned:
        pin_self(LOAD_CPU)
    tmp = Path(tempfile.mkdtemp(prefix="omniroute-ab-"))
    load = Load(wrk, tmp)
    cells: dict[tuple[str, str, bool], list[float]] = collections.defaultdict(list)
    with T.upstream_server(tmp, LOAD_CPU if pinned else None) as up:
        for rep in range(reps):
            for side in (("new", "base") if rep % 2 == 0 else ("base", "new")):
                T.GATEWAY_SRC = baseline_src if side == "base" else ""
                with T.gateway_server(up.url, tmp, tmp, SERVER_CPU if pinned else None) as gw:
                    url = gw.url + "/v1/chat/completions"
                    for stream in (False, True):
                        for r in T.GATEWAY_ROUTES:
                            body = [chat_body(r.model, stream)]
                            load.run(url, body, r.headers, concurrency=16, duration_s=1.0)
                            c0 = gw.cpu_seconds()
                            res = load.run(url, body, r.headers, concurrency=concurrency,
                                           duration_s=duration_s)
                            us = (gw.cpu_seconds() - c0) / max(res.requests, 1) * 1e6
                            cells[(side, r.label, stream)].append(us)
                            print(f"rep {rep} {side:4} {r.label:8} {'stream' if stream else 'json  '} "
                                  f"{us:6.0f} µs/req {res.rps:6.0f} req/s", flush=True)
    T.GATEWAY_SRC = ""
    print(f"\nmedian gateway CPU µs/req at c{concurrency} (base = {baseline_src})")
    for stream in (False, True):
        for r in T.GATEWAY_ROUTES:
            b = statistics.median(cells[("base", r.label, stream)])
            n = statistics.median(cells[("new", r.label, stream)])
            print(f"  {r.label:8} {'stream' if stream else 'json  '} base {b:6.0f}  new {n:6.0f}  "
                  f"new/base {n / b:5.2f}")
    return 0
