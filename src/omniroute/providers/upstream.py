"""The upstream client: the only place that does HTTP to providers (PROV-4, DESIGN house style 4).

One pooled aiohttp ``ClientSession`` per process with keep-alive and no retries of its own (the
engine is the only retry layer). Third-party exceptions become :mod:`omniroute.errors` types here,
at this one boundary. Timeouts follow RESIL-6: ``connect_s`` to open the socket, ``ttft_s`` until the
response headers (and, for streams, until the first event), ``idle_s`` between stream events and
``total_s`` for the whole attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp

from omniroute.errors import ConnectionFailed, StreamBroken, Timeout, UpstreamError


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """One HTTP request to a provider: absolute ``url``, ``headers`` and the encoded JSON ``body``."""

    url: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class AttemptTimeouts:
    """Per-attempt timeouts in seconds (RESIL-6; config ``resilience.timeouts``)."""

    connect_s: float = 10.0
    ttft_s: float = 60.0
    idle_s: float = 60.0
    total_s: float = 600.0


class UpstreamResponse:
    """An upstream response whose headers have arrived. ``status``, ``headers`` (lower-case keys).

    Read it with :meth:`read` (whole body) or :meth:`events` (SSE); always :meth:`close` it.
    """

    __slots__ = ("_resp", "headers", "provider", "status", "timeouts")

    def __init__(self, resp: aiohttp.ClientResponse, provider: str, timeouts: AttemptTimeouts) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.headers.items()}
        self.provider = provider
        self.timeouts = timeouts

    async def read(self) -> bytes:
        """The whole body; raises :class:`Timeout` after ``total_s`` and :class:`StreamBroken` on a cut."""
        try:
            async with asyncio.timeout(self.timeouts.total_s):
                return await self.read_now()
        except TimeoutError:
            raise _body_timeout(self.provider, self.timeouts) from None

    async def read_now(self) -> bytes:
        """The whole body with no timer of its own (the caller bounds it); :class:`StreamBroken` on
        a cut connection."""
        try:
            return await self._resp.read()
        except (aiohttp.ClientError, ConnectionError) as exc:
            raise StreamBroken(
                f"{self.provider}: connection lost while reading the body ({exc.__class__.__name__})",
                provider=self.provider,
            ) from None

    async def events(self, first_timeout_s: float | None = None) -> AsyncIterator[tuple[str, bytes]]:
        """Yield ``(event, data)`` per SSE event as it arrives (:meth:`event_batches`, flattened)."""
        async for batch in self.event_batches(first_timeout_s):
            for item in batch:
                yield item

    async def event_batches(
        self, first_timeout_s: float | None = None
    ) -> AsyncIterator[list[tuple[str, bytes]]]:
        """Yield the complete SSE events of each socket read as one list of ``(event, data)``.

        The first event must arrive within ``first_timeout_s`` (TTFT) and each later read that
        completes an event within ``idle_s``; a stall raises :class:`Timeout`, a cut connection
        :class:`StreamBroken`. Comment lines (heartbeats) keep the stream alive without yielding.

        A burst of events costs one read, one timer reset and one hop through this generator rather
        than one per line; every batch is yielded as soon as its read completes, so nothing waits
        for later network data (PERF-4).
        """
        content = self._resp.content
        loop = asyncio.get_running_loop()
        idle = self.timeouts.idle_s
        wait = first_timeout_s if first_timeout_s is not None else idle
        event = ""
        data: list[bytes] = []
        tail = b""
        got_any = False
        try:
            async with asyncio.timeout(wait) as cm:
                while True:
                    chunk = await content.readany()
                    if not chunk:
                        for line in tail.split(b"\n") if tail else ():  # last lines without a newline
                            line = line.rstrip(b"\r")
                            if line.startswith(b"event:"):
                                event = line[6:].strip().decode("utf-8", "replace")
                            elif line[:1] != b":":
                                self._parse_line(line, data)
                        if data:
                            yield [(event, b"\n".join(data))]
                        return
                    buf = tail + chunk if tail else chunk
                    batch: list[tuple[str, bytes]] = []
                    alive = False
                    if not data and not event and b"\r" not in buf:
                        # Whole events at once: split on the blank line ending each; the usual
                        # one-line ``data: …`` event needs no line parsing at all.
                        blocks = buf.split(b"\n\n")
                        tail = blocks.pop()
                        for block in blocks:
                            if block[:6] == b"data: " and b"\n" not in block:
                                batch.append(("", block[6:]))
                            elif block:
                                alive = self._block(block, batch) or alive
                    else:
                        lines = buf.split(b"\n")
                        tail = lines.pop()
                        for line in lines:
                            if line[-1:] == b"\r":
                                line = line[:-1]
                            if not line:
                                if data:
                                    batch.append((event, b"\n".join(data)))
                                    event, data = "", []
                                continue
                            if line[:1] == b":":
                                alive = True  # comment / heartbeat: the upstream is alive
                            elif line.startswith(b"event:"):
                                event = line[6:].strip().decode("utf-8", "replace")
                            else:
                                self._parse_line(line, data)
                    if batch or alive:
                        got_any = got_any or bool(batch)
                        cm.reschedule(loop.time() + idle)
                        if batch:
                            yield batch
                            cm.reschedule(loop.time() + idle)
        except TimeoutError:
            raise Timeout(
                f"{self.provider}: no stream event for {idle if got_any else wait:g}s (stream idle timeout)",
                provider=self.provider,
            ) from None
        except (aiohttp.ClientError, ConnectionError) as exc:
            raise StreamBroken(
                f"{self.provider}: stream connection lost ({exc.__class__.__name__})", provider=self.provider
            ) from None

    @classmethod
    def _block(cls, block: bytes, batch: list[tuple[str, bytes]]) -> bool:
        """One complete event (its lines, no blank line) into ``batch``; True when it holds a
        comment (a heartbeat: the upstream is alive)."""
        event = ""
        data: list[bytes] = []
        alive = False
        for line in block.split(b"\n"):
            if not line:
                continue
            if line[:1] == b":":
                alive = True
            elif line.startswith(b"event:"):
                event = line[6:].strip().decode("utf-8", "replace")
            else:
                cls._parse_line(line, data)
        if data:
            batch.append((event, b"\n".join(data)))
        return alive

    @staticmethod
    def _parse_line(line: bytes, data: list[bytes]) -> None:
        """A ``data:`` field line appends its value (one optional space after the colon is dropped)."""
        if line.startswith(b"data:"):
            data.append(line[6:] if line[5:6] == b" " else line[5:])

    def close(self) -> None:
        """Release the connection (aborting it when the body was not fully read)."""
        self._resp.close()


class UpstreamClient:
    """Owns the process's single aiohttp session (PROV-4). Create once at start-up, ``close`` at exit."""

    def __init__(self, timeouts: AttemptTimeouts, *, limit: int = 1000) -> None:
        self.timeouts = timeouts
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None
        # one immutable ClientTimeout per connect timeout, instead of one per request
        self._connect_timeouts: dict[float, aiohttp.ClientTimeout] = {}

    def _ensure(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._limit, limit_per_host=0, ttl_dns_cache=300, enable_cleanup_closed=True
            )
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=True, skip_auto_headers=("User-Agent",)
            )
        return self._session

    async def send(
        self, req: UpstreamRequest, *, provider: str, timeouts: AttemptTimeouts | None = None
    ) -> UpstreamResponse:
        """POST ``req`` and wait for the response headers.

        Raises :class:`ConnectionFailed` when the socket cannot be opened within ``connect_s`` or is
        refused, :class:`Timeout` when no headers arrive within ``ttft_s``.
        """
        t = timeouts or self.timeouts
        try:
            async with asyncio.timeout(t.ttft_s):
                return await self._post(req, provider, t)
        except TimeoutError:
            raise _ttft_timeout(provider, t) from None

    async def fetch(
        self, req: UpstreamRequest, *, provider: str, timeouts: AttemptTimeouts | None = None
    ) -> tuple[UpstreamResponse, bytes]:
        """POST ``req`` and read the whole body (a non-streaming attempt): the headers must arrive
        within ``ttft_s`` and the body within ``total_s`` of the start (RESIL-6), under one timer
        rather than one per phase (PERF-2). Raises as :meth:`send` and :meth:`UpstreamResponse.read`.
        """
        t = timeouts or self.timeouts
        start = asyncio.get_running_loop().time()
        resp: UpstreamResponse | None = None
        try:
            async with asyncio.timeout(min(t.ttft_s, t.total_s)) as cm:
                resp = await self._post(req, provider, t)
                cm.reschedule(start + t.total_s)
                return resp, await resp.read_now()
        except BaseException as exc:
            if resp is not None:
                resp.close()
            if isinstance(exc, TimeoutError):
                raise (_ttft_timeout if resp is None else _body_timeout)(provider, t) from None
            raise

    async def _post(self, req: UpstreamRequest, provider: str, t: AttemptTimeouts) -> UpstreamResponse:
        session = self._ensure()
        ctimeout = self._connect_timeouts.get(t.connect_s)
        if ctimeout is None:
            if len(self._connect_timeouts) > 64:
                self._connect_timeouts.clear()
            ctimeout = aiohttp.ClientTimeout(total=None, sock_connect=t.connect_s, connect=t.connect_s)
            self._connect_timeouts[t.connect_s] = ctimeout
        try:
            resp = await session.post(req.url, data=req.body, headers=req.headers, timeout=ctimeout)
        except aiohttp.ClientConnectorError as exc:
            raise ConnectionFailed(
                f"{provider}: cannot connect to {exc.host}:{exc.port} ({exc.strerror or exc})",
                provider=provider,
            ) from None
        except (aiohttp.ServerTimeoutError, aiohttp.ConnectionTimeoutError):
            raise Timeout(f"{provider}: connect timeout after {t.connect_s:g}s", provider=provider) from None
        except (aiohttp.ClientError, ConnectionError, OSError) as exc:
            raise ConnectionFailed(
                f"{provider}: upstream connection failed ({exc.__class__.__name__}: {exc})", provider=provider
            ) from None
        return UpstreamResponse(resp, provider, t)

    async def get(self, url: str, headers: dict[str, str], *, timeout_s: float = 5.0) -> tuple[int, bytes]:
        """A plain GET (``doctor`` reachability checks); raises :class:`UpstreamError` subclasses."""
        session = self._ensure()
        try:
            async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)) as r:
                return r.status, await r.read()
        except TimeoutError:
            raise Timeout(f"GET {url}: timeout after {timeout_s:g}s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise ConnectionFailed(f"GET {url}: {exc.__class__.__name__}: {exc}") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _ttft_timeout(provider: str, t: AttemptTimeouts) -> Timeout:
    return Timeout(f"{provider}: no response headers within {t.ttft_s:g}s (TTFT timeout)", provider=provider)


def _body_timeout(provider: str, t: AttemptTimeouts) -> Timeout:
    return Timeout(f"{provider}: response body not complete after {t.total_s:g}s", provider=provider)


__all__ = ["AttemptTimeouts", "UpstreamClient", "UpstreamError", "UpstreamResponse"]
