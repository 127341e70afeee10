"""Start-up and shutdown of a serving process: the "ready on …" line and draining on SIGTERM.

Draining (``omniroute serve``): on SIGTERM :class:`Drain` marks the gateway draining — ``/health/ready``
answers 503 from then on — and hands the signal to the server (uvicorn), which closes the listening
socket (new connections are refused), lets every request in flight finish, streams included, for up
to ``server.drain_timeout_s`` seconds (uvicorn's ``timeout_graceful_shutdown``; requests still running
then are cancelled: each ends with its format's error event, or a 503, its usage row (status 503)
charges what was forwarded and its access line is a WARNING, without a traceback;
:mod:`omniroute.api.chat`), and then runs the application's shutdown, which flushes the
usage and decision writers and closes the store. The process then exits with status 0.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

log = logging.getLogger("omniroute")


def ready_message(
    host: str, port: int, providers: Iterable[str], combos: Iterable[str], *, simulated: bool
) -> str:
    """The start-up line: ``ready on http://HOST:PORT/v1 — providers: a, b; combos: c; console:
    http://HOST:PORT/dashboard`` (``(simulated)`` after the providers when they are the built-in
    simulated ones; ``none`` for an empty list)."""
    shown = "[" + host + "]" if ":" in host else host
    base = f"http://{shown}:{port}"
    provider_text = ", ".join(sorted(providers)) or "none"
    if simulated:
        provider_text += " (simulated)"
    combo_text = ", ".join(sorted(combos)) or "none"
    return f"ready on {base}/v1 — providers: {provider_text}; combos: {combo_text}; console: {base}/dashboard"


class Drain:
    """SIGTERM handling of a serving process (main thread only; a no-op elsewhere).

    :meth:`install` puts a handler in front of the one already installed (uvicorn's): it calls
    ``on_drain()`` (mark the gateway draining, log the count in flight) on the event loop and then the
    previous handler, which begins the server's graceful shutdown. :meth:`uninstall` puts the previous
    handler back."""

    def __init__(self) -> None:
        self._previous: Any = None
        self._installed = False

    def install(self, loop: asyncio.AbstractEventLoop, on_drain: Callable[[], None]) -> None:
        """Install the handler (main thread only); ``on_drain`` runs once, on ``loop``."""
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)
        fired = False

        def handler(signum: int, frame: FrameType | None) -> None:
            nonlocal fired
            if not fired:
                fired = True
                loop.call_soon_threadsafe(on_drain)
            if callable(previous):
                previous(signum, frame)

        self._previous = previous
        signal.signal(signal.SIGTERM, handler)
        self._installed = True

    def uninstall(self) -> None:
        """Put the previous SIGTERM handler back (when :meth:`install` installed one)."""
        if self._installed and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False


def exit_quietly_on_sigterm() -> None:
    """Make SIGTERM end this process with status 0 when no server handles it: before the server has
    started, and when uvicorn re-raises the signal after its graceful shutdown (its default would end
    the process with the signal's status, which a supervisor reads as a crash)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, handler)


__all__ = ["Drain", "exit_quietly_on_sigterm", "ready_message"]
