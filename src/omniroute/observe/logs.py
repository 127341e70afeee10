"""Process logging: human-readable lines by default, one JSON object per line on request, written off
the event loop, with secrets redacted from every line.

:func:`setup_logging` is called once per process by ``omniroute serve`` (and each of its workers): the
root logger gets a :class:`logging.handlers.QueueHandler`, and a :class:`~logging.handlers.QueueListener`
thread formats and writes the records to stderr, so a request only pays for building a record and a
queue put. The format is ``text`` (``2026-01-02 10:00:00,123 INFO omniroute: …``) or ``json``
(``{"ts": "2026-01-02T10:00:00.123Z", "level": "INFO", "logger": "omniroute", "message": "…", …}``),
chosen by ``--log-format``, ``$OMNIROUTE_LOG_FORMAT`` or ``server.log_format``.

Every formatted line goes through :func:`omniroute.resilience.redact.redact` before it is written: a key
that reaches a log message by any path (an upstream's echo, an exception's text, a URL with
``?key=…``) is replaced by ``[redacted]``.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import os
import queue
import sys
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from omniroute.resilience.redact import redact

LOG_FORMATS: Final = ("text", "json")
"""Accepted values of ``--log-format`` / ``server.log_format``."""
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS_ATTR: Final = "fields"
"""Name of the ``LogRecord`` attribute holding structured fields (a dict): JSON lines carry them as
top-level keys; text lines show only the message, which repeats them as ``key=value``."""
SUMMARY_ATTR: Final = "summary"
"""Name of the ``LogRecord`` attribute with the short message JSON lines use instead of the text one
(the fields are already keys of their own)."""

_listener: logging.handlers.QueueListener | None = None


CLIENT_TEXT_FIELDS: Final = frozenset({"request_id", "path", "requested_model", "model", "error"})
"""Structured fields whose text can come from outside the gateway (a client's model string — any
``provider/<name>`` is routed as sent —, request id or path, an upstream's error message): redacted in
every line. The other fields are the gateway's
own identifiers (provider, connection, strategy, API key name) and numbers, which never hold a secret,
so a structured record is redacted field by field instead of as a whole line (a tenth of the cost)."""


def redact_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``fields`` with the :data:`CLIENT_TEXT_FIELDS` redacted."""
    return {k: redact(v) if k in CLIENT_TEXT_FIELDS and isinstance(v, str) else v for k, v in fields.items()}


def fields_text(summary: str, fields: dict[str, Any], skip: frozenset[str] = frozenset()) -> str:
    """``summary`` followed by ``key=value`` for each field that is set and not in ``skip`` (values
    with a space are quoted)."""
    parts = [summary]
    for k, v in fields.items():
        if v is None or k in skip:
            continue
        text = str(v)
        parts.append(f"{k}={text!r}" if " " in text or not text else f"{k}={text}")
    return " ".join(parts)


def _structured(record: logging.LogRecord) -> tuple[str, dict[str, Any]] | None:
    fields = getattr(record, FIELDS_ATTR, None)
    if not isinstance(fields, dict):
        return None
    return redact(str(getattr(record, SUMMARY_ATTR, None) or "")), redact_fields(fields)


class TextFormatter(logging.Formatter):
    """``TEXT_FORMAT`` lines, redacted. A structured record (``record.fields``, the access line) reads
    ``SUMMARY key=value …``, its summary fields not repeated."""

    def __init__(self, skip: frozenset[str] = frozenset({"method", "path", "status"})) -> None:
        super().__init__(TEXT_FORMAT)
        self.skip = skip

    def format(self, record: logging.LogRecord) -> str:
        structured = _structured(record)
        if structured is None:
            return redact(super().format(record))
        summary, fields = structured
        record.msg, record.args = fields_text(summary, fields, self.skip), None
        return super().format(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``,
    ``pid`` (the worker process), ``message``, the record's structured fields (``record.fields``)
    and, for an exception, ``exc`` (the formatted traceback); redacted as a whole, or field by field
    for a structured record (the redactor never matches quotes or backslashes, so the line stays valid
    JSON)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")[:-6] + "Z",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
        }
        structured = _structured(record)
        if structured is not None:
            out["message"], fields = structured
            out.update(fields)
            return orjson.dumps(out, default=str).decode()
        out["message"] = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exc"] = record.exc_text
        return redact(orjson.dumps(out, default=str).decode())


class _DeferredQueueHandler(logging.handlers.QueueHandler):
    """A queue handler that leaves records with structured fields (the access line) to be rendered by
    the listener thread; other records are rendered here as usual (their ``args`` may be mutable)."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        if hasattr(record, FIELDS_ATTR):
            return record
        prepared: logging.LogRecord = super().prepare(record)
        return prepared


def formatter_for(fmt: str) -> logging.Formatter:
    """The formatter for ``fmt`` (one of :data:`LOG_FORMATS`); ``ValueError`` for anything else."""
    if fmt == "json":
        return JsonFormatter()
    if fmt == "text":
        return TextFormatter()
    raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")


def setup_logging(fmt: str | None = None, level: str | None = None) -> None:
    """Route every log record of this process through one queue to a writer thread on stderr.

    ``fmt``: ``text`` or ``json`` (default ``$OMNIROUTE_LOG_FORMAT``, else ``text``); ``level``: a
    level name (default ``$OMNIROUTE_LOG_LEVEL``, else ``INFO``). Calling it again replaces the
    previous setup (a worker process re-applies the format it was given). Raises ``ValueError`` for
    an unknown format."""
    global _listener
    formatter = formatter_for(fmt or os.environ.get("OMNIROUTE_LOG_FORMAT") or "text")
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(formatter)
    if _listener is not None:
        _listener.stop()
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    _listener = logging.handlers.QueueListener(records, stream, respect_handler_level=False)
    _listener.start()
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(_DeferredQueueHandler(records))
    root.setLevel((level or os.environ.get("OMNIROUTE_LOG_LEVEL") or "INFO").upper())
    # Neither format shows the caller's file and line, thread or process name: skip collecting them
    # for every record (the logging documentation's "Optimization" section).
    logging._srcfile = None
    logging.logThreads = False
    logging.logMultiprocessing = False
    logging.getLogger("alembic").setLevel(logging.WARNING)  # migration chatter on every start
    atexit.register(flush_logging)


def flush_logging() -> None:
    """Write out every queued record and stop the writer thread (at exit; idempotent)."""
    global _listener
    if _listener is not None:
        _listener.stop()
        _listener = None


__all__ = [
    "CLIENT_TEXT_FIELDS",
    "LOG_FORMATS",
    "JsonFormatter",
    "TextFormatter",
    "fields_text",
    "flush_logging",
    "formatter_for",
    "redact_fields",
    "setup_logging",
]
