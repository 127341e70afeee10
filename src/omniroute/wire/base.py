"""What a wire format is made of (PROV-1; DESIGN house style 3): the :class:`WireFormat` entry the
registry lists and the small Protocols and values its parts implement.

Canonical responses are OpenAI ``chat.completion`` objects and canonical stream chunks are OpenAI
``chat.completion.chunk`` objects (PROV-1: hub-and-spoke through the OpenAI chat shape). A format
that providers speak supplies a :class:`ProviderAdapter` (canonical ↔ upstream); a format that
clients speak supplies a :class:`Client`: its :class:`Route` entries, whose ``read`` hook turns a
client body into an :class:`Inbound` (canonical request + the :class:`Surface` that renders its
outcome) or a :class:`TokenCount`, how its clients send API keys, and its error shape. The HTTP
handling around the hooks (auth, body reading, the engine, SSE writing) is the ``api`` layer's, once
for every format.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from omniroute.clock import Clock
from omniroute.errors import GatewayError, UpstreamError
from omniroute.providers.upstream import UpstreamRequest
from omniroute.values import Candidate, ChatRequest, Usage


class StreamParser(Protocol):
    """Stateful parser of one upstream stream into canonical OpenAI chunks.

    ``feed`` takes one SSE event (``event`` name or ``""``, ``data`` payload) and returns zero or more
    canonical chunk dicts; it raises :class:`~omniroute.errors.StreamBroken` (or another
    ``UpstreamError``) for an error event or malformed data. ``done`` is True once the upstream has
    signalled the end of the stream (``[DONE]``, ``message_stop`` …). ``finish`` returns closing
    chunks the upstream did not send when the stream ended without its terminator.
    """

    done: bool

    def feed(self, event: str, data: bytes) -> list[dict[str, Any]]: ...

    def finish(self) -> list[dict[str, Any]]: ...


class ProviderAdapter(Protocol):
    """One upstream wire format's adapter (PROV-1, DESIGN house style 3): pure — it builds the
    upstream request, parses a response, parses stream events and classifies errors, with no I/O,
    globals or retries."""

    def build_request(self, cand: Candidate, req: ChatRequest, *, stream: bool) -> UpstreamRequest:
        """Encode the canonical request for ``cand``; ``stream`` selects the streaming endpoint."""
        ...

    def parse_response(self, body: bytes, cand: Candidate) -> dict[str, Any]:
        """Decode a non-streaming response into a canonical ``chat.completion`` dict.

        Raises :class:`~omniroute.errors.UpstreamError` when the body is not a valid response."""
        ...

    def stream_parser(self, cand: Candidate, req: ChatRequest) -> StreamParser:
        """A fresh parser for one streamed response."""
        ...

    def classify_error(
        self, status: int, headers: Mapping[str, str], body: bytes, cand: Candidate, *, now: float
    ) -> UpstreamError:
        """Turn an HTTP error response into a typed upstream error (RESIL-5); ``now`` (epoch s, the
        gateway's clock) turns an HTTP-date ``Retry-After`` into seconds."""
        ...


class StreamEncoder(Protocol):
    """Turns canonical chunks into a client format's SSE bytes (one encoder per response).

    ``keepalive`` is what keeps a stream alive before its first content (an SSE comment, Anthropic's
    ``ping``); ``end`` closes a complete stream with the final ``usage``; ``error`` ends a stream
    that failed after commit so that it never reads as complete (RESIL-9)."""

    def keepalive(self) -> bytes: ...

    def start(self) -> bytes: ...

    def chunk(self, ch: dict[str, Any]) -> bytes: ...

    def end(self, usage: Usage | None) -> bytes: ...

    def error(self, err: GatewayError) -> bytes: ...


class Surface(Protocol):
    """A client wire format rendering one request's outcome: error body (API-6), full response and
    stream encoder. Stateless formats share one object; Responses makes one per request."""

    def error_body(self, err: GatewayError) -> dict[str, Any]: ...

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]: ...

    def encoder(self, req: ChatRequest) -> StreamEncoder: ...


