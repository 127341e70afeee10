"""The HTTP/1.1 server protocol with a request-header deadline (slow-header, "slowloris", defence).

uvicorn times out only idle keep-alive connections, and any byte received cancels that timer, so a
client that opens connections and sends its request headers a byte at a time holds them forever.
:class:`HeaderDeadlineProtocol` is uvicorn's httptools protocol with one more timer: from the
moment a connection opens, or a new request on it begins, all of the request's headers must have
arrived within uvicorn's ``timeout_keep_alive`` seconds, which the gateway sets to
``server.header_timeout_s`` (so an idle kept-alive connection is closed after as long), else the
connection is closed. Bytes trickling in do not extend it. Bodies have their own deadline
(``api/deadlines.py``). Use it as ``uvicorn.Config(http=HeaderDeadlineProtocol,
timeout_keep_alive=header_timeout_s)``; a module-level class, so worker processes can import it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderDeadlineProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` plus the header deadline (uvicorn's ``timeout_keep_alive`` seconds)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.timeout_keep_alive, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the deadline of the first request's headers."""
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the timer with the connection."""
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        """A request (a later one on a kept-alive connection) starts: its headers have a deadline."""
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        """All headers arrived in time."""
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """Idle keep-alive connections are uvicorn's ``timeout_keep_alive``; nothing to time here."""
        self._disarm()
        super().on_response_complete()
