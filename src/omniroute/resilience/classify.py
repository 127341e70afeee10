"""Failure classification (RESIL-5): upstream HTTP errors and transport exceptions → typed errors.

Owns the one ordered table :data:`RULES` mapping (HTTP status, provider error code/type, message
text) to a class of the :class:`~omniroute.errors.UpstreamError` tree, the extraction of message and
code from the OpenAI, Anthropic, Gemini, llama.cpp, vLLM, Ollama and plain-text error shapes, and the
mapping of aiohttp/asyncio exceptions by request phase. The ladder acts on the class; the wait hint
(RESIL-2) rides along as ``retry_after_s``. First matching rule wins; add vendor wordings as rows.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

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
from omniroute.resilience.hints import parse_wait_hint

__all__ = [
    "RATE_LIMIT_SCOPE",
    "RULES",
    "ErrorInfo",
    "Phase",
    "Rule",
    "Scope",
    "classify_exception",
    "classify_http",
    "cooldown_scope",
    "error_from_payload",
    "extract_error",
    "match_rule",
]

Phase = Literal["connect", "ttft", "body", "stream", "idle", "total"]
"""Where an attempt failed: before a response (``connect``), waiting for the first byte/event
(``ttft``), reading a non-streaming body (``body``), inside a stream (``stream``, ``idle``), or on the
overall deadline (``total``)."""

_STREAM_PHASES = frozenset({"stream", "idle"})
_PHASE_LABEL = {
    "connect": "connect",
    "ttft": "TTFT",
    "body": "response read",
    "stream": "stream",
    "idle": "stream idle",
    "total": "total",
}
_MAX_MESSAGE = 2000


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True, slots=True)
class Rule:
    """One classification row. Every condition that is set must hold: ``statuses`` contains the HTTP
    status, ``code`` searches the provider's code/type/status strings, ``message`` searches the
    message text (plus details). ``until_midnight`` marks daily quotas (RESIL-3); ``account`` marks a
    quota or billing exhaustion of the whole account (credits, balance, payment), which holds back
    every model of the connection, not just the one asked for (:func:`cooldown_scope`)."""

    name: str
    error: type[UpstreamError]
    statuses: frozenset[int] | None = None
    code: re.Pattern[str] | None = None
    message: re.Pattern[str] | None = None
    until_midnight: bool = False
    account: bool = False

    def matches(self, status: int, codes: str, text: str) -> bool:
        if self.statuses is not None and status not in self.statuses:
            return False
        if self.code is not None and not self.code.search(codes):
            return False
        return self.message is None or self.message.search(text) is not None


_4XX = frozenset(range(400, 500)) - {429}
_SERVER = frozenset({408, 409, *range(500, 600)})
_AUTH_4XX = _4XX - {400}  # a 400 marks credentials invalid only in Gemini's shape (rule auth-gemini-400)

_DAILY = _rx(r"\bdaily\b.{0,30}\b(quota|limit)|per[ _-]?day|today'?s quota|try again tomorrow|\bRPD\b")
_PER_MINUTE = _rx(r"per[ _-]?minute|per[ _-]?min\b|\b[RT]PM\b")
_QUOTA = _rx(
    r"credit balance is too low|insufficient[_ ]quota|exceeded your current quota|quota (has been )?exceeded"
    r"|exceeded (your |the )?quota|quota\b.{0,30}\b(exhausted|reached)|out of credits"
    r"|insufficient (credits?|balance|funds)|credits? (exhausted|depleted)|payment required|billing"
)
_CONTEXT = _rx(
    r"maximum context length|context[_ ]length[_ ]exceeded|prompt is too long|exceed context limit"
    r"|input token count.{0,40}exceeds the maximum|exceeds the maximum number of tokens"
    r"|exceeds? the available context size|exceed_context_size_error|context shift is disabled"
    r"|longer than the model'?s context length|too large for model|exceeds? (the )?context window"
    r"|reduce the length of the messages"
)
_CONTENT = _rx(
    r"content[_ ]policy|content management policy|content[_ ]filter|\bsafety\b|responsible ai"
    r"|violat\w* (our |the )?(usage|content) polic"
)
_AUTH = _rx(
    r"invalid (api[ _-]?key|x-api-key|authentication|bearer|access token|credentials)|incorrect api key"
    r"|api key not valid|api[ _-]?key (is )?(invalid|expired|revoked|missing)|unauthori[sz]ed"
    r"|authentication (failed|required)|token (has )?expired|invalid_grant"
)
_MODEL_ACCESS = _rx(
    r"(do(es)? not|don'?t) have (access|permission)[^.]{0,60}\bmodel"
    r"|not (allowed|authorized|permitted) to (use|access)[^.]{0,40}\bmodel"
    r"|permission to (use|access) (the )?(specified )?(model|resource)"
    r"|\bmodel\b[^.]{0,80}(not accessible|access (is )?denied)"
)
_MODEL_MISSING = _rx(
    r"model_not_found|unknown model|no such model|invalid model"
    r"|\bmodels?\b[^.]{0,120}?(does not exist|is not found|not found|is not supported for|not available"
    r"|decommissioned|has been deprecated)"
)
_RATE = _rx(r"rate[ _-]?limit|too many requests|throttl")
_OVERLOADED = _rx(r"overload|over capacity|at capacity|high demand|capacity constraint")

RULES: tuple[Rule, ...] = (
    # RESIL-3: daily quotas lock the model until the next local midnight.
    Rule("daily-quota", QuotaExhausted, message=_DAILY, until_midnight=True),
    # Explicit rate-limit codes and per-minute limits are transient even when the text mentions billing.
    Rule("rate-limit-code", RateLimited, code=_rx(r"rate_limit|RateLimitError|too_many_requests")),
    Rule("per-minute-limit", RateLimited, message=_PER_MINUTE),
    # RESIL-3: quota, billing and credit failures (any status, incl. 400/403/429).
    Rule(
        "quota-code",
        QuotaExhausted,
        code=_rx(r"insufficient_quota|billing_|quota_exceeded|payment_required|insufficient_balance"),
        account=True,
    ),
    Rule("quota-text", QuotaExhausted, message=_QUOTA, account=True),
    # RESIL-5: context window exceeded (OpenAI, Anthropic, Gemini, llama.cpp, vLLM, Mistral).
    Rule("context-code", ContextOverflow, code=_rx(r"context_length_exceeded|exceed_context_size")),
    Rule("context-text", ContextOverflow, message=_CONTEXT),
    # RESIL-5: content-policy refusals are returned as is.
    Rule(
        "content-code",
        ContentFiltered,
        statuses=_4XX,
        code=_rx(r"content_policy|content_filter|\bSAFETY\b|PROHIBITED_CONTENT"),
    ),
    Rule("content-text", ContentFiltered, statuses=_4XX, message=_CONTENT),
    # RESIL-2: dead credentials. A 400 says so only in Gemini's shape: the Gemini API answers a bad
    # key with 400 INVALID_ARGUMENT, "API key not valid", reason API_KEY_INVALID
    # (ai.google.dev/gemini-api/docs/troubleshooting). OpenAI and Anthropic answer 401
    # (platform.openai.com/docs/guides/error-codes, docs.anthropic.com/en/api/errors), so any other
    # 400 is the request's fault and is returned as is, whatever its wording.
    Rule(
        "auth-gemini-400",
        AuthInvalid,
        statuses=frozenset({400}),
        code=_rx(r"\bINVALID_ARGUMENT\b"),
        message=_rx(r"API_KEY_INVALID|api key not valid"),
    ),
    Rule(
        "auth-code",
        AuthInvalid,
        statuses=_AUTH_4XX,
        code=_rx(r"invalid_api_key|authentication_error|API_KEY_INVALID|UNAUTHENTICATED|invalid_x_api_key"),
    ),
    Rule("auth-text", AuthInvalid, statuses=_AUTH_4XX, message=_AUTH),
    # RESIL-3: a 403 about access to this model locks the model, not the connection.
    Rule("model-access-403", QuotaExhausted, statuses=frozenset({403}), message=_MODEL_ACCESS),
    Rule("auth-status", AuthInvalid, statuses=frozenset({401, 403})),
    Rule("payment-status", QuotaExhausted, statuses=frozenset({402}), account=True),
    # RESIL-3: model not served here.
    Rule("model-code", ModelUnavailable, code=_rx(r"model_not_found|model_not_available|unsupported_model")),
    Rule("model-text", ModelUnavailable, statuses=_4XX, message=_MODEL_MISSING),
    Rule("model-status", ModelUnavailable, statuses=frozenset({404, 406})),
    # RESIL-2: transient limits → connection cooldown.
    Rule("rate-limit-status", RateLimited, statuses=frozenset({429})),
    Rule("rate-limit-text", RateLimited, message=_RATE),
    Rule("resource-exhausted", RateLimited, code=_rx(r"RESOURCE_EXHAUSTED")),
    Rule("overloaded-status", Overloaded, statuses=frozenset({503, 529})),
    Rule("overloaded-code", Overloaded, code=_rx(r"overloaded|\bUNAVAILABLE\b")),
    Rule("overloaded-text", Overloaded, message=_OVERLOADED),
    # RESIL-1: server-side failures, counted by the breaker.
    Rule("server-status", ServerError, statuses=_SERVER),
    # RESIL-5: anything else the client sent wrong is returned as is.
    Rule("bad-request", UpstreamBadRequest, statuses=_4XX),
)
"""The classification table, in priority order (RESIL-5). Unmatched statuses become ServerError."""

_DEFAULT_RULE = Rule("default", ServerError)

Scope = Literal["model", "connection"]
"""What a failure holds back: one model on the connection, or the whole connection (account)."""

RATE_LIMIT_SCOPE: Mapping[str, tuple[Scope, str]] = {
    # OpenAI: limits are set per model for an organization/project (the project rate-limit objects
    # carry a `model`); a 429 on one model leaves the others' budgets untouched.
    "openai": ("model", "https://platform.openai.com/docs/guides/rate-limits"),
    # Gemini: RPM/TPM/RPD are applied per project and per model.
    "gemini": ("model", "https://ai.google.dev/gemini-api/docs/rate-limits"),
    # Anthropic: RPM and input/output token limits are set per model (class).
    "anthropic": ("model", "https://docs.anthropic.com/en/api/rate-limits"),
}
"""Per upstream wire format: the scope of a rate limit (:class:`RateLimited`) and the provider
document that says so. A format not listed (an unknown server) is cooled whole, to be safe."""


def cooldown_scope(err: UpstreamError, provider_format: str) -> Scope:
    """What a cooldown caused by ``err`` on a provider of ``provider_format`` holds back (RESIL-2).

    A rate limit (:class:`RateLimited`, a 429 or its wordings) cools the (connection, model) pair
    where the provider limits per model (:data:`RATE_LIMIT_SCOPE`), so the same account keeps
    serving its other models. Everything else that cools or disables a connection is about the
    account or the upstream as a whole: overload and hinted server errors cool the connection,
    invalid credentials (:class:`AuthInvalid`) mark it invalid. Quota exhaustion is the lockout
    tier's: a daily or per-model quota, or a 403 about one model, locks that model on the connection;
    an exhausted account (credits, billing, payment: ``account_wide``) locks the whole connection."""
    if isinstance(err, RateLimited):
        return RATE_LIMIT_SCOPE.get(provider_format, ("connection", ""))[0]
    if isinstance(err, QuotaExhausted) and not err.account_wide:
        return "model"
    return "connection"


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """What an upstream error body says: ``message`` (human text), ``codes`` (provider code, type,
    status strings; most specific first) and ``detail`` (extra matchable text such as Gemini quota
    ids, retry delays or OpenRouter's raw upstream message)."""

    message: str
    codes: tuple[str, ...] = ()
    detail: str = ""


def _strs(*values: Any) -> tuple[str, ...]:
    return tuple(v for v in values if isinstance(v, str) and v)


def _detail_text(err: dict[str, Any]) -> str:
    parts: list[str] = []
    details = err.get("details")
    if isinstance(details, list):
        for d in details[:10]:
            if not isinstance(d, dict):
                continue
            parts.extend(_strs(d.get("reason"), d.get("domain")))
            if isinstance(d.get("retryDelay"), str):
                parts.append(f'"retryDelay": "{d["retryDelay"]}"')
            for v in d.get("violations") or ():
                if isinstance(v, dict):
                    parts.extend(_strs(v.get("quotaId"), v.get("quotaMetric"), v.get("description")))
    meta = err.get("metadata")
    if isinstance(meta, dict):
        parts.extend(_strs(*meta.values()))
    return " ".join(parts)[:_MAX_MESSAGE]


def _info_from_obj(data: dict[str, Any]) -> ErrorInfo:
    err = data.get("error")
    if isinstance(err, dict):
        message = err.get("message")
        return ErrorInfo(
            message=(message if isinstance(message, str) else "")[:_MAX_MESSAGE],
            codes=_strs(err.get("code"), err.get("type"), err.get("status")),
            detail=_detail_text(err),
        )
    if isinstance(err, str):
        return ErrorInfo(message=err[:_MAX_MESSAGE], codes=_strs(data.get("code"), data.get("type")))
    message = data.get("message")
    if not isinstance(message, str):
        detail = data.get("detail")
        message = detail if isinstance(detail, str) else (orjson.dumps(detail).decode() if detail else "")
    return ErrorInfo(
        message=message[:_MAX_MESSAGE], codes=_strs(data.get("code"), data.get("type"), data.get("status"))
    )


def extract_error(body: bytes) -> ErrorInfo:
    """Pull message, codes and details out of an error body of any known shape; the raw text when the
    body is not JSON. OpenAI ``{"error":{message,type,code}}``, Anthropic
    ``{"type":"error","error":{type,message}}``, Gemini ``{"error":{code,message,status,details}}``
    (also as a one-element list), ``{"error": "text"}`` (Ollama), ``{"message", "type"}`` (vLLM),
    ``{"detail": ...}`` (FastAPI servers)."""
    try:
        data: Any = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]
    if not isinstance(data, dict):
        text = body.decode("utf-8", "replace").strip() if body else ""
        return ErrorInfo(message=text[:_MAX_MESSAGE])
    return _info_from_obj(data)


