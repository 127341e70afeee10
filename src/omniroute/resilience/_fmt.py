"""Time formatting shared by exclusion reasons, events and the resilience snapshot."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime


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
