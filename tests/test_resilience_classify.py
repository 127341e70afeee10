"""Failure classification table and transport exceptions (RESIL-5, RESIL-9)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest

from omniroute.errors import (
    AuthInvalid,
    ConnectionFailed,
    ContentFiltered,
    ContextOverflow,
    ModelUnavailable,
    Overloaded,
    QuotaExhausted,
    RateLimited,
    ServerError,
    StreamBroken,
    Timeout,
    UpstreamBadRequest,
    UpstreamError,
)
from omniroute.resilience.classify import (
    RULES,
    Rule,
    classify_exception,
    classify_http,
    error_from_payload,
    extract_error,
)

NOW = 1_700_000_000.0


def openai(message: str, type_: str = "invalid_request_error", code: str | None = None) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "code": code, "param": None}})


def anthropic(type_: str, message: str) -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": type_, "message": message}})


def gemini(code: int, status: str, message: str, details: list[dict[str, Any]] | None = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        err["details"] = details
    return orjson.dumps({"error": err})


def classify(status: int, body: bytes, headers: dict[str, str] | None = None) -> UpstreamError:
    return classify_http(status, headers or {}, body, provider="p", now=NOW)


CASES: list[tuple[str, int, bytes, type[UpstreamError]]] = [
    # RESIL-2 rate limits
    (
        "openai 429 rpm",
        429,
        openai(
            "Rate limit reached for gpt-4o on requests per min (RPM): Limit 3. "
            "Please try again in 20s. Add a payment method at /account/billing.",
            "requests",
            "rate_limit_exceeded",
        ),
        RateLimited,
    ),
    (
        "anthropic 429",
        429,
        anthropic("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
        RateLimited,
    ),
    ("plain 429", 429, b"Too Many Requests", RateLimited),
    ("rate limit text on 400", 400, openai("Rate limit exceeded, slow down"), RateLimited),
    ("too many requests text on 500", 500, b"too many requests", RateLimited),
    # Gemini's generic per-minute 429 only *suggests* checking quota: transient, not exhausted.
    (
        "gemini resource exhausted",
        429,
        gemini(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
        RateLimited,
    ),
    (
        "gemini quota exceeded",
        429,
        gemini(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
        ),
        QuotaExhausted,
    ),
    (
        "gemini per-minute quota",
        429,
        gemini(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [{"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
            ],
        ),
        RateLimited,
    ),
    ("gemini resource exhausted bare", 429, gemini(429, "RESOURCE_EXHAUSTED", "Try later"), RateLimited),
    # RESIL-2 overload
    ("503", 503, b"Service Unavailable", Overloaded),
    ("anthropic 529 overloaded", 529, anthropic("overloaded_error", "Overloaded"), Overloaded),
    ("anthropic overloaded on 500", 500, anthropic("overloaded_error", "Overloaded"), Overloaded),
    (
        "gemini unavailable",
        503,
        gemini(503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
        Overloaded,
    ),
    ("overloaded text on 500", 500, b"server overloaded", Overloaded),
    # RESIL-1 server errors
    ("408", 408, b"Request Timeout", ServerError),
    ("409", 409, b"Conflict", ServerError),
    ("500", 500, openai("The server had an error", "server_error"), ServerError),
    ("502", 502, b"<html>Bad Gateway</html>", ServerError),
    ("504", 504, b"", ServerError),
    ("520", 520, b"", ServerError),
    # RESIL-2 auth
    (
        "openai 401",
        401,
        openai("Incorrect API key provided: sk-abc.", "invalid_request_error", "invalid_api_key"),
        AuthInvalid,
    ),
    ("anthropic 401", 401, anthropic("authentication_error", "invalid x-api-key"), AuthInvalid),
    (
        "gemini 400 bad key",
        400,
        gemini(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            [{"reason": "API_KEY_INVALID"}],
        ),
        AuthInvalid,
    ),
    ("plain 403", 403, b"Forbidden", AuthInvalid),
    # RESIL-3 quota / billing / model access
    ("402", 402, b"Payment Required", QuotaExhausted),
    (
        "openai insufficient_quota",
        429,
        openai(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        ),
        QuotaExhausted,
    ),
    (
        "anthropic credit balance",
        400,
        anthropic("invalid_request_error", "Your credit balance is too low to access the Anthropic API."),
        QuotaExhausted,
    ),
    ("quota exceeded text 400", 400, b'{"message": "Quota exceeded for this key"}', QuotaExhausted),
    ("billing text", 400, openai("Billing hard limit has been reached"), QuotaExhausted),
    ("payment required text", 400, b"payment required", QuotaExhausted),
    ("403 quota", 403, openai("You have exceeded your quota"), QuotaExhausted),
    (
        "403 no access to model",
        403,
        openai("Project `proj_1` does not have access to model `gpt-4o`"),
        QuotaExhausted,
    ),
    (
        "anthropic 403 permission",
        403,
        anthropic("permission_error", "Your API key does not have permission to use the specified resource."),
        QuotaExhausted,
    ),
    # RESIL-3 model not found
    ("404", 404, b"Not Found", ModelUnavailable),
    (
        "openai model does not exist",
        404,
        openai(
            "The model `gpt-5` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
        ModelUnavailable,
    ),
    (
        "model_not_found on 400",
        400,
        openai("nope", "invalid_request_error", "model_not_found"),
        ModelUnavailable,
    ),
    (
        "gemini model is not found",
        404,
        gemini(404, "NOT_FOUND", "models/gemini-9 is not found for API version v1beta"),
        ModelUnavailable,
    ),
    ("unknown model 400", 400, b'{"detail": "Unknown model: foo"}', ModelUnavailable),
    (
        "ollama not found",
        404,
        b'{"error": "model \'llama9\' not found, try pulling it first"}',
        ModelUnavailable,
    ),
    ("406", 406, b"Not Acceptable", ModelUnavailable),
    # RESIL-5 context overflow
    (
        "openai context",
        400,
        openai(
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 12000 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        ContextOverflow,
    ),
    (
        "openai context text only",
        400,
        openai("This model's maximum context length is 8192 tokens."),
        ContextOverflow,
    ),
    (
        "anthropic prompt too long",
        400,
        anthropic("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
        ContextOverflow,
    ),
    (
        "anthropic max_tokens",
        400,
        anthropic(
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000",
        ),
        ContextOverflow,
    ),
    (
        "gemini token count",
        400,
        gemini(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        ),
        ContextOverflow,
    ),
    (
        "llama.cpp",
        400,
        orjson.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5000,
                    "n_ctx": 4096,
                }
            }
        ),
        ContextOverflow,
    ),
    (
        "llama.cpp context shift",
        500,
        b'{"error": {"code": 500, "message": "context shift is disabled"}}',
        ContextOverflow,
    ),
    (
        "vllm",
        400,
        orjson.dumps(
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 "
                "tokens. However, you requested 5000 tokens in the messages.",
                "type": "BadRequestError",
                "code": 400,
            }
        ),
        ContextOverflow,
    ),
    (
        "vllm longer",
        400,
        b'{"message": "The prompt is longer than the model\'s context length"}',
        ContextOverflow,
    ),
    (
        "mistral",
        400,
        orjson.dumps(
            {
                "object": "error",
                "message": "Prompt contains 40000 tokens and 0 draft "
                "tokens, too large for model with 32768 maximum context length",
                "type": "invalid_request_error",
            }
        ),
        ContextOverflow,
    ),
    # RESIL-5 content filter
    (
        "openai content policy",
        400,
        openai(
            "Your request was rejected as a result of our safety system.",
            "invalid_request_error",
            "content_policy_violation",
        ),
        ContentFiltered,
    ),
    (
        "azure content filter",
        400,
        openai(
            "The response was filtered due to the prompt triggering Azure "
            "OpenAI's content management policy.",
            "invalid_request_error",
            "content_filter",
        ),
        ContentFiltered,
    ),
    ("gemini safety", 400, gemini(400, "INVALID_ARGUMENT", "Blocked for SAFETY"), ContentFiltered),
    # RESIL-5 ordinary bad requests are returned as is
    ("400 validation", 400, openai("'messages' is a required property"), UpstreamBadRequest),
    ("422", 422, b'{"detail": [{"loc": ["body", "temperature"], "msg": "too big"}]}', UpstreamBadRequest),
    ("413", 413, b"Payload Too Large", UpstreamBadRequest),
]


@pytest.mark.parametrize(("name", "status", "body", "expected"), CASES, ids=[c[0] for c in CASES])
def test_vendor_wordings_map_to_the_right_failure_class(
    name: str, status: int, body: bytes, expected: type[UpstreamError]
) -> None:
    """RESIL-5: status, provider code and message patterns decide the failure class."""
    err = classify(status, body)
    assert type(err) is expected, (name, err.message)
    assert err.upstream_status == status
    assert err.provider == "p"


@pytest.mark.parametrize(
    "message",
    [
        "You have exceeded your daily quota",
        "Limit reached on requests per day (RPD)",
        "Quota exceeded for metric GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        "You've reached today's quota, try again tomorrow",
    ],
)
def test_daily_quota_texts_lock_until_midnight(message: str) -> None:
    """RESIL-3: "daily quota" texts → QuotaExhausted with until_midnight."""
    err = classify(429, openai(message, "requests", "rate_limit_exceeded"))
    assert isinstance(err, QuotaExhausted)
    assert err.until_midnight is True


def test_ordinary_quota_is_not_until_midnight() -> None:
    """RESIL-3: only daily quotas lock until midnight."""
    err = classify(402, b"Payment Required")
    assert isinstance(err, QuotaExhausted)
    assert err.until_midnight is False


def test_passthrough_errors_keep_the_upstream_status() -> None:
    """RESIL-5: errors returned as is show the client the upstream's own status and message."""
    bad = classify(422, b'{"message": "temperature must be <= 2"}')
    assert isinstance(bad, UpstreamBadRequest)
    assert bad.status == 422
    assert bad.message == "temperature must be <= 2"
    assert not bad.retryable
    ctx = classify(400, openai("This model's maximum context length is 8192 tokens."))
    assert isinstance(ctx, ContextOverflow)
    assert ctx.status == 400
    llama = classify(500, b'{"error": {"message": "context shift is disabled"}}')
    assert llama.status == 400  # never a 5xx for the client's oversized prompt


