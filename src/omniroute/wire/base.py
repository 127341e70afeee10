"""The Protocols every wire format implements (PROV-1; DESIGN house style 3).

Canonical responses are OpenAI ``chat.completion`` objects and canonical stream chunks are OpenAI
``chat.completion.chunk`` objects (PROV-1: hub-and-spoke through the OpenAI chat shape). A format
that providers speak supplies a :class:`ProviderAdapter` (canonical ↔ upstream); a format that
clients speak supplies a :class:`Surface` (canonical → client response, stream and errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

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

    format: str

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
        self, status: int, headers: Mapping[str, str], body: bytes, cand: Candidate
    ) -> UpstreamError:
        """Turn an HTTP error response into a typed upstream error (RESIL-5)."""
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
    stream encoder. ``name`` is the format's registry name (the request's ``client_format``)."""

    name: str

    def error_body(self, err: GatewayError) -> dict[str, Any]: ...

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]: ...

    def encoder(self, req: ChatRequest) -> StreamEncoder: ...
