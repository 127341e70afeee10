"""The on-disk spool of accounting rows the database could not take (usage rows, routing decisions).

When a batch cannot be written (the database is locked by another process, unreachable, or full),
:class:`~omniroute.observe.batch.BatchWriter` appends it here as JSON lines instead of holding it
in memory, and replays the spool, oldest first, once writes succeed again. The file lives in the
data directory (``<data dir>/spool/<name>.jsonl``), is created 0600 (it holds conversations' routing
and spend), and is fsynced after each append, so spooled rows survive a crash or ``kill -9``. It is
bounded by ``max_rows``: past that the oldest rows are dropped with a logged count (the database has
then been failing for a long time, and the gateway must not fill the disk).

Rows must be JSON values (dicts of str, numbers, bools, ``None``, lists); each writer encodes its own
rows (:meth:`BatchWriter` ``encode``/``replay``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("omniroute.observe")

#: rows kept on disk per writer at most (about 100 MB of usage rows)
DEFAULT_MAX_ROWS = 200_000


class Spool:
    """One JSONL spool file (see the module docstring). ``rows`` is the number of rows it holds."""

    def __init__(self, path: Path, *, max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self.path = path
        self.max_rows = max_rows
        self.dropped = 0
        self.rows = sum(1 for _ in self._lines()) if path.exists() else 0

    def _lines(self) -> Iterator[bytes]:
        with self.path.open("rb") as f:
            for line in f:
                if line.strip():
                    yield line

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Append ``rows`` and fsync (raises ``OSError`` when the disk refuses: the caller keeps
        them in memory). Past ``max_rows`` the oldest rows are dropped."""
        if not rows:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = b"".join(orjson.dumps(r) + b"\n" for r in rows)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.rows += len(rows)
        if self.rows > self.max_rows:
            self._trim(self.rows - self.max_rows)

    def _trim(self, n: int) -> None:
        kept = list(self._lines())[n:]
        self._rewrite(kept)
        self.dropped += n
        log.warning(
            "%s: the accounting spool is full; %d oldest rows dropped so far", self.path, self.dropped
        )

    def _rewrite(self, lines: list[bytes]) -> None:
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"".join(lines))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        self.rows = len(lines)

    def head(self, n: int) -> tuple[list[dict[str, Any]], int]:
        """The oldest ``n`` rows and how many lines they took (an unreadable line, e.g. one cut by a
        crash mid-write, is skipped but counted, so :meth:`pop` removes it too)."""
        out: list[dict[str, Any]] = []
        lines = 0
        if not self.rows:
            return out, lines
        for line in self._lines():
            lines += 1
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                log.warning("%s: skipping an unreadable spooled row", self.path)
                continue
            out.append(row)
            if len(out) >= n:
                break
        return out, lines

    def pop(self, n: int) -> None:
        """Remove the oldest ``n`` lines (after they were written to the database)."""
        lines = list(self._lines())
        if n >= len(lines):
            self.path.unlink(missing_ok=True)
            self.rows = 0
        else:
            self._rewrite(lines[n:])
