"""``python -m bench run``: the whole benchmark in one run on one machine.

1. the fast upstream starts once, pinned with the load generator and this harness to CPU 1;
2. per repetition, each server under test starts alone on CPU 0 — (a) none (direct), (b) the bare
   proxy, (c) the gateway (three routes on one process), (d) LiteLLM — in alternating order across
   repetitions, is warmed up, and is driven by wrk at each concurrency, streaming and not;
3. the streaming probes (TTFB, per-chunk delay), RSS at rest, the 200,000-request soak and the
   micro-benchmarks follow;
4. raw JSON goes to ``bench/results/<timestamp>.json``; ``docs/BENCHMARKS.md`` and ``docs/bench.png``
   are regenerated from it (:mod:`bench.report`).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench import targets as T
from bench.load import Load, chat_body, ensure_wrk
from bench.probe import probe
from bench.procs import LOAD_CPU, ROOT, SERVER_CPU, Server, can_pin, cpu_busy_seconds, pin_self, shield

RESULTS_DIR = ROOT / "bench" / "results"
NA_AUTO = "n/a (not implemented at this commit)"


@dataclass
class Settings:
    """What one run measures. Defaults are the documented full run."""

    duration_s: float = 5.0
    reps: int = 2
    concurrencies: tuple[int, ...] = (1, 16, 64)
    warmup_s: float = 1.0
    litellm: bool = True
    probe_ttfb: int = 300
    probe_streams: int = 50
    soak_requests: int = 200_000
    soak_warmup: int = 20_000
    soak_verdict: bool = True
    """Exit 1 when the soak's RSS grows beyond the limit (off for smoke runs: too short to judge)."""
    micro: bool = True
    scale: bool = True
    """Per-chunk CPU, Redis-state and ``--workers 2`` rows (:mod:`bench.scale`)."""
    quick_micro: bool = False
    install_wrk: bool = True
    allow_python_load: bool = False
    out_dir: Path = RESULTS_DIR
    write_docs: bool = True
    docs_dir: Path = ROOT / "docs"
    baseline: Path | None = None
    command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("out_dir", "docs_dir", "baseline"):
            d[k] = str(d[k]) if d[k] is not None else None
        return d