def test_hint_from_headers_then_text() -> None:
    """RESIL-2: classify attaches the wait hint, headers first, then the message."""
    assert classify(429, b"slow down", {"Retry-After": "7"}).retry_after_s == 7.0
    assert classify(429, openai("Please try again in 20s.")).retry_after_s == 20.0
    assert classify(503, b"down").retry_after_s is None


def test_gemini_retry_delay_detail_is_a_hint() -> None:
    """RESIL-2: Gemini RetryInfo ``retryDelay`` is read from the details."""
    body = gemini(429, "RESOURCE_EXHAUSTED", "Resource exhausted", [{"retryDelay": "12s"}])
    assert classify(429, body).retry_after_s == 12.0


def test_provider_code_is_attached() -> None:
    """RESIL-5: the provider's code (or type/status) rides along."""
    assert (
        classify(429, openai("x", "requests", "rate_limit_exceeded")).provider_code == "rate_limit_exceeded"
    )
    assert classify(529, anthropic("overloaded_error", "Overloaded")).provider_code == "overloaded_error"
    assert classify(503, gemini(503, "UNAVAILABLE", "down")).provider_code == "UNAVAILABLE"


def test_empty_body_message_falls_back_to_status() -> None:
    """RESIL-5: an empty body still gives a readable message."""
    assert classify(502, b"").message == "HTTP 502"