def match_rule(status: int, info: ErrorInfo, rules: Sequence[Rule] = RULES) -> Rule:
    """The first rule of ``rules`` that matches; a ServerError default when none does."""
    codes = " ".join(info.codes)
    text = f"{info.message}\n{info.detail}" if info.detail else info.message
    for rule in rules:
        if rule.matches(status, codes, text):
            return rule
    return _DEFAULT_RULE


def classify_http(
    status: int,
    headers: Mapping[str, str] | None,
    body: bytes,
    *,
    provider: str,
    now: float,
    rules: Sequence[Rule] = RULES,
) -> UpstreamError:
    """Classify one non-2xx upstream response (RESIL-5).

    Returns an instance of the matching class with ``message`` (the upstream's own text, or
    ``HTTP <status>``), ``upstream_status``, ``provider_code`` and ``retry_after_s`` (seconds, from
    headers then text; RESIL-2). ``QuotaExhausted.until_midnight`` is set for daily quotas. For
    errors returned to the client as is (UpstreamBadRequest, ContextOverflow, ContentFiltered) the
    client-facing ``status`` equals the upstream 4xx status. ``now`` (epoch s, the gateway's clock)
    resolves HTTP-date hints.
    """
    info = extract_error(body)
    rule = match_rule(status, info, rules)
    wait = parse_wait_hint(headers, f"{info.message}\n{info.detail}", now)
    return _build(rule.error, rule, status, info, info.message or f"HTTP {status}", wait, provider)


