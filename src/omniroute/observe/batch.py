"""A batched background writer: rows are queued on the hot path and written off it (OBS-1).

``put`` never blocks and never touches the database; a background task drains the queue in batches
(up to ``max_batch`` rows or every ``interval_s`` seconds on the injected clock) into ``sink``.
``stop`` flushes everything still queued, so nothing is lost on shutdown. A failing sink is retried
with backoff and rows are kept (bounded by ``max_pending``; past that the oldest are dropped with a
logged count). With a :class:`~omniroute.observe.spool.Spool`, rows a failing sink could not take
move to that file instead (they survive a crash) and are replayed, oldest first, once it works again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from omniroute.clock import Clock, wait_any
from omniroute.observe.spool import Spool

T = TypeVar("T")
log = logging.getLogger("omniroute.observe")


class BatchWriter(Generic[T]):
    """Queue rows and write them in batches. ``sink(rows)`` persists one batch (e.g. one transaction);
    ``clock`` times the flush interval and the retry backoff (seconds)."""

    def __init__(
        self,
        sink: Callable[[list[T]], Awaitable[None]],
        *,
        clock: Clock,
        name: str,
        max_batch: int = 500,
        interval_s: float = 0.25,
        max_pending: int = 100_000,
        spool: Spool | None = None,
        encode: Callable[[list[T]], list[dict[str, Any]]] | None = None,
        replay: Callable[[list[dict[str, Any]]], Awaitable[None]] | None = None,
    ) -> None:
        self._spool = spool
        self._encode = encode
        self._replay = replay
        self._sink = sink
        self._clock = clock
        self._name = name
        self._max_batch = max_batch
        self._interval_s = interval_s
        self._pending: deque[T] = deque(maxlen=max_pending)
        self._wake = asyncio.Event()
        self._flushing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.written = 0
        self.dropped = 0

    def __len__(self) -> int:
        """Rows queued and not yet written."""
        return len(self._pending)

    def put(self, row: T) -> None:
        """Queue one row; O(1), never blocks (hot path)."""
        if len(self._pending) == self._pending.maxlen:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 10_000 == 0:
                log.warning(
                    "%s writer: the store is behind; %d oldest queued rows dropped so far",
                    self._name,
                    self.dropped,
                )
        self._pending.append(row)
        if len(self._pending) >= self._max_batch:
            self._wake.set()

    def start(self) -> None:
        """Start the background task on the running loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"batch-writer-{self._name}"
            )

    async def flush(self) -> None:
        """Write everything queued now (used by tests and on shutdown). Rows leave the queue only once
        ``sink`` took them, so a failed batch is retried whole; raises what ``sink`` raises."""
        async with self._flushing:  # one writer at a time, or two flushes would write a batch twice
            pending = self._pending
            while pending:
                batch = list(itertools.islice(pending, self._max_batch))
                dropped = self.dropped
                await self._sink(batch)
                # rows put meanwhile may have pushed the oldest, this batch's first, out of the queue
                for _ in range(max(0, len(batch) - (self.dropped - dropped))):
                    pending.popleft()
                self.written += len(batch)

    @property
    def spooled(self) -> int:
        """Rows waiting in the on-disk spool (0 without one)."""
        return self._spool.rows if self._spool is not None else 0

    async def _spill(self) -> None:
        """The sink failed: move the queued rows to the spool (kept in memory if the disk refuses)."""
        if self._spool is None or self._encode is None:
            return
        async with self._flushing:
            pending = self._pending
            while pending:
                batch = list(itertools.islice(pending, self._max_batch))
                try:
                    self._spool.append(self._encode(batch))
                except OSError:
                    log.exception("%s writer: cannot spool to %s", self._name, self._spool.path)
                    return
                for _ in batch:
                    pending.popleft()

    async def replay_spool(self) -> None:
        """Write the spooled rows to the sink, oldest first, one batch at a time; raises what the
        replay raises (the rows stay spooled)."""
        spool, replay = self._spool, self._replay
        if spool is None or replay is None:
            return
        async with self._flushing:
            while spool.rows:
                rows, lines = spool.head(self._max_batch)
                if rows:
                    await replay(rows)
                spool.pop(lines)
                self.written += len(rows)

    async def _run(self) -> None:
        delay = self._interval_s
        while not self._stopping:
            woken = asyncio.ensure_future(self._wake.wait())
            try:
                await wait_any(self._clock, (woken,), self._interval_s)
            finally:
                woken.cancel()
            self._wake.clear()
            try:
                await self.replay_spool()
                await self.flush()
                delay = self._interval_s
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._spill()
                if self._spool is not None:
                    log.warning(
                        "%s writer: the database refused a batch (%s); %d rows spooled to %s, retried",
                        self._name,
                        exc.__class__.__name__,
                        self._spool.rows,
                        self._spool.path,
                    )
                else:
                    log.exception(
                        "%s writer: batch failed; %d rows kept for retry", self._name, len(self._pending)
                    )
                delay = min(delay * 2, 5.0)
                await self._clock.sleep(delay)

    async def stop(self) -> None:
        """Stop the task and flush what is left (nothing is lost on a clean shutdown). A sink that hangs
        gets 10 s of real time to finish first: that bounds a shutdown on a stuck database, it is no
        routing timer."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._task, timeout=10)
            self._task = None
        try:
            await self.replay_spool()
            await self.flush()
        except Exception:
            await self._spill()
            if self._spool is not None and not self._pending:
                log.warning(
                    "%s writer: the database refused the final flush; %d rows kept in %s for the next start",
                    self._name,
                    self._spool.rows,
                    self._spool.path,
                )
            else:
                log.exception("%s writer: final flush failed; %d rows lost", self._name, len(self._pending))
        if self.dropped:
            log.warning("%s writer: %d rows dropped because the queue was full", self._name, self.dropped)
