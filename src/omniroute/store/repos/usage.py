"""Usage log (OBS-1), routing decisions (OBS-2), stored Responses API responses, and retention pruning."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypedDict

import orjson
from sqlalchemy import ColumnElement, Integer, and_, bindparam, case, cast, delete, func, literal, or_, select
from sqlalchemy.sql.dml import Insert

from omniroute.store import models
from omniroute.store.repos._base import RepoBase

_usage = models.usage_log
_dec = models.routing_decisions
_resp = models.responses_store

CLIENT_CLOSED_STATUS: Final = 499
TOP_N: Final = 5
"""Rows in each "top" list of :meth:`UsageRepo.traffic_summary`."""

USAGE_GROUPS: Final = ("key", "model", "provider", "day")
"""What :meth:`UsageRepo.usage_summary` can group by."""

USAGE_TOKEN_CLASSES: Final = (
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
    "reasoning_tokens",
)
"""The token counts of a usage row, summed by :meth:`UsageRepo.usage_summary`."""


class UsageRecord(TypedDict, total=False):
    """One usage row as written by :meth:`UsageRepo.write_usage` (OBS-1); every key is optional.

    ``ts`` epoch seconds (default now); ``latency_ms``/``ttft_ms`` milliseconds; ``cost_usd`` USD;
    ``status`` the HTTP status returned; ``member`` names the member call of a multi-call strategy.
    Token counts follow :class:`omniroute.values.Usage`: ``prompt_tokens`` includes ``cached_tokens``
    (cache reads) and ``cache_write_tokens`` (of which ``cache_write_1h_tokens``), ``completion_tokens``
    includes ``reasoning_tokens``. ``price_unknown`` marks a row priced at 0 because the model has no
    known price; ``rescued`` marks a stream that failed after commit and was finished by a rescuing
    attempt (``attempts`` then counts every attempt, the token counts sum them).
    """

    ts: float
    request_id: str
    api_key_id: str | None
    requested_model: str
    provider: str | None
    model: str | None
    connection_id: str | None
    strategy: str | None
    attempts: int
    status: int
    latency_ms: float
    ttft_ms: float | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: float
    error: str | None
    stream: bool
    member: str | None
    cache_write_tokens: int
    cache_write_1h_tokens: int
    reasoning_tokens: int
    price_unknown: bool
    rescued: bool


_USAGE_DEFAULTS: Final[Mapping[str, Any]] = {
    "request_id": "",
    "api_key_id": None,
    "requested_model": "",
    "provider": None,
    "model": None,
    "connection_id": None,
    "strategy": None,
    "attempts": 0,
    "status": 0,
    "latency_ms": 0.0,
    "ttft_ms": None,
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "cached_tokens": 0,
    "cost_usd": 0.0,
    "error": None,
    "stream": False,
    "member": None,
    "cache_write_tokens": 0,
    "cache_write_1h_tokens": 0,
    "reasoning_tokens": 0,
    "price_unknown": False,
    "rescued": False,
}


_USAGE_COLUMNS: Final = ("ts", *_USAGE_DEFAULTS)


def _usage_tuple(row: Mapping[str, Any], ts: float) -> tuple[Any, ...]:
    # Positional, in _USAGE_COLUMNS order; unknown keys are dropped so a newer writer does not break an
    # older schema.
    get = row.get
    return (get("ts") or ts, *[get(k, default) for k, default in _USAGE_DEFAULTS.items()])


def _json_text(data: dict[str, Any] | bytes) -> str:
    """A JSON column value as the driver takes it (text on SQLite and asyncpg)."""
    raw = data if isinstance(data, bytes) else orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    return raw.decode()


class UsageRepo(RepoBase):
    """Append-mostly tables written off the hot path in batches.

    The two per-request inserts (usage row, decision) go to the driver as pre-compiled SQL with
    positional tuples (``exec_driver_sql``): SQLAlchemy's per-row parameter processing cost about
    20 µs per row, several times the database's own work (PERF-2, measured with ``bench``).
    """

    _driver_sql: dict[str, str]

    def _compiled(self, name: str, stmt: Insert, columns: tuple[str, ...]) -> str:
        """``stmt`` with one bind per column in ``columns`` order, compiled once for this dialect."""
        cache: dict[str, str] = self.__dict__.setdefault("_driver_sql", {})
        sql = cache.get(name)
        if sql is None:
            compiled = stmt.values({c: bindparam(c) for c in columns}).compile(dialect=self._engine.dialect)
            order = tuple(compiled.positiontup or ())
            if order != columns:  # a dialect with named parameters: not expected for sqlite/asyncpg
                raise RuntimeError(f"unexpected bind order for {name}: {order}")
            sql = cache[name] = str(compiled)
        return sql

    # usage ---------------------------------------------------------------------------------------

    async def write_usage(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Insert usage rows (:class:`UsageRecord` keys) in one transaction with one executemany (OBS-1)."""
        ts = self._now()
        values = [_usage_tuple(r, ts) for r in rows]
        if not values:
            return
        sql = self._compiled("usage", _usage.insert(), _USAGE_COLUMNS)
        async with self._engine.begin() as conn:
            await conn.exec_driver_sql(sql, values)

    async def usage_stats(self, since_ts: float) -> dict[str, dict[str, Any]]:
        """Per-candidate aggregates of rows since ``since_ts`` (epoch s), keyed ``provider/model@connection``.

        Values: ``requests`` (rows, member rows included), ``failures`` (status ≥ 400 except 499 client
        disconnects), ``avg_latency_ms`` and ``avg_ttft_ms`` over successful rows (``None`` when there
        were none), ``cost_usd`` (sum, USD), ``last_ts`` (epoch s). Rows without a served provider and
        model are skipped. Feeds the 24 h reliability/latency stats (OBS-1).
        """
        failed = and_(_usage.c.status >= 400, _usage.c.status != CLIENT_CLOSED_STATUS)
        ok = _usage.c.status < 400
        stmt = (
            select(
                _usage.c.provider,
                _usage.c.model,
                _usage.c.connection_id,
                func.count().label("requests"),
                func.sum(case((failed, 1), else_=0)).label("failures"),
                func.avg(case((ok, _usage.c.latency_ms), else_=None)).label("avg_latency_ms"),
                func.avg(case((ok, _usage.c.ttft_ms), else_=None)).label("avg_ttft_ms"),
                func.sum(_usage.c.cost_usd).label("cost_usd"),
                func.max(_usage.c.ts).label("last_ts"),
            )
            .where(_usage.c.ts >= since_ts, _usage.c.provider.is_not(None), _usage.c.model.is_not(None))
            .group_by(_usage.c.provider, _usage.c.model, _usage.c.connection_id)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            key = f"{r['provider']}/{r['model']}@{r['connection_id'] or ''}"
            out[key] = {
                "requests": int(r["requests"]),
                "failures": int(r["failures"] or 0),
                "avg_latency_ms": float(r["avg_latency_ms"]) if r["avg_latency_ms"] is not None else None,
                "avg_ttft_ms": float(r["avg_ttft_ms"]) if r["avg_ttft_ms"] is not None else None,
                "cost_usd": usd_sum(r["cost_usd"]),
                "last_ts": float(r["last_ts"]),
            }
        return out

    async def usage_summary(
        self, group_by: Sequence[str], since_ts: float, until_ts: float
    ) -> list[dict[str, Any]]:
        """Usage summed per group for rows with ``since_ts <= ts < until_ts`` (epoch s) (OBS-1).

        ``group_by`` lists any of :data:`USAGE_GROUPS`: ``key`` (API key id), ``model``,
        ``provider``, ``day`` (UTC date ``YYYY-MM-DD``). Member rows of multi-call strategies are
        left out: the request's main row already carries their tokens and cost. Each item has the
        group values, ``requests``, the sum of every token class (:data:`USAGE_TOKEN_CLASSES`),
        ``cost_usd`` (USD) and ``price_unknown_requests``; ordered by the group values.
        Raises ``ValueError`` on an unknown group name.
        """
        unknown = [g for g in group_by if g not in USAGE_GROUPS]
        if unknown:
            raise ValueError(f"unknown usage group {unknown[0]!r} (known: {', '.join(USAGE_GROUPS)})")
        day = (
            cast(_usage.c.ts / 86400, Integer)
            if self._engine.dialect.name == "sqlite"
            else cast(func.floor(_usage.c.ts / 86400), Integer)
        )
        columns = {
            "key": _usage.c.api_key_id,
            "model": _usage.c.model,
            "provider": _usage.c.provider,
            "day": day,
        }
        groups = [columns[g].label(g) for g in dict.fromkeys(group_by)]
        stmt = (
            select(
                *groups,
                func.count().label("requests"),
                *[func.sum(_usage.c[c]).label(c) for c in USAGE_TOKEN_CLASSES],
                func.sum(_usage.c.cost_usd).label("cost_usd"),
                func.sum(case((_usage.c.price_unknown, 1), else_=0)).label("price_unknown_requests"),
            )
            .where(_usage.c.ts >= since_ts, _usage.c.ts < until_ts, _usage.c.member.is_(None))
            .group_by(*groups)
            .order_by(*groups)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        out: list[dict[str, Any]] = []
        for r in rows:
            item = {**r, "cost_usd": usd_sum(r["cost_usd"])}
            for c in (*USAGE_TOKEN_CLASSES, "price_unknown_requests"):
                item[c] = int(r[c] or 0)
            if "day" in item:
                item["day"] = time.strftime("%Y-%m-%d", time.gmtime(int(item["day"]) * 86400))
            out.append(item)
        return out

    async def recent_usage(
        self,
        limit: int = 100,
        *,
        offset: int = 0,
        api_key_id: str | None = None,
        model: str | None = None,
        status: str | None = None,
        request_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Usage rows as dicts of every column, newest first, ``offset`` rows skipped, at most
        ``limit`` (OBS-1).

        Filters: ``api_key_id`` exact; ``model`` matches the requested model, the served model id or
        the served ``provider/model``; ``status`` is ``"ok"`` (< 400), ``"error"`` (≥ 400) or one
        HTTP status code as text; ``request_id`` exact. Raises ``ValueError`` for any other ``status``."""
        stmt = select(_usage)
        if request_id is not None:
            stmt = stmt.where(_usage.c.request_id == request_id)
        if api_key_id is not None:
            stmt = stmt.where(_usage.c.api_key_id == api_key_id)
        if model:
            served = _usage.c.provider + "/" + _usage.c.model
            stmt = stmt.where(
                or_(_usage.c.requested_model == model, _usage.c.model == model, served == model)
            )
        if status:
            stmt = stmt.where(_status_filter(status))
        stmt = stmt.order_by(_usage.c.ts.desc(), _usage.c.id.desc()).offset(offset).limit(limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(stmt)).mappings()
            return [{**r, "stream": bool(r["stream"])} for r in rows]

    async def traffic_summary(self, since_ts: float, bucket_s: int) -> dict[str, Any]:
        """Request, error, fallback, latency, TTFT, token and spend figures of the requests since
        ``since_ts`` (epoch s), in total and per ``bucket_s``-second bucket, plus the busiest served
        models and API keys (the console overview, OBS-1). Member calls of multi-call strategies are
        left out: each request counts once, through its main row.

        Returns ``{"totals": {...}, "series": [{...}, ...], "top_models": [...], "top_keys": [...]}``;
        a bucket is ``{"ts": start epoch s, "requests", "errors", "fallbacks", "cost_usd",
        "prompt_tokens", "completion_tokens", "p50_latency_ms", "p95_latency_ms", "p50_ttft_ms",
        "p95_ttft_ms"}`` (percentiles ``None`` without successful requests); totals have the same keys
        without ``ts``. Errors are statuses ≥ 400 except client disconnects (499), as in
        :meth:`usage_stats`; a fallback is a successful request that needed more than one attempt;
        percentiles are nearest-rank over successful requests (TTFT over those that reported one)."""
        window = and_(_usage.c.ts >= since_ts, _usage.c.member.is_(None))
        bucket = (cast(_usage.c.ts, Integer) // bucket_s).label("bucket")
        async with self._engine.connect() as conn:
            series = await _bucket_figures(conn, window, bucket)
            totals = await _bucket_figures(conn, window, literal(0).label("bucket"))
            served = _usage.c.model.is_not(None)
            top_models = (
                await conn.execute(
                    select(
                        _usage.c.provider,
                        _usage.c.model,
                        func.count().label("requests"),
                        func.sum(_usage.c.cost_usd).label("cost_usd"),
                    )
                    .where(window, served)
                    .group_by(_usage.c.provider, _usage.c.model)
                    .order_by(func.count().desc(), _usage.c.provider, _usage.c.model)
                    .limit(TOP_N)
                )
            ).mappings()
            models = [{**r, "cost_usd": usd_sum(r["cost_usd"])} for r in top_models]
            top_keys = (
                await conn.execute(
                    select(
                        _usage.c.api_key_id,
                        func.count().label("requests"),
                        func.sum(_usage.c.cost_usd).label("cost_usd"),
                    )
                    .where(window)
                    .group_by(_usage.c.api_key_id)
                    .order_by(func.count().desc(), _usage.c.api_key_id)
                    .limit(TOP_N)
                )
            ).mappings()
            keys = [{**r, "cost_usd": usd_sum(r["cost_usd"])} for r in top_keys]
        total = totals.get(0) or _empty_figures()
        return {
            "totals": total,
            "series": [{"ts": float(b * bucket_s), **f} for b, f in sorted(series.items())],
            "top_models": models,
            "top_keys": keys,
        }

    # routing decisions ---------------------------------------------------------------------------

    async def save_decisions(self, items: Iterable[tuple[str, float, dict[str, Any] | bytes]]) -> None:
        """Persist ``(request_id, ts epoch s, decision as a dict or serialised JSON)`` items in one
        transaction (OBS-2).

        A decision saved again for the same request id replaces the old one.
        """
        values = [(rid, ts, _json_text(data)) for rid, ts, data in items]
        if not values:
            return
        sql = self._compiled(
            "decisions", self._upsert(_dec, ["request_id"], ["ts", "data"]), ("request_id", "ts", "data")
        )
        async with self._engine.begin() as conn:
            await conn.exec_driver_sql(sql, values)

    async def get_decision(self, request_id: str) -> dict[str, Any] | None:
        """The decision JSON saved for ``request_id``, or ``None`` (OBS-2)."""
        async with self._engine.connect() as conn:
            data = await conn.scalar(select(_dec.c.data).where(_dec.c.request_id == request_id))
        return dict(data) if data is not None else None

    # responses store -----------------------------------------------------------------------------

    async def save_response(
        self, id: str, api_key_id: str | None, data: dict[str, Any], ttl_s: float
    ) -> None:
        """Keep a Responses API response for ``ttl_s`` seconds, readable only by the same API key."""
        ts = self._now()
        async with self._engine.begin() as conn:
            await conn.execute(
                self._upsert(_resp, ["id"], ["api_key_id", "data", "expires_at", "created_at"]),
                {
                    "id": id,
                    "api_key_id": api_key_id or "",
                    "data": data,
                    "expires_at": ts + ttl_s,
                    "created_at": ts,
                },
            )

    async def get_response(self, id: str, api_key_id: str | None) -> dict[str, Any] | None:
        """The stored response, or ``None`` when unknown, expired, or saved under another API key."""
        async with self._engine.connect() as conn:
            data = await conn.scalar(
                select(_resp.c.data).where(
                    _resp.c.id == id,
                    _resp.c.api_key_id == (api_key_id or ""),
                    _resp.c.expires_at > self._now(),
                )
            )
        return dict(data) if data is not None else None

    # retention -----------------------------------------------------------------------------------

    async def prune(self, before_ts: float) -> dict[str, int]:
        """Delete usage rows and decisions older than ``before_ts`` (epoch s) and expired responses.

        Returns the number of rows deleted per table.
        """
        async with self._engine.begin() as conn:
            u = await conn.execute(delete(_usage).where(_usage.c.ts < before_ts))
            d = await conn.execute(delete(_dec).where(_dec.c.ts < before_ts))
            r = await conn.execute(delete(_resp).where(_resp.c.expires_at <= self._now()))
        return {"usage_log": u.rowcount, "routing_decisions": d.rowcount, "responses_store": r.rowcount}

    async def prune_batch(self, before_ts: float, limit: int) -> dict[str, int]:
        """Delete at most ``limit`` usage rows and ``limit`` routing decisions older than ``before_ts``
        (epoch s), oldest first, and every expired stored response, in one short transaction (the
        background pruning calls it until a batch comes back short, so a large backlog never holds a
        long lock). Returns the number of rows deleted per table."""
        async with self._engine.begin() as conn:
            old_usage = select(_usage.c.id).where(_usage.c.ts < before_ts).order_by(_usage.c.ts).limit(limit)
            old_dec = select(_dec.c.request_id).where(_dec.c.ts < before_ts).order_by(_dec.c.ts).limit(limit)
            u_ids = list((await conn.execute(old_usage)).scalars())
            d_ids = list((await conn.execute(old_dec)).scalars())
            u = await conn.execute(delete(_usage).where(_usage.c.id.in_(u_ids))) if u_ids else None
            d = await conn.execute(delete(_dec).where(_dec.c.request_id.in_(d_ids))) if d_ids else None
            r = await conn.execute(delete(_resp).where(_resp.c.expires_at <= self._now()))
        return {
            "usage_log": u.rowcount if u is not None else 0,
            "routing_decisions": d.rowcount if d is not None else 0,
            "responses_store": r.rowcount,
        }


COST_DECIMALS: Final = 9
"""Decimal places (USD) a summed ``cost_usd`` is rounded to: a nano-dollar, far below any price
(USD per 1M tokens × one token), so the rounding only removes binary float noise such as
``0.00018899999999999999``."""


def usd_sum(value: Any) -> float:
    """A summed cost (USD, ``None`` for no rows) as reported: rounded to :data:`COST_DECIMALS`."""
    return round(float(value or 0.0), COST_DECIMALS)


def _status_filter(status: str) -> ColumnElement[bool]:
    """The ``status`` filter of :meth:`UsageRepo.recent_usage`."""
    if status == "ok":
        return _usage.c.status < 400
    if status == "error":
        return _usage.c.status >= 400
    if status.isdigit():
        return _usage.c.status == int(status)
    raise ValueError("status must be 'ok', 'error' or an HTTP status code")


def _empty_figures() -> dict[str, Any]:
    return {
        "requests": 0,
        "errors": 0,
        "fallbacks": 0,
        "cost_usd": 0.0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "p50_latency_ms": None,
        "p95_latency_ms": None,
        "p50_ttft_ms": None,
        "p95_ttft_ms": None,
    }


def _nearest_rank(rank: ColumnElement[int], count: ColumnElement[int], pct: int) -> ColumnElement[bool]:
    """``rank`` is the nearest-rank ``pct``-th percentile position, ``ceil(count·pct/100)``, in integer
    arithmetic that SQLite and PostgreSQL evaluate alike."""
    return and_(count > 0, rank == (count * pct + 99) // 100)


async def _bucket_figures(
    conn: Any, window: ColumnElement[bool], bucket: ColumnElement[int]
) -> dict[int, dict[str, Any]]:
    """Per value of ``bucket``: counts and sums of the rows in ``window``, and the p50/p95 latency and
    TTFT of the successful ones (window functions: one sort per bucket, in the database)."""
    failed = and_(_usage.c.status >= 400, _usage.c.status != CLIENT_CLOSED_STATUS)
    fallback = and_(_usage.c.status < 400, _usage.c.attempts > 1)
    counts = (
        await conn.execute(
            select(
                bucket,
                func.count().label("requests"),
                func.sum(case((failed, 1), else_=0)).label("errors"),
                func.sum(case((fallback, 1), else_=0)).label("fallbacks"),
                func.sum(_usage.c.cost_usd).label("cost_usd"),
                func.sum(_usage.c.prompt_tokens).label("prompt_tokens"),
                func.sum(_usage.c.completion_tokens).label("completion_tokens"),
            )
            .where(window)
            .group_by(bucket.name)
        )
    ).mappings()
    out: dict[int, dict[str, Any]] = {}
    for r in counts:
        out[int(r["bucket"])] = {
            **_empty_figures(),
            "requests": int(r["requests"]),
            "errors": int(r["errors"] or 0),
            "fallbacks": int(r["fallbacks"] or 0),
            "cost_usd": usd_sum(r["cost_usd"]),
            "prompt_tokens": int(r["prompt_tokens"] or 0),
            "completion_tokens": int(r["completion_tokens"] or 0),
        }
    ttft_missing = case((_usage.c.ttft_ms.is_(None), 1), else_=0)
    ranked = (
        select(
            bucket,
            _usage.c.latency_ms,
            _usage.c.ttft_ms,
            func.row_number().over(partition_by=bucket, order_by=_usage.c.latency_ms).label("lrank"),
            func.count().over(partition_by=bucket).label("n"),
            func.row_number()
            .over(partition_by=bucket, order_by=(ttft_missing, _usage.c.ttft_ms))
            .label("trank"),
            func.count(_usage.c.ttft_ms).over(partition_by=bucket).label("tn"),
        )
        .where(window, _usage.c.status < 400)
        .subquery()
    )
    lat, ttft = ranked.c.latency_ms, ranked.c.ttft_ms
    pct = (
        await conn.execute(
            select(
                ranked.c.bucket,
                func.max(case((_nearest_rank(ranked.c.lrank, ranked.c.n, 50), lat))).label("p50_latency_ms"),
                func.max(case((_nearest_rank(ranked.c.lrank, ranked.c.n, 95), lat))).label("p95_latency_ms"),
                func.max(case((_nearest_rank(ranked.c.trank, ranked.c.tn, 50), ttft))).label("p50_ttft_ms"),
                func.max(case((_nearest_rank(ranked.c.trank, ranked.c.tn, 95), ttft))).label("p95_ttft_ms"),
            ).group_by(ranked.c.bucket)
        )
    ).mappings()
    for r in pct:
        figures = out.setdefault(int(r["bucket"]), _empty_figures())
        for k in ("p50_latency_ms", "p95_latency_ms", "p50_ttft_ms", "p95_ttft_ms"):
            figures[k] = float(r[k]) if r[k] is not None else None
    return out