_PASSTHROUGH = (UpstreamBadRequest, ContextOverflow, ContentFiltered)


def _build(
    error: type[UpstreamError],
    rule: Rule,
    status: int,
    info: ErrorInfo,
    message: str,
    wait: float | None,
    provider: str,
) -> UpstreamError:
    err = error(
        message,
        provider=provider,
        upstream_status=status,
        retry_after_s=wait,
        provider_code=info.codes[0] if info.codes else None,
        # errors returned as is show the client the upstream's own 4xx status (RESIL-5)
        status=status if issubclass(error, _PASSTHROUGH) and 400 <= status < 500 else None,
    )
    if rule.until_midnight and isinstance(err, QuotaExhausted):
        err.until_midnight = True
    if rule.account and isinstance(err, QuotaExhausted):
        err.account_wide = True
    return err


# Status implied by an error ``type`` when an error arrives without an HTTP status (in a 200 body or
# as a stream event): Anthropic error types, OpenAI types, Gemini RPC statuses.
_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "server_error": 500,
    "overloaded_error": 529,
    "insufficient_quota": 429,
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429,
    "INTERNAL": 500,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}


def _implied_status(obj: dict[str, Any]) -> int:
    err = obj.get("error")
    fields: list[Any] = [obj.get("code"), obj.get("status")]
    if isinstance(err, dict):
        fields = [err.get("code"), err.get("status"), err.get("type"), *fields]
    for value in fields:
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
        if isinstance(value, str):
            if value.isdigit() and 100 <= int(value) <= 599:
                return int(value)
            if value in _TYPE_STATUS:
                return _TYPE_STATUS[value]
    return 0


