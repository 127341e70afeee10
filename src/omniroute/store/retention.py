"""Retention: a background task that deletes usage rows and routing decisions older than
``retention_days`` (and expired stored responses), in batches, on the gateway's clock.

Each pass deletes :data:`PRUNE_BATCH` rows per table per transaction until a batch comes back short,
yielding to the event loop between batches, so a large backlog (the first pass after an upgrade) never
holds a long lock or stalls requests. Passes run every :data:`PRUNE_INTERVAL_S` seconds, the first
one :data:`FIRST_PASS_AFTER_S` after start. Several replicas pruning the same database is harmless:
a row is deleted once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from omniroute.clock import Clock

if TYPE_CHECKING:
    from omniroute.store.store import Store

__all__ = ["FIRST_PASS_AFTER_S", "PRUNE_BATCH", "PRUNE_INTERVAL_S", "RetentionPruner"]

log = logging.getLogger("omniroute.retention")

PRUNE_INTERVAL_S = 3600.0
"""Seconds between pruning passes: an hour keeps at most an hour of rows past the retention."""

FIRST_PASS_AFTER_S = 60.0
"""Seconds after start of the first pass (then every :data:`PRUNE_INTERVAL_S`)."""

PRUNE_BATCH = 5000
"""Rows deleted per table per transaction."""

DAY_S = 86_400.0


class RetentionPruner:
    """Prunes ``store`` every ``interval_s`` seconds of ``clock`` time: rows older than
    ``retention_days`` days (the config's ``retention_days``, default 30) go, ``batch`` per table per
    transaction. :meth:`start` begins the loop, :meth:`stop` cancels it; :meth:`prune_once` runs one
    pass (returns rows deleted per table). A failed pass (database unreachable) is logged and retried
    at the next interval; it never ends the task."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        retention_days: float,
        *,
        interval_s: float = PRUNE_INTERVAL_S,
        batch: int = PRUNE_BATCH,
    ) -> None:
        self.store = store
        self.clock = clock
        self.retention_s = retention_days * DAY_S
        self.interval_s = interval_s
        self.batch = batch
        self._task: asyncio.Task[None] | None = None

    async def prune_once(self) -> dict[str, int]:
        """Delete everything older than the retention (epoch cut-off ``now - retention``) in batches;
        returns the total deleted per table."""
        cutoff = self.clock.time() - self.retention_s
        total: dict[str, int] = {}
        while True:
            deleted = await self.store.prune_batch(cutoff, self.batch)
            for table, n in deleted.items():
                total[table] = total.get(table, 0) + n
            if deleted["usage_log"] < self.batch and deleted["routing_decisions"] < self.batch:
                break
            await self.clock.sleep(0)  # let requests run between batches
        if any(total.values()):
            log.info("retention: deleted %s (older than %.0f days)", total, self.retention_s / DAY_S)
        return total

    async def _run(self) -> None:
        delay = min(FIRST_PASS_AFTER_S, self.interval_s)
        while True:
            await self.clock.sleep(delay)  # asleep first: a start-up is never slowed by a backlog
            delay = self.interval_s
            try:
                await self.prune_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("retention: pruning failed, retrying in %.0fs: %s", self.interval_s, exc)

    def start(self) -> None:
        """Start the pruning loop on the running event loop."""
        self._task = asyncio.create_task(self._run(), name="retention")

    async def stop(self) -> None:
        """Cancel the loop and wait for it (a pass in progress is abandoned: it is one transaction)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
