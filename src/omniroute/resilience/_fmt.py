"""Time formatting shared by exclusion reasons, events and the resilience snapshot."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from omniroute.errors import UpstreamError


def hms(epoch_s: float) -> str:
    """Local wall-clock ``HH:MM:SS`` of an instant (epoch s)."""
    return time.strftime("%H:%M:%S", time.localtime(epoch_s))


def until_text(until: float, now: float) -> str:
    """``HH:MM:SS (N s)``: the local time of a deadline and the whole seconds left (≥ 0)."""
    return f"{hms(until)} ({max(0, math.ceil(until - now))} s)"


def iso(epoch_s: float | None) -> str | None:
    """ISO-8601 UTC form of an instant, ``None`` for ``None``."""
    if epoch_s is None:
        return None
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat().replace("+00:00", "Z")


def short(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def reset_note(err: UpstreamError, now: float, max_hint_s: float | None) -> str:
    """``resets <ISO instant>`` when ``err``'s wait hint (seconds from ``now``, epoch s) is longer than
    ``max_hint_s`` — the state then holds the target for less than the upstream's own reset — else
    ``""``."""
    hint = err.retry_after_s
    if hint is None or max_hint_s is None or hint <= max_hint_s:
        return ""
    return f"resets {iso(now + hint)}"


def with_status(what: str, err: UpstreamError, note: str = "") -> str:
    """``what (status, note)``, leaving out whichever of the status and the note is missing."""
    inner = ", ".join(x for x in (str(err.upstream_status or ""), note) if x)
    return f"{what} ({inner})" if inner else what
