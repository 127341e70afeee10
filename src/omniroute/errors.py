"""The one exception tree of the gateway (DESIGN house style 10).

Every error a client can see is a :class:`GatewayError`; it carries the HTTP ``status``, the wire
``code`` (OpenAI ``error.code``), the error ``type`` and, for bad input, the ``param`` it names. Edges
(``api/*``) shape the body for their wire format; nothing else formats errors.

::

    GatewayError                      status, code, type, param, retryable
    ├── ClientError                   the request itself is wrong; never falls back (RESIL-5)
    │   ├── InvalidRequest            400, names the field (API-6)
    │   ├── PayloadTooLarge           413 (server.max_body_mb)
    │   ├── UnsupportedMediaType      415 a Content-Encoding the gateway cannot decode
    │   ├── RequestTimeout            408 the body did not arrive in time
    │   ├── AuthenticationFailed      401 (API-8)
    │   ├── PermissionDenied          403 model not in the key's allowlist (API-8)
    │   ├── BudgetExceeded            402 key budget or strict per-request budget (API-8, AUTO-7)
    │   ├── KeyRateLimited            429 the key's requests or tokens per minute (API-8)
    │   └── ModelNotFound             404 unknown model id (SPEC §4)
    ├── UpstreamError                 one failed attempt; ``kind`` drives the ladder (RESIL-5)
    │   subclasses by kind: RateLimited, Overloaded, ServerError (ResponseTooLarge), Timeout,
    │   ConnectionFailed, AuthInvalid, QuotaExhausted, ModelUnavailable, ContextOverflow,
    │   UpstreamBadRequest, ContentFiltered, StreamBroken
    ├── ExhaustedError                every candidate failed or was filtered (RESIL-7)
    └── ClientDisconnected            499, the client went away; nothing is retried

``retryable`` on an upstream error means "another target may succeed", not "the same call may".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class GatewayError(Exception):
    """Base of every error the gateway raises on purpose.

    Attributes: ``status`` (HTTP status), ``code`` (machine code, e.g. ``model_not_found``),
    ``type`` (OpenAI ``error.type``), ``param`` (the offending field, or ``None``),
    ``headers`` (extra response headers such as ``Retry-After``), ``extra`` (top-level body
    members beside ``error``, e.g. RESIL-7 ``diagnostics``).
    """

    status: int = 500
    code: str = "internal_error"
    type: str = "server_error"
    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        status: int | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.headers: dict[str, str] = headers or {}
        self.extra: dict[str, Any] = extra or {}


class ClientError(GatewayError):
    """The request is wrong; returned as is and never retried (RESIL-5)."""

    status = 400
    code = "invalid_request_error"
    type = "invalid_request_error"


class InvalidRequest(ClientError):
    """400 for a malformed or invalid body; ``param`` names the field (API-6)."""


class PayloadTooLarge(ClientError):
    """413 when the body exceeds ``server.max_body_mb`` (OPS-2)."""

    status = 413
    code = "request_too_large"


class UnsupportedMediaType(ClientError):
    """415 when the body uses a ``Content-Encoding`` the gateway cannot decode (RFC 9110 §15.5.16);
    ``param`` is ``content-encoding``."""

    status = 415
    code = "unsupported_media_type"


class RequestTimeout(ClientError):
    """408 when the client does not send the body it announced in time."""

    status = 408
    code = "request_timeout"


class AuthenticationFailed(ClientError):
    """401 for a missing or unknown API key (API-8)."""

    status = 401
    code = "invalid_api_key"
    type = "authentication_error"


class PermissionDenied(ClientError):
    """403 when the key's ``allowed_models`` does not admit the model (API-8)."""

    status = 403
    code = "model_not_allowed"
    type = "permission_error"


class BudgetExceeded(ClientError):
    """402 when a key's budget or a strict per-request budget blocks the call (API-8, AUTO-7)."""

    status = 402
    code = "budget_exceeded"
    type = "insufficient_quota"


class KeyRateLimited(ClientError):
    """429 when a client key is over its requests (``type: requests``) or tokens (``type: tokens``) per
    minute, as OpenAI names its own rate-limit errors; ``headers`` carry ``Retry-After`` and the
    ``x-ratelimit-*`` headers (API-8)."""

    status = 429
    code = "rate_limit_exceeded"
    type = "requests"


class ModelNotFound(ClientError):
    """404 ``model_not_found`` for a model string nothing resolves (SPEC §4)."""

    status = 404
    code = "model_not_found"


class ClientDisconnected(GatewayError):
    """499: the client closed the connection; the upstream call is cancelled, nothing is retried."""

    status = 499
    code = "client_closed_request"
    type = "client_error"


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One upstream attempt as reported in diagnostics (RESIL-7) and decisions (OBS-2)."""

    provider: str
    model: str
    connection: str
    status: int
    reason: str
    latency_ms: float = 0.0
    started_s: float | None = field(default=None, compare=False)
    """When the attempt began: a monotonic reading of the gateway's clock, seconds (for trace spans;
    ``None`` when unknown)."""


@dataclass(frozen=True, slots=True)
class ExclusionRecord:
    """A candidate skipped before any attempt, with the filter's reason (DESIGN house style 7);
    ``until`` is when it becomes available again (epoch seconds: the breaker's next probe, the end of
    a cooldown or lockout) when the filter knows it, else ``None``."""

    provider: str
    model: str
    reason: str
    connection: str | None = None
    until: float | None = None


@dataclass
class Diagnostics:
    """RESIL-7 ``diagnostics``: ``{pool_size, attempted: [...], excluded: [...]}``."""

    pool_size: int = 0
    attempted: list[AttemptRecord] = field(default_factory=list)
    excluded: list[ExclusionRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form used in the error body and the decision log."""
        return {
            "pool_size": self.pool_size,
            "attempted": [
                {
                    "provider": a.provider,
                    "model": a.model,
                    "connection": a.connection,
                    "status": a.status,
                    "reason": a.reason,
                }
                for a in self.attempted
            ],
            "excluded": [
                {"provider": e.provider, "model": e.model, "connection": e.connection, "reason": e.reason}
                for e in self.excluded
            ],
        }


