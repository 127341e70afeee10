"""Upstream wait hints and quota headers (RESIL-2 hint forms; AUTO-3 ``quota``).

Owns the parsing of how long an upstream asks us to wait — ``retry-after-ms``, ``Retry-After``
(seconds or HTTP date), ``x-ratelimit-reset[-requests|-tokens]`` (OpenAI durations such as ``6m0s``),
``anthropic-ratelimit-*-reset`` (RFC 3339) and message texts ("try again in 20s", "Please retry in
2.4s", "Resets in 92h27m28s", "try again in 3 days", "resets at 2026-12-02T10:00:00Z", Gemini
``retryDelay``) — and of the remaining-quota headers into a :class:`QuotaSnapshot`.
All waits are seconds (float, ≥ 0); all instants epoch seconds. Pure functions, no state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from email.utils import parsedate_to_datetime

from omniroute.state.records import QuotaDimension, QuotaSnapshot

__all__ = [
    "parse_duration",
    "parse_header_wait",
    "parse_quota_headers",
    "parse_text_wait",
    "parse_wait_hint",
]

_UNIT_S = {"ms": 0.001, "w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
# One ``<number><unit>`` pair; pairs may be joined by spaces, commas or "and" ("1 hour and 5 minutes").
_PAIR = re.compile(
    r"\s*(?:(?:,|and)\s*)?(\d+(?:\.\d+)?)\s*"
    r"(ms|msecs?|milliseconds?|w|wks?|weeks?|d|days?|h|hrs?|hours?|m|mins?|minutes?|s|secs?|seconds?)"
    r"(?![a-z])",
    re.IGNORECASE,
)
# What leads a wait or reset hint in an error message: "try again in", "retry after", "resets in",
# "will reset at", "wait", "available again in", "renews on", "refreshes at" …
_TEXT_LEAD = re.compile(
    r"(?:try(?:ing)?\s+again|retry|resets?|resetting|wait|available(?:\s+again)?|renews?|refresh(?:es)?)"
    r"(?:\s+(?:in|after|for|at|on))?\s+(?:about\s+|approximately\s+|~\s*)?",
    re.IGNORECASE,
)
# An ISO 8601 / RFC 3339 date with optional time and zone ("2026-12-02T10:00:00Z", "2026-12-02
# 10:00 UTC", "2026-12-03"); a zone-less value is UTC.
_ISO_AT = re.compile(
    r"(\d{4}-\d{2}-\d{2})(?:[T ](\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?))?\s*(Z|UTC|GMT|[+-]\d{2}:?\d{2})?",
    re.IGNORECASE,
)
# A clock time ("10:00 UTC", "2:30 pm", "14:30:00Z"): the next such instant, UTC unless it says else.
_CLOCK_AT = re.compile(
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*([ap]\.?m\.?)?\s*(Z|UTC|GMT|[+-]\d{2}:?\d{2})?(?![\d:])",
    re.IGNORECASE,
)
_RETRY_DELAY = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')
_DIMENSIONS = ("requests", "tokens", "input-tokens", "output-tokens")


def _unit_seconds(unit: str) -> float:
    u = unit.lower()
    if u.startswith("ms") or u.startswith("milli"):
        return _UNIT_S["ms"]
    return _UNIT_S[u[0]]


def _duration_prefix(text: str, pos: int = 0) -> tuple[float, int] | None:
    """Sum the ``<number><unit>`` pairs starting at ``pos``; returns (seconds, end) or ``None``."""
    total = 0.0
    end = pos
    found = False
    while True:
        m = _PAIR.match(text, end)
        if m is None:
            break
        total += float(m.group(1)) * _unit_seconds(m.group(2))
        end = m.end()
        found = True
    return (total, end) if found else None


def parse_duration(text: str) -> float | None:
    """Seconds in an OpenAI/Go duration (``"1s"``, ``"6m0s"``, ``"120ms"``, ``"1h2m3.5s"``), a worded
    one (``"1.5 seconds"``) or a bare number of seconds; ``None`` if it is none of these."""
    s = text.strip()
    if not s:
        return None
    try:
        value = float(s)
    except ValueError:
        pass
    else:
        return value if value >= 0 else None
    parsed = _duration_prefix(s)
    if parsed is None or parsed[1] != len(s):
        return None
    return parsed[0]


def _epoch_or_delta(text: str, now: float) -> float | None:
    """A reset value as seconds from ``now``: epoch ms (> 1e12), epoch s (> 1e9), a delta in seconds,
    a duration string or an RFC 3339 timestamp."""
    s = text.strip()
    try:
        value = float(s)
    except ValueError:
        dur = parse_duration(s)
        if dur is not None:
            return dur
        at = _rfc3339(s)
        return None if at is None else max(0.0, at - now)
    if value > 1e12:
        return max(0.0, value / 1000.0 - now)
    if value > 1e9:
        return max(0.0, value - now)
    return value if value >= 0 else None


def _rfc3339(text: str) -> float | None:
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if dt.tzinfo is None:
        return None
    return dt.timestamp()


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _reset_over_dimensions(h: dict[str, str], prefix: str, now: float) -> float | None:
    """Wait until reset for the dimensions under ``prefix``: the longest reset among dimensions whose
    remaining is 0 when any is, else the longest reset present (kept simple on purpose)."""
    exhausted: list[float] = []
    present: list[float] = []
    for dim in _DIMENSIONS:
        raw = h.get(f"{prefix}reset-{dim}") if prefix == "x-ratelimit-" else h.get(f"{prefix}{dim}-reset")
        if raw is None:
            continue
        wait = _epoch_or_delta(raw, now)
        if wait is None:
            continue
        present.append(wait)
        remaining = (
            h.get(f"{prefix}remaining-{dim}")
            if prefix == "x-ratelimit-"
            else h.get(f"{prefix}{dim}-remaining")
        )
        if remaining is not None and remaining.strip() in ("0", "0.0"):
            exhausted.append(wait)
    if exhausted:
        return max(exhausted)
    return max(present) if present else None


def parse_header_wait(headers: Mapping[str, str], now: float) -> float | None:
    """The upstream's wait hint from response headers, in seconds, or ``None`` (RESIL-2).

    Precedence: ``retry-after-ms`` > ``Retry-After`` (seconds or HTTP date, relative to ``now``) >
    ``x-ratelimit-reset-requests|tokens`` (OpenAI durations) or plain ``x-ratelimit-reset`` (seconds,
    epoch s or epoch ms) > ``anthropic-ratelimit-*-reset`` (RFC 3339). Header names are matched
    case-insensitively; dates in the past give 0.
    """
    if not headers:
        return None
    h = _lower(headers)
    raw = h.get("retry-after-ms")
    if raw is not None:
        try:
            ms = float(raw.strip())
        except ValueError:
            ms = -1.0
        if ms >= 0:
            return ms / 1000.0
    raw = h.get("retry-after")
    if raw is not None:
        wait = _retry_after(raw, now)
        if wait is not None:
            return wait
    wait = _reset_over_dimensions(h, "x-ratelimit-", now)
    if wait is not None:
        return wait
    raw = h.get("x-ratelimit-reset")
    if raw is not None:
        wait = _epoch_or_delta(raw, now)
        if wait is not None:
            return wait
    return _reset_over_dimensions(h, "anthropic-ratelimit-", now)


def _retry_after(raw: str, now: float) -> float | None:
    s = raw.strip()
    try:
        value = float(s)
    except ValueError:
        pass
    else:
        return value if value >= 0 else None
    try:
        dt = parsedate_to_datetime(s)
    except (TypeError, ValueError, IndexError):
        return None
    if dt.tzinfo is None:  # RFC 9110 dates are GMT
        return None
    return max(0.0, dt.timestamp() - now)


def _absolute_at(text: str, pos: int, now: float) -> float | None:
    """Seconds from ``now`` to the date or clock time written at ``pos``, or ``None``."""
    m = _ISO_AT.match(text, pos)
    if m is not None:
        day, clock, zone = m.groups()
        try:
            at = datetime.fromisoformat(f"{day}T{clock or '00:00'}").replace(tzinfo=_zone(zone))
        except ValueError:
            return None
        return max(0.0, at.timestamp() - now)
    m = _CLOCK_AT.match(text, pos)
    if m is None:
        return None
    hour, minute, second = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    meridiem = (m.group(4) or "").replace(".", "").lower()
    if meridiem:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if meridiem == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    tz = _zone(m.group(5))
    today = datetime.fromtimestamp(now, tz)
    at = today.replace(hour=hour, minute=minute, second=second, microsecond=0)
    if at.timestamp() <= now:  # the next such time: tomorrow
        at += timedelta(days=1)
    return at.timestamp() - now


def _zone(text: str | None) -> tzinfo:
    """``Z``/``UTC``/``GMT``/none → UTC; ``+02:00``/``-0500`` → that fixed offset."""
    if not text or text.upper() in ("Z", "UTC", "GMT"):
        return UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def parse_text_wait(text: str, now: float | None = None) -> float | None:
    """A wait or reset hint in an error message, in seconds, or ``None`` (RESIL-2, RESIL-13).

    A hint is a lead ("try again", "retry", "resets", "wait", "available again", "renews",
    "refreshes", optionally followed by in/after/for/at/on) and then either a duration — "20s",
    "1.5 seconds", "6m0s", "92h27m28s", "1h 5m", "1 hour and 5 minutes", "3 days", "2 weeks" — or,
    when ``now`` (epoch s) is given, an instant: an ISO 8601 date ("2026-12-02T10:00:00Z",
    "2026-12-02 10:00 UTC", "2026-12-03" = its midnight UTC) or a clock time ("10:00 UTC", "2:30 pm",
    the next such time; UTC unless an offset is written). Gemini's ``"retryDelay": "37s"`` detail is
    read too. The first parseable hint wins; instants in the past give 0.
    """
    if not text:
        return None
    for m in _TEXT_LEAD.finditer(text):
        parsed = _duration_prefix(text, m.end())
        if parsed is not None:
            return parsed[0]
        if now is not None:
            wait = _absolute_at(text, m.end(), now)
            if wait is not None:
                return wait
    m2 = _RETRY_DELAY.search(text)
    if m2 is not None:
        return float(m2.group(1))
    return None


def parse_wait_hint(headers: Mapping[str, str] | None, text: str, now: float) -> float | None:
    """Headers first (:func:`parse_header_wait`), then the message text (:func:`parse_text_wait`,
    instants resolved against ``now``, epoch s); seconds or ``None``."""
    if headers:
        wait = parse_header_wait(headers, now)
        if wait is not None:
            return wait
    return parse_text_wait(text, now)


def _num(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        return float(raw.strip())
    except ValueError:
        return None


def parse_quota_headers(headers: Mapping[str, str] | None, now: float) -> QuotaSnapshot | None:
    """Remaining upstream quota from response headers, or ``None`` when no dimension reports both a
    remaining count and a limit.

    Reads OpenAI ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``, plain
    ``x-ratelimit-{limit,remaining,reset}`` (OpenRouter, Groq…), and Anthropic
    ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``.
    ``remaining_fraction`` is the minimum over dimensions; ``reset_at`` (epoch s) is the reset of
    that binding dimension, else the latest reset seen.
    """
    if not headers:
        return None
    # Runs on every successful response: only rate-limit headers are looked at.
    h = {lk: v for k, v in headers.items() if "ratelimit" in (lk := k.lower())}
    if not h:
        return None
    dims: list[QuotaDimension] = []

    def add(name: str, remaining: str | None, limit: str | None, reset: str | None) -> None:
        if remaining is None and limit is None:
            return
        wait = _epoch_or_delta(reset, now) if reset is not None else None
        dims.append(
            QuotaDimension(
                name=name,
                remaining=_num(remaining),
                limit=_num(limit),
                reset_at=None if wait is None else now + wait,
            )
        )

    for dim in _DIMENSIONS:
        add(
            dim,
            h.get(f"x-ratelimit-remaining-{dim}"),
            h.get(f"x-ratelimit-limit-{dim}"),
            h.get(f"x-ratelimit-reset-{dim}"),
        )
        add(
            f"anthropic-{dim}",
            h.get(f"anthropic-ratelimit-{dim}-remaining"),
            h.get(f"anthropic-ratelimit-{dim}-limit"),
            h.get(f"anthropic-ratelimit-{dim}-reset"),
        )
    add("default", h.get("x-ratelimit-remaining"), h.get("x-ratelimit-limit"), h.get("x-ratelimit-reset"))

    scored = [(d.fraction, d) for d in dims if d.fraction is not None]
    if not scored:
        return None
    fraction, binding = min(scored, key=lambda x: x[0] if x[0] is not None else 1.0)
    assert fraction is not None
    reset_at = binding.reset_at
    if reset_at is None:
        resets = [d.reset_at for d in dims if d.reset_at is not None]
        reset_at = max(resets) if resets else None
    return QuotaSnapshot(
        remaining_fraction=fraction, reset_at=reset_at, observed_at=now, dimensions=tuple(dims)
    )
