"""Run a real gateway (uvicorn on 127.0.0.1, random free port) in a background thread for tests.

Clients — the official SDKs, curl, aiohttp — talk to ``GatewayThread.base_url`` over real sockets;
``GatewayThread.call(coro_fn)`` runs a coroutine on the gateway's own loop to inspect or change its
state from a test (the gateway object is not thread-safe). A gateway given a
:class:`~omniroute.clock.FakeClock` runs on it; ``GatewayThread.advance(seconds)`` moves it, so a test
drives cooldowns, breaker resets and the store poll without sleeping.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import uvicorn

from omniroute.api.protocol import HeaderDeadlineProtocol
from omniroute.app import OmniRouteApp, create_app
from omniroute.clock import Clock, FakeClock, SystemClock
from omniroute.config import Config
from omniroute.extensions import Extensions
from omniroute.gateway import Gateway

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

T = TypeVar("T")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GatewayThread:
    """A gateway served by uvicorn in a daemon thread. Use as a context manager or start()/stop().

    ``clock`` is the gateway's (default the process clock); ``extensions`` as for ``create_app``;
    ``tracer_provider`` an OpenTelemetry SDK ``TracerProvider`` the gateway traces into (e.g. with an
    in-memory exporter)."""

    def __init__(
        self,
        config: Config,
        *,
        port: int | None = None,
        clock: Clock | None = None,
        extensions: Extensions | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.port = port or free_port()
        self.clock: Clock = clock or SystemClock()
        self.app: OmniRouteApp = create_app(
            config, clock=self.clock, extensions=extensions, tracer_provider=tracer_provider
        )
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                access_log=False,
                lifespan="on",
                loop="asyncio",
                http=HeaderDeadlineProtocol,
                timeout_keep_alive=config.server.header_timeout_s,
                timeout_graceful_shutdown=2,
            )
        )
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def gateway(self) -> Gateway:
        return self.app.gateway

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    def start(self, timeout_s: float = 20.0) -> GatewayThread:
        """Start and block until the server accepts connections; raises RuntimeError on failure."""

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._server.serve())

        self._thread = threading.Thread(target=run, name=f"gateway-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the gateway did not start (see the log above)")
            time.sleep(0.01)
        return self

    def call(self, fn: Callable[[Gateway], Awaitable[T]], timeout_s: float = 30.0) -> T:
        """Run ``fn(gateway)`` on the gateway's loop and return its result."""
        assert self._loop is not None
        fut = asyncio.run_coroutine_threadsafe(_wrap(fn, self.gateway), self._loop)
        return fut.result(timeout_s)

    def advance(self, seconds: float, timeout_s: float = 30.0) -> float:
        """Move the gateway's :class:`~omniroute.clock.FakeClock` forward by ``seconds`` (on the
        gateway's loop) and return once the background tasks it woke — the store poll, the usage and
        decision writers — have done their step and sleep again; returns the new wall time (epoch s).

        For a gateway at rest: a request waiting on the clock (a retry wait) is woken too but does
        not sleep again, so this would wait ``timeout_s`` and raise. Raises :class:`TypeError` for a
        gateway on the process clock."""
        clock = self.clock
        if not isinstance(clock, FakeClock):
            raise TypeError("GatewayThread.advance needs a gateway started with clock=FakeClock()")

        async def step(_gw: Gateway) -> float:
            sleeping = clock.sleepers
            now = clock.advance(seconds)
            await clock.wait_for_sleepers(sleeping)
            return now

        return self.call(step, timeout_s)

    def wait_idle(self, timeout_s: float = 30.0) -> None:
        """Block until every request the gateway is serving has finished: what a test waits for
        before reading the usage row of a request whose client went away (it never sees the end)."""

        async def idle(_gw: Gateway) -> None:
            serving = set(self._server.server_state.tasks)
            if serving:
                await asyncio.wait(serving)

        self.call(idle, timeout_s)

    def stop(self) -> None:
        """Graceful shutdown (flushes usage); blocks until the thread ends."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(15)

    def __enter__(self) -> GatewayThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


async def _wrap(fn: Callable[[Gateway], Awaitable[T]], gw: Gateway) -> T:
    return await fn(gw)
