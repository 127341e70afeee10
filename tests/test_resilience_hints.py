"""Wait hints and quota headers (RESIL-2 hint forms, AUTO-3 quota)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from omniroute.resilience.hints import (
    parse_duration,
    parse_header_wait,
    parse_quota_headers,
    parse_text_wait,
    parse_wait_hint,
)

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("120ms", 0.12),
        ("1h2m3.5s", 3723.5),
        ("0.5s", 0.5),
        ("20", 20.0),
        ("1.5 seconds", 1.5),
    ],
)
def test_openai_duration_strings_parse_to_seconds(text: str, seconds: float) -> None:
    """RESIL-2: OpenAI ``x-ratelimit-reset-*`` duration forms."""
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5 parsecs", "-3", "1s later"])
def test_unparseable_durations_give_none(text: str) -> None:
    """RESIL-2: garbage is not a hint."""
    assert parse_duration(text) is None


def test_retry_after_seconds_header() -> None:
    """RESIL-2: ``Retry-After: 10`` is ten seconds."""
    assert parse_header_wait({"Retry-After": "10"}, NOW) == 10.0


def test_retry_after_http_date_header() -> None:
    """RESIL-2: ``Retry-After`` as an HTTP date counts from now."""
    when = datetime.fromtimestamp(NOW, tz=UTC) + timedelta(seconds=90)
    assert parse_header_wait({"retry-after": format_datetime(when, usegmt=True)}, NOW) == pytest.approx(90.0)


def test_retry_after_http_date_in_the_past_is_zero() -> None:
    """RESIL-2: a past date means no wait, never a negative one."""
    assert parse_header_wait({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, NOW) == 0.0


def test_retry_after_ms_wins_over_retry_after() -> None:
    """RESIL-2: ``retry-after-ms`` is the more precise hint."""
    assert parse_header_wait({"retry-after-ms": "1500", "Retry-After": "2"}, NOW) == 1.5


def test_openai_reset_headers_take_the_max() -> None:
    """RESIL-2: without an exhausted dimension the longest reset is the hint."""
    headers = {"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}
    assert parse_header_wait(headers, NOW) == 360.0


def test_openai_reset_header_of_the_exhausted_dimension_wins() -> None:
    """RESIL-2: when one dimension has 0 remaining, its reset is the relevant one."""
    headers = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "20s",
        "x-ratelimit-remaining-tokens": "5000",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    assert parse_header_wait(headers, NOW) == 20.0


def test_plain_ratelimit_reset_epoch_ms() -> None:
    """RESIL-2: OpenRouter-style ``X-RateLimit-Reset`` in epoch milliseconds."""
    assert parse_header_wait({"X-RateLimit-Reset": str(int((NOW + 42) * 1000))}, NOW) == pytest.approx(42.0)


def test_anthropic_reset_rfc3339() -> None:
    """RESIL-2: ``anthropic-ratelimit-*-reset`` is an RFC 3339 instant."""
    reset = datetime.fromtimestamp(NOW + 30, tz=UTC).isoformat().replace("+00:00", "Z")
    headers = {"anthropic-ratelimit-requests-reset": reset, "anthropic-ratelimit-requests-remaining": "0"}
    assert parse_header_wait(headers, NOW) == pytest.approx(30.0)


def test_no_hint_headers_give_none() -> None:
    """RESIL-2: no hint → the caller uses exponential backoff."""
    assert parse_header_wait({"content-type": "application/json"}, NOW) is None
    assert parse_header_wait({}, NOW) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("Rate limit reached. Please try again in 20s.", 20.0),
        ("Please try again in 1.5 seconds", 1.5),
        ("retry after 30 seconds", 30.0),
        ("Limit reached for requests. Please try again in 6m0s. Visit ...", 360.0),
        ("Resource has been exhausted. Please retry in 2.4s.", 2.4),
        ("Please try again in 120ms.", 0.12),
        ("Try again in 1 minute", 60.0),
        ('"details": [{"@type": "RetryInfo", "retryDelay": "37s"}]', 37.0),
    ],
)
def test_message_texts_give_wait_hints(text: str, seconds: float) -> None:
    """RESIL-2: "try again in Ns" texts of OpenAI, Anthropic, Gemini and friends."""
    assert parse_text_wait(text) == pytest.approx(seconds)


def test_text_without_hint_gives_none() -> None:
    """RESIL-2: no number, no hint."""
    assert parse_text_wait("Please try again later.") is None
    assert parse_text_wait("") is None


def test_headers_win_over_text() -> None:
    """RESIL-2: headers are checked first, then the message."""
    assert parse_wait_hint({"Retry-After": "5"}, "try again in 20s", NOW) == 5.0
    assert parse_wait_hint({}, "try again in 20s", NOW) == 20.0
    assert parse_wait_hint(None, "nothing", NOW) is None


def test_quota_snapshot_from_openai_headers() -> None:
    """AUTO-3 quota: remaining fraction is the minimum over dimensions; reset of the binding one."""
    headers = {
        "x-ratelimit-limit-requests": "100",
        "x-ratelimit-remaining-requests": "90",
        "x-ratelimit-reset-requests": "1s",
        "x-ratelimit-limit-tokens": "10000",
        "x-ratelimit-remaining-tokens": "2500",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    snap = parse_quota_headers(headers, NOW)
    assert snap is not None
    assert snap.remaining_fraction == pytest.approx(0.25)
    assert snap.reset_at == pytest.approx(NOW + 360)
    assert snap.observed_at == NOW


def test_quota_snapshot_from_anthropic_headers() -> None:
    """AUTO-3 quota: Anthropic ``anthropic-ratelimit-*`` headers."""
    reset = datetime.fromtimestamp(NOW + 60, tz=UTC).isoformat()
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "5",
        "anthropic-ratelimit-requests-reset": reset,
        "anthropic-ratelimit-tokens-limit": "40000",
        "anthropic-ratelimit-tokens-remaining": "39000",
    }
    snap = parse_quota_headers(headers, NOW)
    assert snap is not None
    assert snap.remaining_fraction == pytest.approx(0.1)
    assert snap.reset_at == pytest.approx(NOW + 60)


def test_quota_snapshot_needs_remaining_and_limit() -> None:
    """AUTO-3 quota: no dimension with both numbers → no snapshot."""
    assert parse_quota_headers({"x-ratelimit-remaining-requests": "3"}, NOW) is None
    assert parse_quota_headers({}, NOW) is None
