"""Render a results document into ``docs/BENCHMARKS.md`` and ``docs/bench.png``.

Every figure in the Markdown comes from the JSON (``python -m bench report FILE`` re-renders it); the
hand-written analysis — what limits a target, what was tried — lives in ``bench/notes.md`` and is
included verbatim.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import orjson

from bench.procs import ROOT
from bench.targets import LABELS

NOTES = ROOT / "bench" / "notes.md"
GW_ROUTES = ("gw-model", "gw-combo", "gw-auto")
SHORT = {"direct": "(a) direct", "bare": "(b) bare proxy", "gw-model": "(c) gateway\nprovider/model",
         "gw-combo": "(c) gateway\n3-target combo", "gw-auto": "(c) gateway\nauto (50)",
         "litellm": "(d) LiteLLM"}
USAGE = """\
## How to reproduce

```bash
python3 -m venv .venv && .venv/bin/pip install -e '.[bench]'   # matplotlib, pytest-benchmark
.venv/bin/python -m bench run                  # the full run below (≈ 10–20 min): JSON + this file + chart
.venv/bin/python -m bench run --quick          # 2 s cells, 1 repetition, short soak; docs untouched
.venv/bin/python -m bench smoke                # seconds; checks the harness end to end (CI)
.venv/bin/python -m bench soak                 # 200,000 requests, RSS every second; exit 1 if > +10 %
.venv/bin/python -m bench micro                # routing decision, combo strategies, ladder, translation
.venv/bin/python -m bench report bench/results/<file>.json   # re-render this file from a JSON
.venv/bin/python -m bench profile              # CPU µs/req and a py-spy profile per gateway route (py-spy)
.venv/bin/python -m bench profile --baseline-src /old/src    # A/B of CPU µs/req against another tree
.venv/bin/python -m bench scale                # per-chunk CPU, Redis-state cost, --workers 2 vs 1
.venv/bin/python -m bench memdiff              # tracemalloc diff of the gateway across many requests
# before/after: measure another tree's gateway, then compare against it
OMNIROUTE_BENCH_GATEWAY_SRC=/old/src .venv/bin/python -m bench run --no-docs --soak-requests 0
.venv/bin/python -m bench run --baseline bench/results/<that file>.json
```

`run` needs `wrk` (installed with `apt-get install -y wrk` when missing and root) and installs
LiteLLM's proxy (`litellm[proxy]`) once into its own venv at `~/.cache/omniroute/bench-litellm`
(`--no-litellm` skips it). The server under test is pinned to CPU 0 with `taskset`; the fake
upstream, wrk (one thread) and the harness share CPU 1. Every configuration talks to the same
fake upstream (`bench/upstream.py`: raw asyncio + httptools, answers from precomputed bytes; a
20-chunk stream is one write). Configurations: **(a) direct** to the upstream; **(b) bare proxy**
(`bench/bare_proxy.py`: raw ASGI on uvicorn + uvloop + httptools, one aiohttp session, no routing —
the physical limit of this stack); **(c) the gateway** (`omniroute serve`, one worker) with
`require_api_key` and a key, usage logging to SQLite and the routing headers on, for
`provider/model`, a 3-target priority combo and `auto` over 50 connections (and, for the per-chunk,
Redis and worker rows, with `redis_url` on a local Redis and with `--workers 2`); **(d) LiteLLM's proxy**
(one worker, callbacks/spend logs/DB off, `LITELLM_MASTER_KEY`, `LITELLM_LOCAL_MODEL_COST_MAP=True`).
Servers start one at a time, in alternating order across repetitions; each is warmed up before
its cells. Figures are medians over the repetitions.
"""


def _f(x: float | None, fmt: str = "{:.2f}", na: str = "n/a") -> str:
    return na if x is None else fmt.format(x)


class View:
    """Lookups over one results document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.by = {(s["route"], s["stream"], s["concurrency"]): s for s in doc.get("summary", [])}
        self.concs = sorted({s["concurrency"] for s in doc.get("summary", [])})
        self.routes = [r for r in LABELS if any(k[0] == r for k in self.by)]

    def get(self, route: str, stream: bool, conc: int, key: str) -> float | None:
        s = self.by.get((route, stream, conc))
        return None if s is None else s.get(key)

    def added(self, route: str, ref: str, stream: bool, conc: int, key: str) -> float | None:
        a, b = self.get(route, stream, conc, key), self.get(ref, stream, conc, key)
        return None if a is None or b is None else a - b

    def ratio(self, route: str, ref: str, stream: bool, conc: int, key: str = "rps") -> float | None:
        a, b = self.get(route, stream, conc, key), self.get(ref, stream, conc, key)
        return None if a is None or not b else a / b

    def probe(self, route: str, what: str, key: str) -> float | None:
        return ((self.doc.get("probe") or {}).get(route) or {}).get(what, {}).get(key)

    def probe_added(self, route: str, ref: str, what: str, key: str) -> float | None:
        a, b = self.probe(route, what, key), self.probe(ref, what, key)
        return None if a is None or b is None else a - b

    def na_reason(self, route: str) -> str | None:
        why = (self.doc.get("availability") or {}).get(route)
        return why.split(" — ")[0] if why else None