def post(url: str, body: bytes, headers: dict[str, str], timeout_s: float = 30) -> tuple[int, bytes]:
    """One plain HTTP POST (availability checks)."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=timeout_s)
    try:
        conn.request("POST", u.path, body, {"Content-Type": "application/json", **headers})
        r = conn.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as exc:
        return 0, str(exc).encode()
    finally:
        conn.close()


def check_route(base: str, route: T.Route) -> str | None:
    """``None`` when the route answers both a completion and a stream, else why not."""
    for stream in (False, True):
        status, data = post(base + "/v1/chat/completions", chat_body(route.model, stream), route.headers)
        if status != 200 or (stream and b"[DONE]" not in data):
            return f"HTTP {status}: {data[:160].decode(errors='replace')}"
    return None


def machine() -> dict[str, Any]:
    """CPU model, CPUs, memory, kernel, and the versions that matter."""
    info: dict[str, Any] = {"nproc": os.cpu_count(), "kernel": platform.release(),
                            "python": platform.python_version()}
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["memory_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    from importlib.metadata import PackageNotFoundError, version

    versions: dict[str, str | None] = {}
    for pkg in ("omniroute", "uvicorn", "uvloop", "httptools", "aiohttp", "orjson"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    versions["litellm"] = T.litellm_version()
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
        versions["wrk"] = (out.stdout or out.stderr).split("[")[0].replace("wrk", "").strip() or None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        versions["git"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
            check=False,
        ).stdout.strip() or None
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "src"],
                               capture_output=True, text=True, check=False).stdout.strip()
        versions["git_dirty_src"] = "yes" if dirty else "no"
    info["versions"] = versions
    return info


class Bench:
    """One benchmark run; :meth:`run` returns the results document."""

    def __init__(self, settings: Settings, log: Callable[[str], None] = print) -> None:
        self.s = settings
        self.log = log
        self.tmp = Path(tempfile.mkdtemp(prefix="omniroute-bench-"))
        self.pinned = can_pin()
        self.server_cpu = SERVER_CPU if self.pinned else None
        self.notes: list[str] = []
        self.cells: list[dict[str, Any]] = []
        self.availability: dict[str, str] = {}
        self.upstream: Server | None = None
        self.load: Load | None = None
        self.litellm_exe: Path | None = None

    # -- helpers ---------------------------------------------------------------------------------
    def say(self, msg: str) -> None:
        self.log(f"[bench {time.strftime('%H:%M:%S')}] {msg}")

    @contextlib.contextmanager
    def server(self, kind: str) -> Iterator[Server | None]:
        """Start the server under test for ``kind`` (``direct`` → none) and stop it afterwards."""
        assert self.upstream is not None
        up = self.upstream.url
        srv: Server | None
        if kind == "direct":
            srv = None
        elif kind == "bare":
            srv = T.bare_server(up, self.tmp, self.server_cpu)
        elif kind == "gateway":
            srv = T.gateway_server(up, self.tmp, self.tmp, self.server_cpu)
        elif kind == "litellm":
            assert self.litellm_exe is not None
            srv = T.litellm_server(self.litellm_exe, up, self.tmp, self.tmp, self.server_cpu)
        else:
            raise ValueError(kind)
        if srv is not None:
            t0 = time.monotonic()
            srv.start()
            self.say(f"{kind} up on :{srv.port} (pid {srv.pid}) in {time.monotonic() - t0:.1f}s")
        try:
            yield srv
        finally:
            if srv is not None:
                srv.stop()

    def base_url(self, srv: Server | None) -> str:
        assert self.upstream is not None
        return (srv or self.upstream).url

    def routes_for(self, kind: str) -> list[T.Route]:
        return [r for r in T.ALL_ROUTES if r.server == kind]

    # -- phases ----------------------------------------------------------------------------------
    def setup(self) -> None:
        if shield():
            self.notes.append("Benchmark processes ran at nice -10 (and autogroup nice -10) to keep other "
                              "load on the machine from taking CPU from the measurement.")
        if T.GATEWAY_SRC:
            self.notes.append(f"The gateway was imported from {T.GATEWAY_SRC} (OMNIROUTE_BENCH_GATEWAY_SRC).")
        if self.pinned:
            pin_self(LOAD_CPU)
        else:
            self.notes.append("CPU pinning unavailable (taskset missing or < 2 CPUs): nothing pinned.")
        wrk = ensure_wrk(install=self.s.install_wrk, log=self.say)
        if wrk is None:
            if not self.s.allow_python_load:
                raise SystemExit("wrk is required for `bench run` (apt-get install -y wrk)")
            self.notes.append("wrk unavailable: the Python (aiohttp) load generator was used; its numbers "
                              "measure the harness, not the servers.")
        self.load = Load(wrk, self.tmp)
        self.upstream = T.upstream_server(self.tmp, LOAD_CPU if self.pinned else None).start()
        self.say(f"upstream on {self.upstream.url}; load generator: {self.load.generator}; "
                 f"pinning: {'server CPU 0, upstream+load CPU 1' if self.pinned else 'off'}")
        if self.s.litellm:
            self.litellm_exe = T.ensure_litellm(self.say)
            if self.litellm_exe is None:
                self.availability["litellm"] = "n/a (LiteLLM could not be installed)"

    def measure_server(self, kind: str, rep: int) -> None:
        """Every cell of one server under test, for one repetition."""
        assert self.load is not None and self.upstream is not None
        with self.server(kind) as srv:
            base = self.base_url(srv)
            routes = []
            for r in self.routes_for(kind):
                why = check_route(base, r)
                if why is not None:
                    self.availability[r.label] = (NA_AUTO if r is T.GW_AUTO else "n/a") + f" — {why}"
                    self.say(f"{r.label}: unavailable ({why[:100]})")
                    continue
                routes.append(r)
            for r in routes if self.s.warmup_s > 0 else ():  # warm-up: pools, caches, first calls
                for stream in (False, True):
                    self.load.run(base + "/v1/chat/completions", [chat_body(r.model, stream)], r.headers,
                                  concurrency=16, duration_s=self.s.warmup_s)
            for stream in (False, True):
                for conc in self.s.concurrencies:
                    for r in routes:
                        self.cells.append(self.cell(r, srv, base, stream, conc, rep))

    def cell(self, r: T.Route, srv: Server | None, base: str, stream: bool, conc: int, rep: int
             ) -> dict[str, Any]:
        assert self.load is not None and self.upstream is not None
        c0 = srv.cpu_seconds() if srv else 0.0
        u0 = self.upstream.cpu_seconds()
        b0 = cpu_busy_seconds(SERVER_CPU)
        res = self.load.run(base + "/v1/chat/completions", [chat_body(r.model, stream)], r.headers,
                            concurrency=conc, duration_s=self.s.duration_s)
        c1 = srv.cpu_seconds() if srv else 0.0
        u1 = self.upstream.cpu_seconds()
        b1 = cpu_busy_seconds(SERVER_CPU)
        n = max(res.requests, 1)
        out = {
            "route": r.label, "stream": stream, "concurrency": conc, "rep": rep, **res.to_dict(),
            "cpu_us_per_req": (c1 - c0) / n * 1e6 if srv else None,
            "server_cpu_util": (c1 - c0) / res.duration_s if srv and res.duration_s else None,
            "upstream_cpu_util": (u1 - u0) / res.duration_s if res.duration_s else None,
            # CPU 0 time used by anything but the server under test (other load on the machine)
            "cpu0_other_util": ((b1 - b0) - (c1 - c0)) / res.duration_s if res.duration_s else None,
            "rss_mb": srv.rss_bytes() / 1e6 if srv else None,
        }
        self.say(f"rep {rep} {r.label:<9} {'stream' if stream else 'json  '} c{conc:<3} "
                 f"{res.rps:8.0f} req/s  p50 {res.p50_ms:7.2f} ms  p99 {res.p99_ms:7.2f} ms"
                 + (f"  cpu/req {out['cpu_us_per_req']:.0f} µs" if srv else "")
                 + f"  other on cpu0 {out['cpu0_other_util']:.2f}"
                 + (f"  ERRORS {res.errors}" if res.errors else ""))
        return out

    def probes(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Streaming probes for every configuration, and the gateway's RSS at rest (PERF-5)."""
        out: dict[str, Any] = {}
        rss: dict[str, Any] = {}
        ttfb_n, streams_n = self.s.probe_ttfb, self.s.probe_streams
        for kind in ("direct", "bare", "gateway", "litellm"):
            if kind == "litellm" and (not self.s.litellm or self.litellm_exe is None):
                continue
            with self.server(kind) as srv:
                base = self.base_url(srv)
                if kind == "gateway" and srv is not None:
                    time.sleep(3)
                    rss["gateway_start_mb"] = srv.rss_bytes() / 1e6
                for r in self.routes_for(kind):
                    if r.label in self.availability:
                        continue
                    slow = kind == "litellm"
                    out[r.label] = probe(
                        base, r.model, r.stamp_model, r.headers,
                        ttfb_requests=max(20, ttfb_n // 6) if slow else ttfb_n,
                        stamp_streams=max(5, streams_n // 5) if slow else streams_n,
                    )
                    p = out[r.label]
                    self.say(f"probe {r.label:<9} TTFB p50 {p['ttfb'].get('p50_ms', float('nan')):.3f} ms  "
                             f"chunk delay p50 {p['chunk_delay'].get('p50_ms', float('nan')):.3f} ms "
                             f"p99 {p['chunk_delay'].get('p99_ms', float('nan')):.3f} ms")
                if srv is not None:
                    time.sleep(3)
                    rss[f"{kind}_rest_after_probe_mb"] = srv.rss_bytes() / 1e6
        return out, rss

    def run(self) -> dict[str, Any]:
        started = datetime.now(UTC)
        t0 = time.monotonic()
        doc: dict[str, Any] = {"schema": 1, "started": started.isoformat(timespec="seconds"),
                               "settings": self.s.to_dict(), "machine": machine()}
        try:
            self.setup()
            kinds = ["direct", "bare", "gateway"] + (["litellm"] if self.litellm_exe else [])
            for rep in range(self.s.reps):
                order = kinds if rep % 2 == 0 else list(reversed(kinds))
                for kind in order:
                    self.measure_server(kind, rep)
            doc["probe"], doc["rss"] = self.probes()
            if self.s.scale:
                from bench import scale

                assert self.upstream is not None and self.load is not None
                doc["chunk_cost"] = scale.chunk_cost(
                    self.load, self.upstream.url, self.tmp, self.server_cpu, conc=16,
                    duration_s=self.s.duration_s, reps=self.s.reps, say=self.say)
                doc["scale"] = scale.state_and_workers(
                    self.load, self.upstream.url, self.tmp, self.server_cpu, conc=max(self.s.concurrencies),
                    duration_s=self.s.duration_s, reps=self.s.reps, say=self.say)
            if self.s.soak_requests:
                from bench.soak import soak

                assert self.upstream is not None and self.load is not None
                doc["soak"] = soak(self.upstream, self.load, self.tmp, self.server_cpu,
                                   requests=self.s.soak_requests, warmup=self.s.soak_warmup, log=self.say)
            if self.s.micro:
                from bench import micro

                self.say("micro-benchmarks …")
                doc["micro"] = micro.run(quick=self.s.quick_micro)
        finally:
            if self.upstream is not None:
                self.upstream.stop()
        doc["machine"]["versions"]["litellm"] = T.litellm_version() if self.litellm_exe else None
        doc["cells"] = self.cells
        doc["availability"] = self.availability
        doc["notes"] = self.notes
        doc["summary"] = summarize(self.cells)
        doc["elapsed_s"] = round(time.monotonic() - t0, 1)
        return doc


def summarize(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median over repetitions per (route, stream, concurrency)."""
    groups: dict[tuple[str, bool, int], list[dict[str, Any]]] = {}
    for c in cells:
        groups.setdefault((c["route"], c["stream"], c["concurrency"]), []).append(c)
    out = []
    for (route, stream, conc), cs in groups.items():
        def med(key: str, cs: list[dict[str, Any]] = cs) -> float | None:
            xs = [c[key] for c in cs if c.get(key) is not None]
            return statistics.median(xs) if xs else None

        out.append({"route": route, "stream": stream, "concurrency": conc, "reps": len(cs),
                    "rps": med("rps"), "p50_ms": med("p50_ms"), "p99_ms": med("p99_ms"),
                    "cpu_us_per_req": med("cpu_us_per_req"), "errors": sum(c["errors"] for c in cs)})
    return out


def save(doc: dict[str, Any], out_dir: Path) -> Path:
    import orjson

    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = doc["started"].replace(":", "").replace("-", "").replace("+0000", "Z")
    path = out_dir / f"{stamp}.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return path


def main(settings: Settings) -> int:
    settings.command = settings.command or shlex.join([Path(sys.executable).name, "-m", "bench",
                                                      *sys.argv[1:]])
    doc = Bench(settings).run()
    path = save(doc, settings.out_dir)
    print(f"results: {path}")
    if settings.write_docs:
        from bench.report import render

        md, png = render(doc, settings.docs_dir, results_path=path)
        print(f"report: {md}" + (f", chart: {png}" if png else ""))
    soak = doc.get("soak") or {}
    if soak.get("failed") and settings.soak_verdict:
        print(f"SOAK FAILED: RSS grew {soak['growth_pct']:.1f} % (> {soak['limit_pct']} %)")
        return 1
    return 0
