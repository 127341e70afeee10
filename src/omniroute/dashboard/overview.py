"""Overview page: traffic, errors, fallbacks, latency, TTFT and spend of the last hour, day or week,
the busiest models and keys, and the resilience state at a glance (OPS-3).

Data: ``GET /api/usage/traffic`` and ``GET /api/resilience``. The live part is re-fetched every 10 s;
the charts are drawn by ``console.js`` from the JSON embedded in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final

import orjson
from fastapi import APIRouter, Depends
from starlette.responses import Response

from omniroute.api.admin.resilience import resilience_state
from omniroute.api.admin.usage import WINDOWS, TrafficSummary, Window, usage_traffic
from omniroute.dashboard.web import Page, console_page

router = APIRouter()

WINDOW_LABELS: Final[Mapping[str, str]] = MappingProxyType(
    {"1h": "Last hour", "24h": "Last day", "7d": "Last week"}
)


def chart_data(summary: TrafficSummary) -> str:
    """The series as uPlot columns, one point per bucket of the whole window (empty buckets: zero
    requests, no latency), as JSON text for the page."""
    by_ts = {b.ts: b for b in summary.series}
    step = summary.bucket_s
    first = int(summary.since // step) * step
    xs = list(range(first, first + WINDOWS[summary.window][0] + step, step))
    cols: dict[str, list[Any]] = {
        k: [] for k in ("requests", "errors", "fallbacks", "p50", "p95", "ttft", "cost")
    }
    for x in xs:
        b = by_ts.get(float(x))
        cols["requests"].append(b.requests if b else 0)
        cols["errors"].append(b.errors if b else 0)
        cols["fallbacks"].append(b.fallbacks if b else 0)
        cols["p50"].append(b.p50_latency_ms if b else None)
        cols["p95"].append(b.p95_latency_ms if b else None)
        cols["ttft"].append(b.p50_ttft_ms if b else None)
        cols["cost"].append(round(b.cost_usd, 6) if b else 0)
    return orjson.dumps({"x": xs, **cols}).decode()


@router.get("")
async def overview(page: Annotated[Page, Depends(console_page)], window: Window = "24h") -> Response:
    """The overview; htmx polls return only its live part."""
    summary = await usage_traffic(page.gw, window)
    state = await resilience_state(page.gw)
    return page.render(
        "partials/overview_live.html" if page.htmx else "overview.html",
        summary=summary,
        chart=chart_data(summary),
        window=window,
        windows=WINDOW_LABELS,
        state=state,
        open_breakers=sum(1 for b in state["breakers"].values() if b["state"] == "OPEN"),
        providers=len(page.gw.registry.connections),
        connections=len(page.gw.registry.connections_by_id),
    )