def _met(value: float | None, limit: float, *, at_most: bool = True) -> str:
    if value is None:
        return "n/a"
    ok = value <= limit if at_most else value >= limit
    return "✅ met" if ok else "❌ not met"


def perf_rows(v: View) -> list[list[str]]:
    """The SPEC §12 table: target, measured, verdict, LiteLLM in the same run."""
    rows: list[list[str]] = []
    top = max(v.concs) if v.concs else 64
    for route in GW_ROUTES:
        name = LABELS[route].removeprefix("(c) gateway ")
        na = v.na_reason(route)
        if na:
            rows.append([f"PERF-1/2 ({name})", "—", na, "", ""])
            continue
        for key, lim in (("p50_ms", 0.3), ("p99_ms", 1.0)):
            add = v.added(route, "bare", False, 1, key)
            lit = v.added("litellm", "bare", False, 1, key)
            rows.append([
                f"PERF-1 {name}, non-streaming, {key[:3]} added over (b) at c1",
                f"≤ {lim} ms", f"{_f(add, '{:+.3f}')} ms", _met(add, lim),
                f"LiteLLM {_f(lit, '{:+.2f}')} ms" + (f" ({lit / add:.0f}× more)" if add and lit and add > 0
                                                      else ""),
            ])
        for key, lim in (("p50_ms", 0.3), ("p99_ms", 1.0)):
            add = v.probe_added(route, "bare", "ttfb", key)
            lit = v.probe_added("litellm", "bare", "ttfb", key)
            rows.append([
                f"PERF-1 {name}, streaming TTFB, {key[:3]} added over (b) at c1",
                f"≤ {lim} ms", f"{_f(add, '{:+.3f}')} ms", _met(add, lim),
                f"LiteLLM {_f(lit, '{:+.2f}')} ms",
            ])
        for stream in (False, True):
            r = v.ratio(route, "bare", stream, top)
            lit = v.ratio(route, "litellm", stream, top)
            rows.append([
                f"PERF-2 {name}, {'streaming' if stream else 'non-streaming'} req/s vs (b) at c{top}",
                "≥ 60 %", _f(r, "{:.0%}"), _met(r, 0.6, at_most=False),
                f"{_f(lit, '{:.0f}')}× LiteLLM",
            ])
    micro = v.doc.get("micro") or []
    p3 = next((r for r in micro if r["name"] == "auto, pool 50"), None)
    p3v = p3.get("median_us") if p3 else None
    core = next((r for r in micro if r["name"] == "score_pool + rules, pool 50"), None)
    rows.append(["PERF-3 auto decision, 50-candidate pool (median): resolve → plan → ladder, as a "
                 "request pays it", "≤ 100 µs",
                 _f(p3v, "{:.1f} µs", (p3 or {}).get("note") or "n/a (micro not run)"), _met(p3v, 100), ""])
    if core and core.get("median_us") is not None:
        rows.append(["PERF-3 … of which scoring + rules router alone (bench/micro_auto.py)", "",
                     f"{core['median_us']:.1f} µs", "", ""])
    for key, lim in (("p50_ms", 1.0), ("p99_ms", 1.0)):
        add = v.probe_added("gw-model", "direct", "chunk_delay", key)
        bare = v.probe_added("bare", "direct", "chunk_delay", key)
        lit = v.probe_added("litellm", "direct", "chunk_delay", key)
        rows.append([f"PERF-4 per-chunk delay added over (a), {key[:3]} (the bare proxy adds "
                     f"{_f(bare, '{:+.3f}')} ms)", f"≤ {lim} ms",
                     f"{_f(add, '{:+.3f}')} ms", _met(add, lim), f"LiteLLM {_f(lit, '{:+.2f}')} ms"])
    cc = v.doc.get("chunk_cost") or {}
    if cc:
        gw_c, bare_c = cc["gw-model"]["per_chunk_cpu_us"], cc["bare"]["per_chunk_cpu_us"]
        ratio = cc["ratio"]
        rows.append([f"per-chunk CPU of a stream, provider/model (the bare proxy: {bare_c:+.2f} µs)",
                     "≤ 1.5× (b)", f"{gw_c:.2f} µs" + (f" ({ratio:.1f}×)" if ratio else " (bare ≈ 0)"),
                     _met(ratio, 1.5) if ratio else "❌ not met", ""])
    sw = v.doc.get("scale") or {}
    if sw and "skipped" not in sw:
        for mode in ("json", "stream"):
            r = sw[f"workers_ratio_{mode}"]
            rows.append([f"--workers 2 / 1 worker, state on Redis, provider/model {mode} req/s", "≥ 1.8×",
                         f"{r:.2f}×", _met(r, 1.8, at_most=False), ""])
    rss = (v.doc.get("rss") or {}).get("gateway_start_mb")
    lit_rss = (v.doc.get("rss") or {}).get("litellm_rest_after_probe_mb")
    rows.append(["PERF-5 RSS at rest (fresh gateway, 50 connections)", "≤ 120 MB", _f(rss, "{:.1f} MB"),
                 _met(rss, 120), f"LiteLLM {_f(lit_rss, '{:.0f}')} MB"])
    soak = v.doc.get("soak")
    if soak:
        rows.append([f"PERF-5 RSS growth over {soak['requests']:,} requests", "≤ +10 %",
                     f"{soak['growth_pct']:+.1f} % ({soak['rss_baseline_mb']:.1f} → "
                     f"{soak['rss_end_rest_mb']:.1f} MB)", _met(soak["growth_pct"], 10), ""])
    else:
        rows.append(["PERF-5 RSS growth over 200,000 requests", "≤ +10 %", "not run", "n/a", ""])
    return rows


