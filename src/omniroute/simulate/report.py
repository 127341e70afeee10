"""The comparison: figures per variant, the oracle ratios, and the text, JSON and HTML reports.

Figures (per variant, over every request of the workload):

- ``success_rate`` — share of requests the client got a complete answer for; ``errors`` — requests
  that ended in an error the client saw (an error status, or a stream that failed after its first
  token);
- ``latency_ms`` / ``ttft_ms`` — nearest-rank p50/p95/p99 over successful requests (TTFT over the
  streamed ones), in virtual milliseconds;
- ``cost_usd`` — what the providers billed (prompt and completion tokens at the price in force at
  the request's arrival), ``cost_per_success_usd``;
- ``fallbacks`` — successful requests that needed more than one attempt (the usage log's definition);
- ``quality`` — the mean quality score of the answers (0 for a failed request);
- ``traffic_share`` — share of successful requests per provider.

``vs_oracle`` divides a variant's success rate, cost, p95 latency and quality by the oracle's.
The JSON holds no wall-clock time and rounds floats to 6 places, so one seed gives one file.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from omniroute.simulate.run import RunResult

TIMELINE_BUCKETS = 20


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile ``q`` (0-100) of ``values`` (need not be sorted); ``None`` when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def summarize(run: RunResult) -> dict[str, Any]:
    """The figures of one run (see the module docstring), JSON-ready."""
    rs = run.results
    ok = [r for r in rs if r.status == 200]
    lat = [r.latency_ms for r in ok]
    ttft = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    cost = sum(r.cost_usd for r in rs)
    n = len(rs)
    share = Counter(r.provider for r in ok)
    return {
        "model": run.model,
        "requests": n,
        "success_rate": _r(len(ok) / n if n else 0.0),
        "errors": n - len(ok),
        "error_statuses": {
            str(k): v for k, v in sorted(Counter(r.status for r in rs if r.status != 200).items())
        },
        "latency_ms": {f"p{q}": _r(percentile(lat, q)) for q in (50, 95, 99)},
        "ttft_ms": {f"p{q}": _r(percentile(ttft, q)) for q in (50, 95, 99)},
        "cost_usd": _r(cost),
        "cost_per_success_usd": _r(cost / len(ok) if ok else None),
        "fallbacks": sum(1 for r in ok if r.attempts > 1),
        "quality": _r(sum(r.quality for r in rs) / n if n else 0.0),
        "traffic_share": {str(k): _r(v / len(ok)) for k, v in sorted(share.items())},
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 4)


def vs_oracle(fig: Mapping[str, Any], oracle: Mapping[str, Any]) -> dict[str, float | None]:
    """A variant's figures as ratios to the oracle's (1.0 = as good as perfect knowledge; above 1 is
    worse for cost and latency, below 1 is worse for success and quality)."""
    return {
        "success_rate": _ratio(fig["success_rate"], oracle["success_rate"]),
        "cost_usd": _ratio(fig["cost_usd"], oracle["cost_usd"]),
        "latency_p95": _ratio(fig["latency_ms"]["p95"], oracle["latency_ms"]["p95"]),
        "quality": _ratio(fig["quality"], oracle["quality"]),
    }


def timeline(run: RunResult, duration_s: float, buckets: int = TIMELINE_BUCKETS) -> dict[str, Any]:
    """Per time bucket (arrival time): cumulative cost (USD), each provider's share of the
    successful requests, and each provider's breaker state at the bucket's end (providers whose
    breaker never moved are left out)."""
    width = max(duration_s, 1e-9) / buckets
    cost = [0.0] * buckets
    counts: list[Counter[str]] = [Counter() for _ in range(buckets)]
    for r in run.results:
        b = min(int(r.arrival_s / width), buckets - 1)
        cost[b] += r.cost_usd
        if r.status == 200 and r.provider:
            counts[b][r.provider] += 1
    providers = sorted({p for c in counts for p in c})
    cum, acc = [], 0.0
    for c in cost:
        acc += c
        cum.append(_r(acc))
    share = {p: [_r(c[p] / sum(c.values())) if c else 0.0 for c in counts] for p in providers}
    samples = run.breakers[:buckets]  # requests still finishing after the last bucket are not shown
    providers_seen = sorted({p for sample in samples for p in sample})
    breakers = {p: [sample.get(p, "CLOSED") for sample in samples] for p in providers_seen}
    return {"bucket_s": _r(width), "cumulative_cost_usd": cum, "share": share, "breakers": breakers}


def build_report(
    runs: Sequence[RunResult], oracle: RunResult, *, scenario: str, seed: int, duration_s: float
) -> dict[str, Any]:
    """The whole comparison as one JSON-ready mapping."""
    ofig = summarize(oracle)
    variants = {}
    for run in runs:
        fig = summarize(run)
        fig["vs_oracle"] = vs_oracle(fig, ofig)
        fig["timeline"] = timeline(run, duration_s)
        variants[run.variant] = fig
    return {
        "scenario": scenario,
        "seed": seed,
        "requests": len(oracle.results),
        "duration_s": _r(duration_s),
        "variants": variants,
        "oracle": ofig,
    }


def to_json(report: Mapping[str, Any]) -> bytes:
    """The report as indented JSON with sorted keys (byte-identical for identical reports)."""
    return orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def table_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """The comparison table's rows: one per variant, the oracle last."""
    rows = []
    for name, f in [*report["variants"].items(), ("oracle", report["oracle"])]:
        cps = f["cost_per_success_usd"]
        rows.append(
            [
                name,
                _fmt(f["success_rate"] * 100, ".2f"),
                str(f["errors"]),
                "/".join(_fmt(f["latency_ms"][k], ".0f") for k in ("p50", "p95", "p99")),
                "/".join(_fmt(f["ttft_ms"][k], ".0f") for k in ("p50", "p95", "p99")),
                _fmt(f["cost_usd"], ".4f"),
                _fmt(None if cps is None else cps * 1000, ".4f"),
                str(f["fallbacks"]),
                _fmt(f["quality"], ".3f"),
            ]
        )
    return rows