def error_from_payload(
    obj: dict[str, Any],
    *,
    provider: str,
    in_stream: bool,
    now: float | None = None,
    rules: Sequence[Rule] = RULES,
) -> UpstreamError:
    """Classify an error object that arrived without an error status: inside a 200 body or as a
    stream event (RESIL-5, RESIL-9), e.g. OpenAI ``{"error": {...}}`` or Anthropic
    ``{"type": "error", "error": {"type": "overloaded_error", ...}}``.

    The HTTP status is implied from the payload (numeric ``code``, Anthropic/OpenAI ``type``, Gemini
    ``status``) and stored as ``upstream_status`` (0 when none is implied); the table then applies as
    in :func:`classify_http`. When no rule matches, the result is :class:`StreamBroken` for a
    stream event and :class:`ServerError` otherwise. ``retry_after_s`` comes from the message text;
    ``now`` (epoch s, default the system clock) resolves reset instants written in it.
    """
    info = _info_from_obj(obj)
    status = _implied_status(obj)
    rule = match_rule(status, info, rules)
    # Stream parsers hold no clock: a reset instant in an in-stream error reads the process time.
    when = time.time() if now is None else now  # noqa: TID251
    wait = parse_wait_hint(None, f"{info.message}\n{info.detail}", when)
    error = StreamBroken if rule is _DEFAULT_RULE and in_stream else rule.error
    return _build(
        error, rule, status, info, info.message or "upstream returned an error object", wait, provider
    )