def _table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _label(v: View, route: str) -> str:
    na = v.na_reason(route)
    return LABELS[route] + (f" — {na}" if na else "")


def render_md(doc: dict[str, Any], results_path: Path | None, png: Path | None) -> str:
    v = View(doc)
    m = doc.get("machine", {})
    ver = m.get("versions", {})
    st = doc.get("settings", {})
    parts = ["# Benchmarks", "",
             "OmniRoute's gateway against the physical limit of its own stack and against LiteLLM's "
             "proxy, measured side by side in one run on one machine (SPEC §12). "
             "This file is generated by `python -m bench run` from the JSON it writes; do not edit "
             "the figures by hand (the analysis at the end comes from `bench/notes.md`).", "", USAGE]
    parts += [
        "## This run", "",
        f"- date: {doc.get('started')} (took {doc.get('elapsed_s', 0) / 60:.0f} min)",
        f"- command: `{st.get('command')}`",
        f"- machine: {m.get('cpu_model', '?')}, {m.get('nproc')} CPUs, {m.get('memory_gb')} GB RAM, "
        f"Linux {m.get('kernel')}",
        "- versions: " + ", ".join(f"{k} {val}" for k, val in ver.items() if val),
        f"- settings: {st.get('duration_s')} s per cell, {st.get('reps')} repetitions, concurrency "
        f"{', '.join(map(str, st.get('concurrencies', [])))}, {st.get('warmup_s')} s warm-up per route "
        f"and mode, probes {st.get('probe_ttfb')} TTFB requests and {st.get('probe_streams')} stamped "
        f"streams per configuration, soak {st.get('soak_requests'):,} requests",
        f"- load generator: {doc['cells'][0]['generator'] if doc.get('cells') else 'n/a'}",
    ]
    if results_path is not None:
        with contextlib.suppress(ValueError):
            results_path = results_path.resolve().relative_to(ROOT)
        parts.append(f"- raw results: `{results_path}`")
    for n in doc.get("notes") or []:
        parts.append(f"- note: {n}")
    for route, why in (doc.get("availability") or {}).items():
        parts.append(f"- {LABELS.get(route, route)}: {why}")
    parts.append("")

    parts += ["## SPEC §12 targets", "",
              _table(["target", "limit", "measured", "verdict", "LiteLLM, same run"], perf_rows(v)), ""]

    parts += ["## Throughput (requests/s)", ""]
    head = ["configuration"] + [f"{'stream' if s else 'json'} c{c}" for s in (False, True) for c in v.concs]
    rows = [[_label(v, r)] + [_f(v.get(r, s, c, "rps"), "{:,.0f}") for s in (False, True) for c in v.concs]
            for r in v.routes]
    top = max(v.concs) if v.concs else 64
    for ref in ("bare", "litellm") if "litellm" in v.routes else ("bare",):
        for r in GW_ROUTES:
            if r in v.routes:
                rows.append([f"ratio {r} / {ref}"] + [_f(v.ratio(r, ref, s, c), "{:.2f}")
                                                      for s in (False, True) for c in v.concs])
    parts += [_table(head, rows), ""]

    parts += ["## Latency (ms; wrk, whole response)", ""]
    for stream in (False, True):
        head = ["configuration"] + [f"c{c} p50 / p99" for c in v.concs] + [
            "c1 p50 added vs (a)", "c1 p50 added vs (b)", "c1 p99 added vs (b)"]
        rows = []
        for r in v.routes:
            rows.append([_label(v, r)] + [
                f"{_f(v.get(r, stream, c, 'p50_ms'))} / {_f(v.get(r, stream, c, 'p99_ms'))}" for c in v.concs
            ] + [_f(v.added(r, "direct", stream, 1, "p50_ms"), "{:+.3f}"),
                 _f(v.added(r, "bare", stream, 1, "p50_ms"), "{:+.3f}"),
                 _f(v.added(r, "bare", stream, 1, "p99_ms"), "{:+.3f}")])
        parts += [f"**{'Streaming (20 chunks)' if stream else 'Non-streaming'}**", "", _table(head, rows), ""]

    parts += [f"## CPU per request (µs of the server under test, /proc utime+stime, c{top})", ""]
    rows = [[_label(v, r), _f(v.get(r, False, top, "cpu_us_per_req"), "{:,.0f}"),
             _f(v.get(r, True, top, "cpu_us_per_req"), "{:,.0f}")] for r in v.routes if r != "direct"]
    parts += [_table(["configuration", "json", "stream"], rows), ""]

    parts += scale_md(doc)
    probe = doc.get("probe") or {}
    if probe:
        parts += ["## Streaming probe (concurrency 1, raw asyncio client)", "",
                  "TTFB = request sent → first body byte of the 20-chunk stream. Per-chunk delay = "
                  "arrival at the client − the upstream's `time.time_ns()` stamp written into each event "
                  "(events 2 ms apart); the client's own share is in (a).", ""]
        rows = []
        for r in v.routes:
            if r not in probe:
                continue
            rows.append([_label(v, r), _f(v.probe(r, "ttfb", "p50_ms"), "{:.3f}"),
                         _f(v.probe(r, "ttfb", "p99_ms"), "{:.3f}"),
                         _f(v.probe_added(r, "bare", "ttfb", "p50_ms"), "{:+.3f}"),
                         _f(v.probe(r, "chunk_delay", "p50_ms"), "{:.3f}"),
                         _f(v.probe(r, "chunk_delay", "p99_ms"), "{:.3f}"),
                         _f(v.probe_added(r, "direct", "chunk_delay", "p50_ms"), "{:+.3f}"),
                         _f(v.probe_added(r, "direct", "chunk_delay", "p99_ms"), "{:+.3f}")])
        parts += [_table(["configuration", "TTFB p50", "TTFB p99", "TTFB p50 added vs (b)", "chunk p50",
                          "chunk p99", "chunk p50 added vs (a)", "chunk p99 added vs (a)"], rows), ""]

    soak = doc.get("soak")
    rss = doc.get("rss") or {}
    parts += ["## Memory", ""]
    if rss:
        parts.append("RSS at rest: " + ", ".join(f"{k.removesuffix('_mb').replace('_', ' ')} "
                                                  f"{val:.1f} MB" for k, val in rss.items()) + ".")
        parts.append("")
    if soak:
        parts.append(
            f"Soak: {soak['requests']:,} requests (after a {soak['warmup']:,}-request warm-up) at "
            f"concurrency {soak['concurrency']} over {', '.join(soak['models'])}, streaming and not: "
            f"{soak['load']['rps']:,.0f} req/s, {soak['load']['errors']} errors; RSS cold at rest "
            f"{soak['rss_cold_rest_mb']:.1f} MB, after warm-up {soak['rss_baseline_mb']:.1f} MB, peak "
            f"{soak['rss_peak_mb']:.1f} MB, at rest after the run {soak['rss_end_rest_mb']:.1f} MB → growth "
            f"{soak['growth_pct']:+.1f} % (limit +{soak['limit_pct']:.0f} %; "
            f"{soak['growth_vs_cold_pct']:+.1f} % vs cold) — **{'FAIL' if soak['failed'] else 'pass'}**.")
        parts.append("")

    micro = doc.get("micro") or []
    if micro:
        parts += ["## Micro-benchmarks (median per call, µs)", ""]
        rows = [[r["group"], r["name"], _f(r.get("median_us"), "{:.1f}"), r.get("note") or ""] for r in micro]
        parts += [_table(["group", "case", "median µs", "note"], rows), ""]

    base = doc.get("baseline")
    if base:
        parts += [compare_md(base, doc), ""]

    if png is not None:
        parts += ["## Chart", "", f"![throughput and added latency per configuration]({png.name})", ""]
    if NOTES.exists():
        parts += [NOTES.read_text().strip(), ""]
    return "\n".join(parts)