def ratio_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """One row per variant: its success rate, cost, p95 latency and quality over the oracle's."""
    keys = ("success_rate", "cost_usd", "latency_p95", "quality")
    return [
        [name, *(_fmt(f["vs_oracle"].get(k), ".3f") for k in keys)] for name, f in report["variants"].items()
    ]


TABLE_HEADERS = [
    "variant",
    "success %",
    "errors",
    "latency ms p50/95/99",
    "TTFT ms p50/95/99",
    "cost USD",
    "USD/1k ok",
    "fallbacks",
    "quality",
]
RATIO_HEADERS = ["variant", "success ÷ oracle", "cost ÷ oracle", "p95 latency ÷ oracle", "quality ÷ oracle"]


def rich_tables(report: Mapping[str, Any]) -> list[Any]:
    """The comparison and the ratios to the oracle as two ``rich`` tables."""
    from rich.table import Table

    t = Table(title=f"{report['scenario']}: {report['requests']} requests, seed {report['seed']}")
    for h in TABLE_HEADERS:
        t.add_column(h, justify="left" if h == "variant" else "right")
    for row in table_rows(report):
        t.add_row(*row)
    r = Table(title="Each variant as a ratio to the oracle")
    for h in RATIO_HEADERS:
        r.add_column(h, justify="left" if h == "variant" else "right")
    for row in ratio_rows(report):
        r.add_row(*row)
    return [t, r]


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode()