class ExhaustedError(GatewayError):
    """RESIL-7: nothing left to try. Status 429 when every attempt was rate-limited (with the
    earliest ``Retry-After``), else the most meaningful upstream status or 503. ``code`` is
    ``fallback_exhausted``, or ``all_candidates_unavailable`` when nothing could be attempted."""

    status = 503
    code = "fallback_exhausted"
    type = "server_error"


class UpstreamError(GatewayError):
    """One failed upstream attempt, already classified (RESIL-5).

    ``kind`` is the failure class the ladder acts on; ``retry_after_s`` is the upstream's wait hint
    in seconds (RESIL-2) when it gave one; ``upstream_status`` is the HTTP status received (0 for
    transport failures); ``committed`` is True when a stream had already reached the client.
    """

    kind: str = "server_error"
    status = 502
    code = "upstream_error"
    type = "api_error"
    retryable = True

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        upstream_status: int = 0,
        retry_after_s: float | None = None,
        provider_code: str | None = None,
        status: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, status=status, headers=headers)
        self.provider = provider
        self.upstream_status = upstream_status
        self.retry_after_s = retry_after_s
        self.provider_code = provider_code


class RateLimited(UpstreamError):
    """429 or rate-limit text: connection cooldown (RESIL-2)."""

    kind = "rate_limited"
    status = 429
    code = "rate_limit_exceeded"
    type = "rate_limit_error"


class Overloaded(UpstreamError):
    """503/529 or "overloaded" text: connection cooldown and breaker count (RESIL-1, RESIL-2)."""

    kind = "overloaded"
    status = 503
    code = "upstream_overloaded"


class ServerError(UpstreamError):
    """408/409/5xx: counted by the provider breaker (RESIL-1)."""

    kind = "server_error"


class Timeout(UpstreamError):
    """Connect, TTFT, idle or total timeout (RESIL-6): counted by the breaker."""

    kind = "timeout"
    status = 504
    code = "upstream_timeout"


class ConnectionFailed(UpstreamError):
    """The upstream could not be reached (refused, reset, DNS): counted by the breaker."""

    kind = "connection_failed"
    status = 502
    code = "upstream_unreachable"


class AuthInvalid(UpstreamError):
    """401/403 auth failure: the connection is marked invalid (RESIL-2)."""

    kind = "auth_invalid"
    status = 502
    code = "upstream_auth_failed"


class QuotaExhausted(UpstreamError):
    """402, quota/billing/credit texts: model lockout (RESIL-3). ``until_midnight`` for daily quota;
    ``account_wide`` when the whole account is exhausted (credits, billing), which locks every model
    of the connection."""

    kind = "quota_exhausted"
    status = 402
    code = "upstream_quota_exhausted"
    type = "insufficient_quota"
    until_midnight: bool = False
    account_wide: bool = False


class ModelUnavailable(UpstreamError):
    """404 model-not-found or 406 from the upstream: model lockout (RESIL-3)."""

    kind = "model_unavailable"
    status = 404
    code = "model_not_found"


class ContextOverflow(UpstreamError):
    """Prompt exceeds the context window: fall back only to larger windows (RESIL-5, RESIL-8)."""

    kind = "context_overflow"
    status = 400
    code = "context_length_exceeded"
    type = "invalid_request_error"


class UpstreamBadRequest(UpstreamError):
    """Ordinary 400 validation error from the upstream: returned to the client as is (RESIL-5)."""

    kind = "bad_request"
    status = 400
    code = "invalid_request_error"
    type = "invalid_request_error"
    retryable = False


class ContentFiltered(UpstreamError):
    """Content-policy refusal: returned as is by default (RESIL-5)."""

    kind = "content_filtered"
    status = 400
    code = "content_filter"
    type = "invalid_request_error"
    retryable = False


class ResponseTooLarge(ServerError):
    """The upstream sent more than ``upstream_limits`` allows (a body or one stream event): the read
    stops at the limit, the attempt is a 502 counted against the provider and the request falls back.
    """

    code = "upstream_response_too_large"


class StreamBroken(UpstreamError):
    """A stream failed: error event, malformed event, cut connection or idle timeout (RESIL-9)."""

    kind = "stream_broken"
    status = 502
    code = "upstream_stream_error"


class MalformedEvent(StreamBroken):
    """One stream event whose data is not a JSON object. Before commit the attempt falls back like
    any broken stream; after commit the event is skipped and counted instead of ending the stream,
    since unparseable data carries no content the client could be missing (RESIL-9)."""