def scale_md(doc: dict[str, Any]) -> list[str]:
    """The per-chunk CPU, Redis-state and worker rows (:mod:`bench.scale`), when measured."""
    parts: list[str] = []
    cc = doc.get("chunk_cost") or {}
    if cc:
        parts += [f"## Per-chunk CPU of a stream (µs; (200-chunk − 20-chunk stream) / "
                  f"{cc['extra_chunks']}, c{cc['concurrency']})", ""]
        rows = [[_label_of(k), f"{cc[k]['stream_cpu_us']:,.0f}", f"{cc[k]['long_stream_cpu_us']:,.0f}",
                 f"{cc[k]['per_chunk_cpu_us']:.2f}"] for k in ("bare", "gw-model")]
        parts += [_table(["configuration", "20 chunks µs/req", "200 chunks µs/req", "µs per chunk"], rows),
                  "", "Gateway / bare proxy per chunk: " + (f"{cc['ratio']:.1f}×." if cc["ratio"] else
                  "no ratio: the bare proxy forwards each read's bytes, its per-chunk cost is ≈ 0."), ""]
    sw = doc.get("scale") or {}
    if sw:
        parts += ["## Shared state on Redis and worker processes "
                  f"(provider/model, c{sw.get('concurrency', '')})", ""]
        if "skipped" in sw:
            return [*parts, f"Not measured: {sw['skipped']}.", ""]
        names = {"memory-w1": "1 worker, state in process (CPU 0)", "redis-w1": "1 worker, state on Redis "
                 "(CPU 0)", "redis-w2": "2 workers, state on Redis (CPUs 0–1, shared with upstream and wrk)"}
        rows = [[label, f"{sw[k]['json']['rps']:,.0f}", f"{sw[k]['json']['cpu_us_per_req']:,.0f}",
                 f"{sw[k]['stream']['rps']:,.0f}", f"{sw[k]['stream']['cpu_us_per_req']:,.0f}"]
                for k, label in names.items()]
        parts += [_table(["gateway", "json req/s", "json CPU µs/req", "stream req/s", "stream CPU µs/req"],
                         rows), "",
                  f"Redis-backed state costs {sw['redis_cost_us_json']:+.0f} µs CPU per request "
                  f"non-streaming and {sw['redis_cost_us_stream']:+.0f} µs streaming in the gateway "
                  f"(Redis' own CPU not counted); two workers give {sw['workers_ratio_json']:.2f}× / "
                  f"{sw['workers_ratio_stream']:.2f}× one worker's requests/s.", ""]
    return parts