def _seconds(value: float) -> str:
    return f"{value:g}"


def classify_exception(
    exc: BaseException, *, provider: str, phase: Phase, now: float, timeout_s: float | None = None
) -> UpstreamError:
    """Classify a transport failure of one attempt (RESIL-5, RESIL-9).

    ``asyncio.TimeoutError`` (incl. aiohttp's timeout errors) → :class:`Timeout` whose message names
    the phase and ``timeout_s`` ("TTFT timeout after 60s"). ``ClientConnectorError`` →
    :class:`ConnectionFailed`; ``ServerDisconnectedError``/``ClientOSError``/``ClientPayloadError``
    and other connection errors → :class:`StreamBroken` in the ``stream``/``idle`` phases, else
    :class:`ConnectionFailed`. ``ClientResponseError`` goes through :func:`classify_http` (at ``now``,
    epoch s); malformed payloads (``ValueError``) → StreamBroken in a stream, else ServerError. An
    ``UpstreamError`` is returned unchanged. Cancellation and other non-``Exception`` signals are
    re-raised, never classified.
    """
    import aiohttp

    if isinstance(exc, UpstreamError):
        return exc
    if not isinstance(exc, Exception):
        raise exc
    label = _PHASE_LABEL.get(phase, phase)
    in_stream = phase in _STREAM_PHASES
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        after = f" after {_seconds(timeout_s)}s" if timeout_s is not None else ""
        return Timeout(f"{label} timeout{after}", provider=provider)
    if isinstance(exc, aiohttp.ClientResponseError):
        headers = dict(exc.headers) if exc.headers else {}
        return classify_http(exc.status, headers, exc.message.encode(), provider=provider, now=now)
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ConnectionFailed(f"connection failed: {detail}", provider=provider)
    if isinstance(exc, aiohttp.ClientError | ConnectionError | OSError):
        if in_stream:
            return StreamBroken(f"stream broken: {detail}", provider=provider)
        return ConnectionFailed(f"connection failed during {label}: {detail}", provider=provider)
    if isinstance(exc, ValueError):
        if in_stream:
            return StreamBroken(f"malformed stream event: {detail}", provider=provider)
        return ServerError(f"malformed upstream response: {detail}", provider=provider)
    if in_stream:
        return StreamBroken(f"stream failed: {type(exc).__name__}: {detail}", provider=provider)
    return ConnectionFailed(f"upstream call failed: {type(exc).__name__}: {detail}", provider=provider)
