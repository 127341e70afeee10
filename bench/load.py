"""Load generation: ``wrk`` with a Lua script for the POST bodies (the default), or a small aiohttp
load generator when ``wrk`` is missing and cannot be installed (smoke runs only; the report says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass
class LoadResult:
    """One load run. Latencies in milliseconds."""

    requests: int
    duration_s: float
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    errors: int
    generator: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def chat_body(model: str, stream: bool, *, include_usage: bool = False) -> bytes:
    """A small OpenAI chat request."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hello to the benchmark."}],
        "max_tokens": 32,
    }
    if stream:
        body["stream"] = True
        if include_usage:
            body["stream_options"] = {"include_usage": True}
    return orjson.dumps(body)


def ensure_wrk(*, install: bool, log: Any = print) -> str | None:
    """The ``wrk`` binary; installs Debian's package when missing, we are root and ``install`` is set."""
    path = shutil.which("wrk")
    if path or not install:
        return path
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        log("wrk is not installed and cannot be installed here (not root or no apt-get)")
        return None
    log("installing wrk (apt-get install -y wrk) …")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "install", "-y", "-qq", "wrk"], ["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "wrk"]):
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(cmd, env=env, capture_output=True, timeout=90, check=False)
        path = shutil.which("wrk")
        if path:
            return path
    log("apt-get could not install wrk")
    return None


_LUA_DONE = r"""
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKJSON {\"requests\":%d,\"duration_us\":%d,\"connect\":%d,\"read\":%d,\"write\":%d," ..
    "\"status\":%d,\"timeout\":%d,\"p50_us\":%d,\"p90_us\":%d,\"p99_us\":%d,\"mean_us\":%.1f}\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean))
end
"""


def _lua_str(b: bytes) -> str:
    """A Lua long string that cannot be closed by the body's content."""
    s = b.decode()
    level = 0
    while f"]{'=' * level}]" in s:
        level += 1
    eq = "=" * level
    return f"[{eq}[{s}]{eq}]"


def lua_script(bodies: list[bytes], headers: Mapping[str, str]) -> str:
    """A wrk script POSTing ``bodies`` (round-robin when several) with ``headers``."""
    lines = ['wrk.method = "POST"', 'wrk.headers["Content-Type"] = "application/json"']
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    if len(bodies) == 1:
        lines.append(f"wrk.body = {_lua_str(bodies[0])}")
    else:
        lines.append("local bodies = {" + ", ".join(_lua_str(b) for b in bodies) + "}")
        lines.append("local i = 0")
        lines.append(
            "request = function() i = i + 1; "
            "return wrk.format(nil, nil, nil, bodies[(i % #bodies) + 1]) end"
        )
    return "\n".join(lines) + "\n" + _LUA_DONE


def run_wrk(
    wrk: str,
    url: str,
    script: str,
    *,
    concurrency: int,
    duration_s: float,
    script_dir: Path,
    timeout_s: float = 10.0,
) -> LoadResult:
    """Run wrk (one thread: the load generator shares one CPU with the upstream) and parse its
    ``done`` JSON line."""
    path = script_dir / f"wrk-{os.getpid()}-{time.monotonic_ns()}.lua"
    path.write_text(script)
    try:
        cmd = [
            wrk, "-t1", f"-c{concurrency}", f"-d{max(1, round(duration_s))}s",
            f"--timeout={max(1, round(timeout_s))}s", "-s", str(path), url,
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration_s + timeout_s + 60)
    finally:
        path.unlink(missing_ok=True)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result (rc {out.returncode}): {out.stdout}\n{out.stderr}")
    d = orjson.loads(line[8:])
    dur = d["duration_us"] / 1e6
    errors = d["connect"] + d["read"] + d["write"] + d["status"] + d["timeout"]
    ok = d["requests"] - d["status"]  # wrk counts non-2xx/3xx answers as requests too
    return LoadResult(
        requests=ok,
        duration_s=dur,
        rps=ok / dur if dur else 0.0,
        p50_ms=d["p50_us"] / 1000,
        p90_ms=d["p90_us"] / 1000,
        p99_ms=d["p99_us"] / 1000,
        mean_ms=d["mean_us"] / 1000,
        errors=errors,
        generator="wrk",
    )


def _pct(sorted_ms: list[float], q: float) -> float:
    if not sorted_ms:
        return 0.0
    return sorted_ms[min(len(sorted_ms) - 1, int(q / 100 * len(sorted_ms)))]


async def _python_load(
    url: str, bodies: list[bytes], headers: Mapping[str, str], concurrency: int, duration_s: float,
    max_requests: int | None,
) -> LoadResult:
    import aiohttp

    lat: list[float] = []
    errors = 0
    count = 0
    hdrs = {"Content-Type": "application/json", **headers}
    stop_at = time.perf_counter() + duration_s

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal errors, count
        while time.perf_counter() < stop_at and (max_requests is None or count < max_requests):
            body = bodies[count % len(bodies)]
            count += 1
            t0 = time.perf_counter()
            try:
                async with session.post(url, data=body, headers=hdrs) as r:
                    await r.read()
                    if r.status >= 400:
                        errors += 1
                        continue
            except (aiohttp.ClientError, OSError, TimeoutError):
                errors += 1
                continue
            lat.append((time.perf_counter() - t0) * 1000)

    t0 = time.perf_counter()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        await asyncio.gather(*(worker(s) for _ in range(concurrency)))
    dur = time.perf_counter() - t0
    lat.sort()
    return LoadResult(
        requests=len(lat),
        duration_s=dur,
        rps=len(lat) / dur if dur else 0.0,
        p50_ms=_pct(lat, 50),
        p90_ms=_pct(lat, 90),
        p99_ms=_pct(lat, 99),
        mean_ms=sum(lat) / len(lat) if lat else 0.0,
        errors=errors,
        generator="python-aiohttp",
    )


def run_python_load(
    url: str,
    bodies: list[bytes],
    headers: Mapping[str, str],
    *,
    concurrency: int,
    duration_s: float,
    max_requests: int | None = None,
) -> LoadResult:
    """The fallback load generator (aiohttp; far slower than wrk — only for checking the harness)."""
    return asyncio.run(_python_load(url, bodies, headers, concurrency, duration_s, max_requests))


class Load:
    """Drives one URL with wrk when available, else with the Python fallback."""

    def __init__(self, wrk: str | None, script_dir: Path) -> None:
        self.wrk = wrk
        self.script_dir = script_dir

    @property
    def generator(self) -> str:
        return "wrk" if self.wrk else "python-aiohttp"

    def run(
        self,
        url: str,
        bodies: list[bytes],
        headers: Mapping[str, str],
        *,
        concurrency: int,
        duration_s: float,
    ) -> LoadResult:
        if self.wrk:
            return run_wrk(
                self.wrk, url, lua_script(bodies, headers), concurrency=concurrency,
                duration_s=duration_s, script_dir=self.script_dir,
            )
        return run_python_load(url, bodies, headers, concurrency=concurrency, duration_s=duration_s)