def _label_of(route: str) -> str:
    return LABELS.get(route, route)


def compare_md(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Before/after table of the headline figures (tuning log)."""
    b, a = View(before), View(after)
    top = max(a.concs) if a.concs else 64
    rows = []
    for r in ("bare", *GW_ROUTES):
        for s in (False, True):
            for key, c, fmt in (("rps", top, "{:,.0f}"), ("p50_ms", 1, "{:.3f}"), ("cpu_us_per_req", top,
                                                                                  "{:,.0f}")):
                x, y = b.get(r, s, c, key), a.get(r, s, c, key)
                if x is None and y is None:
                    continue
                rows.append([LABELS[r], "stream" if s else "json", f"{key} c{c}", _f(x, fmt), _f(y, fmt)])
    for r in GW_ROUTES:
        for s in (False, True):
            x, y = b.ratio(r, "bare", s, top), a.ratio(r, "bare", s, top)
            if x is not None or y is not None:
                rows.append([LABELS[r], "stream" if s else "json", f"req/s vs (b) c{top}", _f(x, "{:.0%}"),
                             _f(y, "{:.0%}")])
    return "\n".join([f"## Before / after tuning (before: run of {before.get('started')})", "",
                      _table(["configuration", "mode", "metric", "before", "after"], rows)])


def chart(doc: dict[str, Any], path: Path) -> Path | None:
    """Throughput at the top concurrency and added p50 latency at c1 per configuration (log scales)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    v = View(doc)
    top = max(v.concs) if v.concs else 64
    routes = [r for r in v.routes if v.get(r, False, top, "rps") is not None]
    names = [SHORT[r] for r in routes]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    w = 0.38
    xs = range(len(routes))
    for i, (stream, colour) in enumerate(((False, "#3b75af"), (True, "#ef8636"))):
        vals = [v.get(r, stream, top, "rps") or 0 for r in routes]
        bars = ax1.bar([x + (i - 0.5) * w for x in xs], vals, w, color=colour,
                       label="streaming" if stream else "non-streaming")
        ax1.bar_label(bars, labels=[f"{x:,.0f}" for x in vals], fontsize=7, rotation=90, padding=2)
    ax1.set_yscale("log")
    ax1.set_title(f"Throughput at concurrency {top} (req/s, log scale)")
    ax1.set_xticks(list(xs), names, fontsize=7)
    ax1.legend(fontsize=8)
    lat_routes = [r for r in routes if r != "direct"]
    for i, (stream, colour) in enumerate(((False, "#3b75af"), (True, "#ef8636"))):
        vals = [max(v.added(r, "direct", stream, 1, "p50_ms") or 0, 0.001) for r in lat_routes]
        bars = ax2.bar([x + (i - 0.5) * w for x in range(len(lat_routes))], vals, w, color=colour,
                       label="streaming (whole stream)" if stream else "non-streaming")
        ax2.bar_label(bars, labels=[f"{x:.2f}" for x in vals], fontsize=7, rotation=90, padding=2)
    ax2.set_yscale("log")
    ax2.set_title("Added p50 latency over (a) direct at concurrency 1 (ms, log scale)")
    ax2.set_xticks(list(range(len(lat_routes))), [SHORT[r] for r in lat_routes], fontsize=7)
    ax2.legend(fontsize=8)
    cpu = doc.get("machine", {}).get("cpu_model", "")
    fig.suptitle(f"OmniRoute benchmark {doc.get('started', '')} — {cpu}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def render(
    doc: dict[str, Any], docs_dir: Path, *, results_path: Path | None = None
) -> tuple[Path, Path | None]:
    """Write ``BENCHMARKS.md`` (and ``bench.png`` when matplotlib is installed) into ``docs_dir``."""
    docs_dir.mkdir(parents=True, exist_ok=True)
    if doc.get("settings", {}).get("baseline") and "baseline" not in doc:
        with contextlib.suppress(OSError):
            doc = {**doc, "baseline": orjson.loads(Path(doc["settings"]["baseline"]).read_bytes())}
    png = chart(doc, docs_dir / "bench.png")
    md = docs_dir / "BENCHMARKS.md"
    md.write_text(render_md(doc, results_path, png))
    return md, png


def main(path: Path, docs_dir: Path, baseline: Path | None = None) -> int:
    """``python -m bench report FILE``: re-render the docs from a results JSON."""
    doc = orjson.loads(path.read_bytes())
    if baseline is not None:
        doc["baseline"] = orjson.loads(baseline.read_bytes())
    md, png = render(doc, docs_dir, results_path=path)
    print(f"report: {md}" + (f", chart: {png}" if png else " (no chart: matplotlib missing)"))
    return 0