def test_extract_error_shapes() -> None:
    """RESIL-5: message and codes from OpenAI, Anthropic, Gemini (list form), plain text."""
    assert extract_error(openai("m", "t", "c")).codes == ("c", "t")
    assert extract_error(anthropic("overloaded_error", "Overloaded")).message == "Overloaded"
    listed = orjson.dumps([{"error": {"code": 429, "message": "m", "status": "RESOURCE_EXHAUSTED"}}])
    assert extract_error(listed).codes == ("RESOURCE_EXHAUSTED",)
    assert extract_error(b"plain failure").message == "plain failure"


def test_the_table_is_extensible() -> None:
    """RESIL-5: a custom rule placed first wins."""
    import re

    custom = (Rule("vendor-x", Overloaded, message=re.compile("engine is warming up")), *RULES)
    err = classify_http(400, {}, b"engine is warming up", provider="x", now=NOW, rules=custom)
    assert isinstance(err, Overloaded)


def test_error_payload_in_a_stream_implies_status_from_type() -> None:
    """RESIL-9: an Anthropic overloaded event mid-stream is Overloaded with an implied 529."""
    err = error_from_payload(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        provider="a",
        in_stream=True,
    )
    assert isinstance(err, Overloaded)
    assert err.upstream_status == 529


def test_unknown_error_payload_in_a_stream_is_stream_broken() -> None:
    """RESIL-9: an unrecognised error event breaks the stream; outside a stream it is a server error."""
    obj = {"error": {"message": "something odd"}}
    assert isinstance(error_from_payload(obj, provider="p", in_stream=True), StreamBroken)
    assert isinstance(error_from_payload(obj, provider="p", in_stream=False), ServerError)