def plots(runs: Sequence[RunResult], report: Mapping[str, Any]) -> dict[str, str] | None:
    """Base64 PNGs of the latency CDF, cost over time, traffic share per provider over time and
    breaker states over time (``None`` when matplotlib, in the ``simulate`` extra, is not installed)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    out: dict[str, str] = {}
    fig, ax = plt.subplots(figsize=(7, 4))
    for run in runs:
        lat = sorted(r.latency_ms for r in run.results if r.status == 200)
        if lat:
            ax.plot(lat, [(i + 1) / len(lat) for i in range(len(lat))], label=run.variant)
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, virtual)")
    ax.set_ylabel("share of successful requests")
    ax.set_title("Latency CDF")
    ax.legend()
    out["latency_cdf"] = _png(fig)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, f in report["variants"].items():
        tl = f["timeline"]
        xs = [tl["bucket_s"] * (i + 1) for i in range(len(tl["cumulative_cost_usd"]))]
        ax.plot(xs, tl["cumulative_cost_usd"], label=name)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("cumulative cost (USD)")
    ax.set_title("Cost over time")
    ax.legend()
    out["cost_over_time"] = _png(fig)
    plt.close(fig)
    names = list(report["variants"])
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 2.2 * len(names)), squeeze=False, sharex=True)
    for ax, name in zip(axes[:, 0], names, strict=True):
        tl = report["variants"][name]["timeline"]
        shares = tl["share"]
        if shares:
            xs = [tl["bucket_s"] * i for i in range(len(next(iter(shares.values()))))]
            ax.stackplot(xs, *shares.values(), labels=list(shares), step="post")
        ax.set_ylabel(name, rotation=0, ha="right")
        ax.set_ylim(0, 1)
    axes[0, 0].set_title("Traffic share per provider over time")
    axes[0, 0].legend(loc="upper right", fontsize="small")
    axes[-1, 0].set_xlabel("time (s)")
    out["traffic_share"] = _png(fig)
    plt.close(fig)
    out["breaker_states"] = _breaker_plot(plt, report)
    return out


_BREAKER_LEVEL = {"CLOSED": 0.0, "HALF_OPEN": 0.5, "OPEN": 1.0}


def _breaker_plot(plt: Any, report: Mapping[str, Any]) -> str:
    names = list(report["variants"])
    fig, axes = plt.subplots(len(names), 1, figsize=(7, 1.8 * len(names)), squeeze=False, sharex=True)
    for ax, name in zip(axes[:, 0], names, strict=True):
        tl = report["variants"][name]["timeline"]
        for provider, states in tl["breakers"].items():
            xs = [tl["bucket_s"] * (i + 1) for i in range(len(states))]
            ax.step(xs, [_BREAKER_LEVEL.get(s, 0.0) for s in states], where="post", label=provider)
        ax.set_yticks([0, 0.5, 1], ["closed", "half-open", "open"])
        ax.set_ylim(-0.1, 1.1)
        ax.set_ylabel(name, rotation=0, ha="right")
        if tl["breakers"]:
            ax.legend(loc="upper right", fontsize="small")
    axes[0, 0].set_title("Breaker state per provider over time")
    axes[-1, 0].set_xlabel("time (s)")
    png = _png(fig)
    plt.close(fig)
    return png


def to_html(report: Mapping[str, Any], images: Mapping[str, str] | None, description: str = "") -> str:
    """A self-contained HTML page: the table and the plots as embedded base64 PNGs (or a note on
    how to get them when matplotlib is missing)."""
    esc = html.escape

    def table(headers: list[str], rows: list[list[str]]) -> str:
        head = "".join(f"<th>{esc(h)}</th>" for h in headers)
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    if images:
        figs = "".join(
            f'<figure><img alt="{esc(k)}" src="data:image/png;base64,{v}"></figure>'
            for k, v in images.items()
        )
    else:
        figs = (
            "<p><em>Plots need matplotlib: <code>pip install 'omniroute[simulate]'</code>"
            " (or <code>pip install matplotlib</code>), then run the command again.</em></p>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>omniroute simulate: {esc(str(report['scenario']))}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child,th:first-child"
        "{text-align:left}figure{margin:1em 0}</style></head><body>"
        f"<h1>Scenario {esc(str(report['scenario']))}</h1>"
        f"<p>{esc(description)}</p>"
        f"<p>{report['requests']} requests over {report['duration_s']:g} s of virtual time, "
        f"seed {report['seed']}."
        " Latencies are virtual milliseconds; the oracle serves each request with perfect knowledge of"
        " the fleet.</p>"
        f"{table(TABLE_HEADERS, table_rows(report))}<h2>Ratios to the oracle</h2>"
        f"{table(RATIO_HEADERS, ratio_rows(report))}{figs}</body></html>\n"
    )


__all__ = [
    "RATIO_HEADERS",
    "TABLE_HEADERS",
    "build_report",
    "percentile",
    "plots",
    "ratio_rows",
    "rich_tables",
    "summarize",
    "table_rows",
    "timeline",
    "to_html",
    "to_json",
    "vs_oracle",
]
