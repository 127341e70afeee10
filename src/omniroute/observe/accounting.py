"""The gateway's two accounting writers (usage rows, routing decisions) with their on-disk spools
(:mod:`omniroute.observe.spool`) and the ``omniroute_accounting_spool_rows`` gauge."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from prometheus_client.metrics_core import GaugeMetricFamily

from omniroute.clock import Clock
from omniroute.observe.batch import BatchWriter
from omniroute.observe.spool import Spool

if TYPE_CHECKING:
    from omniroute.routing.decision import Decision

UsageSink = Callable[[list[dict[str, Any]]], Awaitable[None]]
DecisionSink = Callable[[list["Decision"]], Awaitable[None]]
SaveDecisions = Callable[[Iterable[tuple[str, float, bytes]]], Awaitable[None]]


def encode_decisions(batch: list[Decision]) -> list[dict[str, Any]]:
    """Decisions as spool rows ``{request_id, ts, data}`` (``data``: the stored JSON text)."""
    return [
        {
            "request_id": d.request_id,
            "ts": d.ts,
            "data": orjson.dumps(d.to_stored(), option=orjson.OPT_NON_STR_KEYS).decode(),
        }
        for d in batch
    ]


def accounting_writers(
    clock: Clock,
    data_dir: str | None,
    write_usage: UsageSink,
    write_decisions: DecisionSink,
    save_decisions: SaveDecisions,
    *,
    decision_backlog: int,
) -> tuple[BatchWriter[dict[str, Any]], BatchWriter[Decision]]:
    """The usage and decision writers, each spooling what the database refuses to
    ``<data_dir>/spool/{usage,decisions}.jsonl`` (``./data/spool`` without a data directory) and
    replaying it through ``write_usage`` / ``save_decisions``. Not started."""
    spool_dir = Path(data_dir or "data") / "spool"

    async def replay_decisions(rows: list[dict[str, Any]]) -> None:
        await save_decisions((r["request_id"], r["ts"], r["data"].encode()) for r in rows)

    usage = BatchWriter(
        write_usage,
        clock=clock,
        name="usage",
        spool=Spool(spool_dir / "usage.jsonl"),
        encode=list,
        replay=write_usage,
    )
    decisions = BatchWriter(
        write_decisions,
        clock=clock,
        name="decisions",
        max_pending=decision_backlog,
        spool=Spool(spool_dir / "decisions.jsonl"),
        encode=encode_decisions,
        replay=replay_decisions,
    )
    return usage, decisions


def spool_gauge(writers: Iterable[tuple[str, BatchWriter[Any] | None]]) -> GaugeMetricFamily:
    """``omniroute_accounting_spool_rows{writer}``: rows waiting on disk for the database."""
    g = GaugeMetricFamily(
        "omniroute_accounting_spool_rows",
        "Usage rows and decisions the database refused, waiting on disk to be written.",
        labels=["writer"],
    )
    for name, w in writers:
        g.add_metric([name], w.spooled if w is not None else 0)
    return g