def test_error_payload_with_openai_server_error_type() -> None:
    """RESIL-5: a 200 body carrying an OpenAI server_error is a counted server failure."""
    err = error_from_payload(
        {"error": {"message": "boom", "type": "server_error"}}, provider="p", in_stream=False
    )
    assert isinstance(err, ServerError)
    assert err.upstream_status == 500


@pytest.mark.parametrize(
    ("phase", "timeout_s", "message"),
    [
        ("ttft", 60.0, "TTFT timeout after 60s"),
        ("connect", 10.0, "connect timeout after 10s"),
        ("idle", 2.5, "stream idle timeout after 2.5s"),
        ("total", None, "total timeout"),
    ],
)
def test_timeouts_name_the_phase(phase: str, timeout_s: float | None, message: str) -> None:
    """RESIL-6: timeouts are Timeout errors whose message names the phase and the limit."""
    err = classify_exception(TimeoutError(), provider="p", now=NOW, phase=phase, timeout_s=timeout_s)  # type: ignore[arg-type]
    assert isinstance(err, Timeout)
    assert err.message == message


def test_aiohttp_server_timeout_is_a_timeout() -> None:
    """RESIL-6: aiohttp's own timeout errors are timeouts too."""
    err = classify_exception(
        aiohttp.ServerTimeoutError("read"), provider="p", now=NOW, phase="ttft", timeout_s=5
    )
    assert isinstance(err, Timeout)


def test_connection_errors_before_and_inside_a_stream() -> None:
    """RESIL-5/RESIL-9: a cut connection is ConnectionFailed before the stream, StreamBroken inside it."""
    for exc in (
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientOSError(104, "Connection reset by peer"),
        aiohttp.ClientPayloadError("Response payload is not completed"),
    ):
        assert isinstance(classify_exception(exc, provider="p", now=NOW, phase="ttft"), ConnectionFailed)
        assert isinstance(classify_exception(exc, provider="p", now=NOW, phase="stream"), StreamBroken)


def test_connector_error_is_connection_failed() -> None:
    """RESIL-5: refused/DNS failures are ConnectionFailed."""
    from aiohttp.client_reqrep import ConnectionKey

    key = ConnectionKey("127.0.0.1", 9, False, True, None, None, None)
    exc = aiohttp.ClientConnectorError(key, OSError(111, "Connection refused"))
    assert isinstance(classify_exception(exc, provider="p", now=NOW, phase="connect"), ConnectionFailed)


def test_client_response_error_goes_through_the_table() -> None:
    """RESIL-5: an aiohttp ClientResponseError is classified by its status."""
    exc = aiohttp.ClientResponseError(None, (), status=429, message="Too Many Requests")  # type: ignore[arg-type]
    assert isinstance(classify_exception(exc, provider="p", now=NOW, phase="connect"), RateLimited)


def test_cancellation_is_never_classified() -> None:
    """RESIL-5: client disconnect (cancellation) propagates instead of becoming an upstream error."""
    with pytest.raises(asyncio.CancelledError):
        classify_exception(asyncio.CancelledError(), provider="p", now=NOW, phase="stream")


def test_upstream_errors_pass_through() -> None:
    """RESIL-5: an already classified error is returned unchanged."""
    err = RateLimited("x")
    assert classify_exception(err, provider="p", now=NOW, phase="connect") is err


def test_a_400_marks_credentials_invalid_only_in_geminis_shape() -> None:
    """Gemini answers a bad key with 400 INVALID_ARGUMENT (AuthInvalid); a 400 in another shape is
    the request's fault and goes back as is, whatever its wording."""
    gem = gemini(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [])
    assert isinstance(classify(400, gem), AuthInvalid)
    other = openai("Incorrect API key provided: sk-abc.", "invalid_request_error")
    err = classify(400, other)
    assert isinstance(err, UpstreamBadRequest) and err.status == 400
    assert isinstance(classify(401, other), AuthInvalid)
