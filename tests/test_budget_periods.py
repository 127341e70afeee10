"""Budget periods reset at UTC calendar boundaries (API-8)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from omniroute.accounting.periods import period_bounds


def ts(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("period", "now", "start", "reset"),
    [
        ("daily", ts(2026, 12, 2, 23, 59, 59), ts(2026, 12, 2), ts(2026, 12, 3)),
        ("daily", ts(2026, 12, 3), ts(2026, 12, 3), ts(2026, 12, 4)),
        ("weekly", ts(2026, 12, 2, 12), ts(2026, 11, 30), ts(2026, 12, 7)),  # Wednesday → Monday
        ("weekly", ts(2026, 12, 6, 23, 59), ts(2026, 11, 30), ts(2026, 12, 7)),  # Sunday night
        ("monthly", ts(2026, 12, 31, 23), ts(2026, 12, 1), ts(2027, 1, 1)),
        ("monthly", ts(2028, 2, 29, 12), ts(2028, 2, 1), ts(2028, 3, 1)),
    ],
)
def test_period_bounds_are_utc_calendar_boundaries(
    period: str, now: float, start: float, reset: float
) -> None:
    assert period_bounds(period, now) == (start, reset)


def test_total_never_resets_and_an_unknown_period_is_an_error() -> None:
    assert period_bounds("total", ts(2026, 12, 2)) == (0.0, None)
    with pytest.raises(ValueError, match="hourly"):
        period_bounds("hourly", 0.0)
