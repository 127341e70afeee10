"""Budget periods of an API key: the UTC calendar boundaries a key's spend resets at (API-8).

``daily`` resets at 00:00 UTC, ``weekly`` at 00:00 UTC on Monday (ISO 8601 weeks), ``monthly`` at
00:00 UTC on the first of the month, ``total`` never. Times are epoch seconds read from the gateway's
injected clock, so tests move across a boundary with a fake clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final, Literal, get_args

__all__ = ["BUDGET_PERIODS", "BudgetPeriod", "period_bounds"]

BudgetPeriod = Literal["daily", "weekly", "monthly", "total"]
BUDGET_PERIODS: Final[tuple[str, ...]] = get_args(BudgetPeriod)
"""Every accepted ``budget_period`` value; ``total`` (a lifetime cap) is the default."""


def period_bounds(period: str, now: float) -> tuple[float, float | None]:
    """``(start, reset)`` of the period containing ``now`` (epoch seconds): ``start`` is the UTC
    boundary the spend was last reset at (0.0 for ``total``) and ``reset`` the next one (``None`` for
    ``total``). Raises ``ValueError`` for an unknown period."""
    if period == "total":
        return 0.0, None
    t = datetime.fromtimestamp(now, UTC)
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "daily":
        start, end = day, day + timedelta(days=1)
    elif period == "weekly":
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
    elif period == "monthly":
        start = day.replace(day=1)
        end = (
            start.replace(year=start.year + 1, month=1)
            if start.month == 12
            else start.replace(month=start.month + 1)
        )
    else:
        raise ValueError(f"unknown budget period {period!r} (expected one of {', '.join(BUDGET_PERIODS)})")
    return start.timestamp(), end.timestamp()
