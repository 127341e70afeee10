"""Gemini's streamed JSON array: ``:streamGenerateContent`` without ``?alt=sse`` answers one JSON
array whose elements arrive as they are produced (``[{…}\\r\\n,{…}\\r\\n]``, Google's REST framing
when no ``alt`` is given); with ``alt=sse`` the same objects come as SSE ``data:`` events.

:class:`JsonArrayEncoder` wraps the SSE encoder of :mod:`omniroute.wire.gemini.outbound` and re-frames
each event's JSON (its own events and passed-through upstream ones alike) as one array element.
"""

from __future__ import annotations

from typing import Any

from omniroute.errors import GatewayError
from omniroute.values import ChatRequest, Usage
from omniroute.wire.base import StreamEncoder
from omniroute.wire.gemini.outbound import SURFACE

JSON_ARRAY_CONTENT_TYPE = b"application/json; charset=UTF-8"
"""The ``Content-Type`` of the array form (Google's REST answers without ``alt=sse``)."""


class JsonArrayEncoder:
    """Canonical chunks → elements of one streamed JSON array: ``[`` before the first element, ``,``
    between elements, ``]`` at the end. The array is closed by :meth:`end` and by :meth:`error`
    (whose last element is the ``{"error": …}`` object, so a failed stream never reads as a complete
    answer); keep-alives before the first element are a space, which JSON ignores."""

    __slots__ = ("buf", "inner", "opened")

    def __init__(self, inner: StreamEncoder) -> None:
        self.inner = inner
        self.opened = False
        self.buf = b""  # an SSE event not yet complete (passed-through upstream bytes)

    def _elements(self, sse_bytes: bytes, final: bool = False) -> bytes:
        """The complete SSE events in ``sse_bytes`` (after what was buffered) as array elements."""
        data = (self.buf + sse_bytes).replace(b"\r\n", b"\n")
        events = data.split(b"\n\n")
        self.buf = b"" if final else events.pop()
        out: list[bytes] = []
        for event in events:
            payload = b"\n".join(
                line[5:].lstrip(b" ") for line in event.split(b"\n") if line.startswith(b"data:")
            )
            if payload.strip():
                out.append((b"," if self.opened else b"[") + payload + b"\r\n")
                self.opened = True
        return b"".join(out)

    def keepalive(self) -> bytes:
        return b" "

    def start(self) -> bytes:
        return self._elements(self.inner.start())

    def chunk(self, ch: dict[str, Any]) -> bytes:
        return self._elements(self.inner.chunk(ch))

    def _close(self, body: bytes) -> bytes:
        return body + (b"]" if self.opened else b"[]")

    def end(self, usage: Usage | None) -> bytes:
        return self._close(self._elements(self.inner.end(usage) + b"\n\n", final=True))

    def error(self, err: GatewayError) -> bytes:
        return self._close(self._elements(self.inner.error(err) + b"\n\n", final=True))


class JsonArraySurface:
    """The Gemini surface for ``:streamGenerateContent`` requests without ``alt=sse``: Gemini's
    error body and full response, streams framed by :class:`JsonArrayEncoder`."""

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return SURFACE.error_body(err)

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]:
        return SURFACE.render(response, req)

    def encoder(self, req: ChatRequest) -> JsonArrayEncoder:
        return JsonArrayEncoder(SURFACE.encoder(req))


ARRAY_SURFACE = JsonArraySurface()
