"""Usage in the management API (OBS-1): recent requests, filtered and paged; the traffic the console
overview charts (OPS-3); and usage and cost summed per key, model, provider or day.

``GET /api/usage`` lists usage rows newest first (``key``, ``model``, ``status``, ``request_id``
filters; ``offset`` paging); ``GET /api/usage/traffic?window=1h|24h|7d`` gives totals, a time series
and the busiest models and keys of the window; ``GET /api/usage/summary?group_by=…`` sums tokens and
cost per group. Each flushes the usage writer first, so a request that just finished is counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from omniroute.api.admin.core import Admin, api_key_id
from omniroute.core.fields import INT64_MAX
from omniroute.errors import GatewayError, InvalidRequest
from omniroute.gateway import Gateway
from omniroute.store import Store
from omniroute.store.repos.usage import USAGE_GROUPS, USAGE_TOKEN_CLASSES, usd_sum

router = APIRouter(tags=["usage"])

Window = Literal["1h", "24h", "7d"]
WINDOWS: Final[Mapping[str, tuple[int, int]]] = MappingProxyType(
    {"1h": (3600, 60), "24h": (86_400, 900), "7d": (604_800, 3600)}
)
"""Window name → (length s, bucket s): 60 one-minute, 96 quarter-hour or 168 one-hour buckets."""
MAX_PAGE: Final = 1000
_SUMMARY_DEFAULT_S: Final = 30 * 86400
"""The span ``GET /api/usage/summary`` sums without ``since`` (s): the last 30 days."""


class UsagePage(BaseModel):
    """One page of usage rows (every column of the usage log), newest first."""

    data: list[dict[str, Any]]
    offset: int
    limit: int
    has_more: bool = Field(description="more rows match after this page")


class Figures(BaseModel):
    """Request figures of a window or bucket: counts, spend (USD), tokens and percentiles (ms, ``None``
    without successful requests). ``errors`` excludes client disconnects; ``fallbacks`` are successful
    requests that needed more than one attempt."""

    requests: int
    errors: int
    fallbacks: int
    cost_usd: float
    prompt_tokens: int
    completion_tokens: int
    p50_latency_ms: float | None
    p95_latency_ms: float | None
    p50_ttft_ms: float | None
    p95_ttft_ms: float | None


class Bucket(Figures):
    """A time bucket starting at ``ts`` (epoch s)."""

    ts: float


class TopModel(BaseModel):
    """A served model and its requests and spend (USD) in the window."""

    provider: str | None
    model: str
    requests: int
    cost_usd: float


class TopKey(BaseModel):
    """An API key (``None`` = requests without a key) and its requests and spend (USD) in the window."""

    api_key_id: str | None
    name: str | None
    requests: int
    cost_usd: float


class TrafficSummary(BaseModel):
    """``GET /api/usage/traffic``: the window, its bucket size (s), totals, the series (empty buckets
    left out) and the top 5 models and keys by requests."""

    window: Window
    since: float
    bucket_s: int
    totals: Figures
    error_rate: float = Field(description="errors / requests, 0 without requests")
    series: list[Bucket]
    top_models: list[TopModel]
    top_keys: list[TopKey]


def _store(gw: Gateway) -> Store:
    assert gw.store is not None
    return gw.store


@router.get("/api/usage", response_model=UsagePage)
async def recent_usage(
    gw: Admin,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    offset: Annotated[int, Query(ge=0, le=INT64_MAX)] = 0,
    key: Annotated[str | None, Query(description="API key id or name")] = None,
    model: Annotated[str | None, Query(description="requested model, served model or provider/model")] = None,
    status: Annotated[str | None, Query(description="'ok', 'error' or an HTTP status code")] = None,
    request_id: Annotated[str | None, Query(description="one request's rows")] = None,
) -> UsagePage:
    """Recent usage rows (OBS-1), newest first, filtered and paged."""
    assert gw.usage is not None
    if status and status not in ("ok", "error") and not status.isdigit():
        raise InvalidRequest("status: must be 'ok', 'error' or an HTTP status code.", param="status")
    await gw.usage.flush()
    rows = await _store(gw).recent_usage(
        limit + 1,
        offset=offset,
        api_key_id=await api_key_id(gw, key, "key"),
        model=model or None,
        status=status or None,
        request_id=request_id or None,
    )
    return UsagePage(data=rows[:limit], offset=offset, limit=limit, has_more=len(rows) > limit)


@router.get("/api/usage/traffic", response_model=TrafficSummary)
async def usage_traffic(gw: Admin, window: Window = "24h") -> TrafficSummary:
    """Totals, a time series and the top models and keys of the last hour, day or week."""
    assert gw.usage is not None
    await gw.usage.flush()
    length, bucket = WINDOWS[window]
    since = gw.clock.time() - length
    raw = await _store(gw).traffic_summary(since, bucket)
    names = {k["id"]: k["name"] for k in await _store(gw).list_api_keys()}
    totals = Figures(**raw["totals"])
    return TrafficSummary(
        window=window,
        since=since,
        bucket_s=bucket,
        totals=totals,
        error_rate=totals.errors / totals.requests if totals.requests else 0.0,
        series=[Bucket(**b) for b in raw["series"]],
        top_models=[TopModel(**m) for m in raw["top_models"]],
        top_keys=[TopKey(**k, name=names.get(k["api_key_id"])) for k in raw["top_keys"]],
    )


class UsageSums(BaseModel):
    """Requests, tokens per class and cost (USD) summed over usage rows. ``prompt_tokens`` include the
    cache reads (``cached_tokens``) and writes (``cache_write_tokens``, of which
    ``cache_write_1h_tokens`` have the 1-hour lifetime; the rest the 5-minute one), so uncached input
    is ``prompt_tokens - cached_tokens - cache_write_tokens``; ``completion_tokens`` include the
    ``reasoning_tokens`` (OpenAI's usage names)."""

    requests: int
    prompt_tokens: int = Field(description="all input tokens: uncached, cache reads and cache writes")
    completion_tokens: int = Field(description="all output tokens, reasoning included")
    cached_tokens: int = Field(description="input tokens read from the provider's prompt cache")
    cache_write_tokens: int = Field(description="input tokens written to the cache (5 min and 1 h)")
    cache_write_1h_tokens: int = Field(description="of the cache writes, those with the 1-hour lifetime")
    reasoning_tokens: int = Field(description="of the output tokens, reasoning/thinking tokens")
    cost_usd: float = Field(description="cost in USD at the prices in force (USD per 1M tokens × tokens)")
    price_unknown_requests: int = Field(description="requests of models without a known price ($0)")


class UsageGroup(UsageSums):
    """One group's sums; only the grouped-by fields are present (``key`` is the API key id, ``null``
    for requests without a key; ``day`` the UTC date ``YYYY-MM-DD``)."""

    key: str | None = None
    model: str | None = None
    provider: str | None = None
    day: str | None = None


class UsageSummary(BaseModel):
    """``GET /api/usage/summary``: the groups, the span summed (epoch s) and the totals."""

    group_by: list[str]
    since: float
    until: float
    data: list[UsageGroup]
    total: UsageSums


@router.get("/api/usage/summary", response_model=UsageSummary, response_model_exclude_unset=True)
async def usage_summary(
    gw: Admin,
    group_by: Annotated[
        str,
        Query(
            description="comma-separated groups: any of key, model, provider, day (UTC date)",
            examples=["key,day"],
        ),
    ] = "day",
    since: Annotated[float | None, Query(description="start, epoch seconds (default: 30 days ago)")] = None,
    until: Annotated[float | None, Query(description="end, epoch seconds (default: now)")] = None,
) -> dict[str, Any]:
    """Usage and cost summed per key, model, provider and/or day (OBS-1).

    ``group_by`` is a comma-separated list of ``key``, ``model``, ``provider``, ``day`` (UTC);
    ``since``/``until`` are epoch seconds (default: the last 30 days up to now). Returns ``data``
    (one item per group: the group values, ``requests``, each token class, ``cost_usd`` in USD,
    ``price_unknown_requests``) and ``total`` (the same sums over all groups); costs are rounded to
    nano-dollars. 400 naming ``group_by`` on an unknown group, ``until`` when it is before ``since``.
    """
    assert gw.store is not None and gw.usage is not None
    groups = [g.strip() for g in group_by.split(",") if g.strip()]
    bad = [g for g in groups if g not in USAGE_GROUPS]
    if bad:
        raise GatewayError(
            f"group_by: unknown group {bad[0]!r}; use any of {', '.join(USAGE_GROUPS)}.",
            status=400,
            code="invalid_request_error",
            param="group_by",
        )
    end = gw.clock.time() if until is None else until
    start = end - _SUMMARY_DEFAULT_S if since is None else since
    if end < start:
        raise GatewayError(
            f"until: {end:g} is before since ({start:g}); until must not be earlier than since.",
            status=400,
            code="invalid_request_error",
            param="until",
        )
    await gw.usage.flush()
    data = await gw.store.usage_summary(groups, start, end)
    total: dict[str, Any] = {
        k: sum(item[k] for item in data) for k in ("requests", *USAGE_TOKEN_CLASSES, "price_unknown_requests")
    }
    total["cost_usd"] = usd_sum(sum(item["cost_usd"] for item in data))
    return {"group_by": groups, "since": start, "until": end, "data": data, "total": total}
