"""The Protocols that modules implement and the engine calls (DESIGN house style 3, 6, 9).

A provider adapter is pure: it builds the upstream request, parses a response, parses stream events
and classifies errors, with no I/O, globals or retries. Canonical responses are OpenAI
``chat.completion`` objects and canonical stream chunks are OpenAI ``chat.completion.chunk`` objects
(PROV-1: hub-and-spoke through the OpenAI chat shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from omniroute.errors import UpstreamError
from omniroute.values import Candidate, ChatRequest

if TYPE_CHECKING:
    from omniroute.routing.strategies.base import Ordering, StrategyContext


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """One HTTP request to a provider: absolute ``url``, ``headers`` and the encoded JSON ``body``."""

    url: str
    headers: dict[str, str]
    body: bytes


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
    """One wire format's adapter (PROV-1, DESIGN house style 3)."""

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
        self, status: int, headers: Mapping[str, str], body: bytes, cand: Candidate, *, now: float
    ) -> UpstreamError:
        """Turn an HTTP error response into a typed upstream error (RESIL-5); ``now`` (epoch s, the
        gateway's clock) turns an HTTP-date ``Retry-After`` into seconds."""
        ...


class Strategy(Protocol):
    """A combo strategy (COMBO-3; DESIGN house style 6): one object per strategy name, registered in
    :mod:`omniroute.routing.strategies`, with no I/O, globals or hidden randomness.

    ``order`` turns the expanded targets of a :class:`~omniroute.routing.strategies.base.StrategyContext`
    into an :class:`~omniroute.routing.strategies.base.Ordering`: the first target is tried first and
    the rest are its fallbacks (the resilience ladder filters them afterwards). State is read and
    written only through ``ctx.state`` and randomness comes only from ``ctx.rng``.

    ``expands_connections``: the strategy ranks accounts, so it sees one target per connection
    (reset-aware, reset-window, headroom, cache-optimized) whatever ``connectionAwareExpansion`` says
    (COMBO-4). ``protects_first``: the prompt-cache affinity stage never displaces its first target
    (priority, fill-first, lkgp, weighted; COMBO-4).
    """

    @property
    def name(self) -> str: ...

    @property
    def expands_connections(self) -> bool: ...

    @property
    def protects_first(self) -> bool: ...

    async def order(self, ctx: StrategyContext) -> Ordering: ...