class ResponseStore(Protocol):
    """Where Responses conversations are kept for ``previous_response_id`` (API-4): the gateway's
    store. ``ttl_s`` in seconds; a response is readable only by the API key that saved it."""

    async def get_response(self, id: str, api_key_id: str | None) -> dict[str, Any] | None: ...

    async def save_response(
        self, id: str, api_key_id: str | None, data: dict[str, Any], ttl_s: float
    ) -> None: ...


@dataclass(slots=True)
class Call:
    """One inbound request as a route's ``read`` hook sees it: the URL ``path``, the request
    ``headers`` (lower-case names), the caller's API key id (``None`` when keys are not used), the
    gateway's conversation ``store`` (``None`` before it has started), its ``clock`` and the URL's
    ``query`` parameters (e.g. Gemini's ``alt=sse``). Made once per request, so not frozen (a frozen
    dataclass costs twice as much to build); treat it as read-only."""

    path: str
    headers: Mapping[str, str]
    api_key_id: str | None
    store: ResponseStore | None
    clock: Clock
    query: Mapping[str, str] = field(default_factory=dict)

    @property
    def model_required(self) -> bool:
        """Whether the body must name the model: ``X-Route-Model`` may name it instead (SPEC §4)."""
        return "x-route-model" not in self.headers


@dataclass(slots=True)
class Inbound:
    """A client body parsed and validated by its format: the canonical chat ``body``, the
    ``surface`` that renders this request's outcome, the client's own ``native`` body kept for
    same-format pass-through (``None`` when there is nothing to pass through) and ``before_end``, a
    coroutine the gateway awaits before the response's last byte leaves (``None`` for most formats;
    Responses saves the conversation there so an immediate follow-up finds it). Made once per
    request, so not frozen, like :class:`Call`."""

    body: dict[str, Any]
    surface: Surface
    native: dict[str, Any] | None = None
    before_end: Callable[[], Awaitable[None]] | None = None
    stream_content_type: bytes | None = None
    """A stream's ``Content-Type`` when it is not SSE (Gemini's streamed JSON array)."""


@dataclass(frozen=True, slots=True)
class TokenCount:
    """A token-count route's answer (Anthropic ``count_tokens``, Gemini ``countTokens``): ``body``
    (e.g. ``{"input_tokens": 12}``, the local estimate) is sent once the API key may use ``model``;
    with ``resolve`` the model must also be routable (an unknown one is the same 404 as on a chat
    request). With the request as a ``canonical`` chat body (and the client's own ``native`` one), the
    gateway first asks the target upstream or a tokenizer (:mod:`omniroute.wire.count_tokens`) and
    puts that count under ``body[count_key]``."""

    model: str
    body: dict[str, Any]
    resolve: bool = False
    canonical: dict[str, Any] | None = None
    native: dict[str, Any] | None = None
    count_key: str = ""


Read = Callable[[dict[str, Any], Call], Awaitable[Inbound | TokenCount]]
"""A route's hook: the request's JSON object body → :class:`Inbound` or :class:`TokenCount`; raises
:class:`~omniroute.errors.InvalidRequest` (400 naming the field, API-6) for a bad body."""


@dataclass(frozen=True, slots=True)
class Route:
    """One ``POST`` route of a client format: exact ``paths``, or a path ``pattern`` (tried only when
    no exact path matched), and its ``read`` hook."""

    read: Read
    paths: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None


@dataclass(frozen=True, slots=True)
class Client:
    """A format's client side: the ``routes`` it serves, its ``error_body`` shape (API-6), whether its
    clients may send the key in ``x-api-key``/``x-goog-api-key`` besides ``Authorization: Bearer``
    (``key_headers``, API-8), and ``key_query``: a ``(query parameter, header)`` pair whose parameter
    fills the header when the header is absent (Gemini's ``?key=``)."""

    routes: tuple[Route, ...]
    error_body: Callable[[GatewayError], dict[str, Any]]
    key_headers: bool = False
    key_query: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class WireFormat:
    """One registry entry (:data:`omniroute.wire.FORMATS`): the format's ``name`` (a provider's
    ``format`` and a request's ``client_format``), its :class:`Client` side when clients speak it and
    its upstream :class:`ProviderAdapter` when providers do."""

    name: str
    client: Client | None = None
    upstream: ProviderAdapter | None = None
