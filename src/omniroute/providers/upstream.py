"""The upstream client: the only place that does HTTP to providers (PROV-4, DESIGN house style 4).

One pooled aiohttp ``ClientSession`` per process with keep-alive and no retries of its own (the
engine is the only retry layer). Third-party exceptions become :mod:`omniroute.errors` types here,
at this one boundary. Timeouts follow RESIL-6: ``connect_s`` to open the socket, ``ttft_s`` until the
response headers (and, for streams, until the first event), ``idle_s`` between body reads (stream
events, or the chunks of a whole body) and ``total_s`` for the whole attempt. They are socket
timeouts, so they run on the event loop's real time (``asyncio.timeout``), not on the gateway's
injected clock. What is read is bounded by
:class:`ReadLimits` (config ``upstream_limits``): a whole body, and each stream event, which is
assembled in linear time.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from omniroute.core.egress import EgressDenied, EgressPolicy
from omniroute.errors import ConnectionFailed, ResponseTooLarge, StreamBroken, Timeout, UpstreamError


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


MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """The most read from one upstream response, in bytes after decompression (config
    ``upstream_limits``, whose defaults these are): a whole body, and one SSE event of a stream."""

    max_body_bytes: int = 32 * MB
    max_event_bytes: int = 8 * MB

    @classmethod
    def from_mb(cls, max_response_mb: float, max_event_mb: float) -> ReadLimits:
        """Limits from the config's megabytes (1 MB = 2**20 bytes)."""
        return cls(int(max_response_mb * MB), int(max_event_mb * MB))


class SseAssembler:
    """Incremental SSE parser: :meth:`feed` raw bytes as they arrive, get the complete events.

    Linear in the bytes fed, however an event is split: a line still arriving is kept as a list of
    pieces (joined once, when its newline comes) and complete lines of an unfinished event are parsed
    at once, so no byte is scanned or copied more than twice. An event whose data outgrows
    ``max_event_bytes`` raises :class:`ResponseTooLarge` as soon as it does, before more is buffered.
    """

    __slots__ = ("_data", "_event", "_partial", "_partial_size", "_size", "max_event_bytes", "provider")

    def __init__(self, max_event_bytes: int, provider: str = "") -> None:
        self.max_event_bytes = max_event_bytes
        self.provider = provider
        self._event = ""
        self._data: list[bytes] = []
        self._size = 0  # bytes of ``_data`` (plus its line breaks)
        self._partial: list[bytes] = []  # the line still arriving, in pieces
        self._partial_size = 0

    def feed(self, chunk: bytes) -> tuple[list[tuple[str, bytes]], bool]:
        """The ``(event, data)`` pairs ``chunk`` completes, and whether it held a comment line (a
        heartbeat: the upstream is alive)."""
        if b"\n" not in chunk:
            self._partial.append(chunk)
            self._partial_size += len(chunk)
            self._check(self._size + self._partial_size)
            return [], False
        buf = b"".join((*self._partial, chunk)) if self._partial else chunk
        batch: list[tuple[str, bytes]] = []
        alive = False
        if not self._data and not self._event and b"\r" not in buf:
            # Whole events at once: split on the blank line ending each; the usual one-line
            # ``data: …`` event needs no line parsing at all.
            blocks = buf.split(b"\n\n")
            rest = blocks.pop()
            for block in blocks:
                self._check(len(block))
                if block[:6] == b"data: " and b"\n" not in block:
                    batch.append(("", block[6:]))
                elif block:
                    alive = self._lines([*block.split(b"\n"), b""], batch) or alive
            cut = rest.rfind(b"\n")
            if cut >= 0:  # the complete lines of an unfinished event: parsed now, never rescanned
                alive = self._lines(rest[:cut].split(b"\n"), batch) or alive
                rest = rest[cut + 1 :]
        else:
            lines = buf.split(b"\n")
            rest = lines.pop()
            alive = self._lines(lines, batch)
        self._partial = [rest] if rest else []
        self._partial_size = len(rest)
        self._check(self._size + self._partial_size)
        return batch, alive

    def finish(self) -> list[tuple[str, bytes]]:
        """At the end of the stream: the last event, even without its blank line."""
        batch: list[tuple[str, bytes]] = []
        rest = b"".join(self._partial)
        self._lines([*(rest.split(b"\n") if rest else ()), b""], batch)
        self._partial, self._partial_size = [], 0
        return batch

    def _lines(self, lines: list[bytes], batch: list[tuple[str, bytes]]) -> bool:
        alive = False
        for line in lines:
            if line[-1:] == b"\r":
                line = line[:-1]
            if not line:  # a blank line ends the event
                if self._data:
                    batch.append((self._event, b"\n".join(self._data)))
                self._event, self._data, self._size = "", [], 0
            elif line[:1] == b":":
                alive = True  # comment / heartbeat
            elif line.startswith(b"event:"):
                self._event = line[6:].strip().decode("utf-8", "replace")
            elif line.startswith(b"data:"):  # one optional space after the colon is dropped
                value = line[6:] if line[5:6] == b" " else line[5:]
                self._data.append(value)
                self._size += len(value) + 1
        return alive

    def _check(self, size: int) -> None:
        if size > self.max_event_bytes:
            raise _too_large(self.provider, "stream event", self.max_event_bytes, 200)


class UpstreamResponse:
    """An upstream response whose headers have arrived. ``status``, ``headers`` (lower-case keys).

    Read it with :meth:`read` (whole body) or :meth:`events` (SSE); always :meth:`close` it.
    """

    __slots__ = ("_resp", "headers", "limits", "provider", "status", "timeouts")

    def __init__(
        self,
        resp: aiohttp.ClientResponse,
        provider: str,
        timeouts: AttemptTimeouts,
        limits: ReadLimits | None = None,
    ) -> None:
        self._resp = resp
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.headers.items()}
        self.provider = provider
        self.timeouts = timeouts
        self.limits = limits or ReadLimits()

    async def read(self) -> bytes:
        """The whole body; raises :class:`Timeout` when a read waits longer than ``idle_s`` or the
        body is not complete after ``total_s``, and :class:`StreamBroken` on a cut."""
        deadline = asyncio.get_running_loop().time() + self.timeouts.total_s
        try:
            async with asyncio.timeout_at(deadline) as timer:
                return await self.read_now(timer, deadline)
        except TimeoutError:
            raise _body_timeout(self.provider, self.timeouts, deadline) from None

    async def read_now(self, timer: asyncio.Timeout | None = None, deadline: float = 0.0) -> bytes:
        """The whole body; :class:`StreamBroken` on a cut connection, :class:`ResponseTooLarge` past
        ``limits.max_body_bytes`` (counted after decompression, which aiohttp ≥ 3.13.3 does in
        bounded steps, so a gzip bomb stops there).

        With ``timer`` (the caller's ``asyncio.timeout``), each read must complete within ``idle_s``
        and the last by ``deadline`` (event-loop seconds): an upstream that sent its headers and then
        stalls is given up after ``idle_s``, not ``total_s`` (RESIL-6). Without it the caller bounds
        the read."""
        limit = self.limits.max_body_bytes
        parts: list[bytes] = []
        size = 0
        idle = self.timeouts.idle_s
        loop = asyncio.get_running_loop()
        content = self._resp.content
        try:
            # A body already complete (the usual small answer, read with its headers) cannot stall:
            # no idle timer is rearmed for it, which saves a timer-heap update per read.
            if timer is not None and not content.is_eof():
                timer.reschedule(min(loop.time() + idle, deadline))
            async for chunk in content.iter_any():
                if timer is not None and not content.is_eof():
                    timer.reschedule(min(loop.time() + idle, deadline))
                size += len(chunk)
                if size > limit:
                    raise _too_large(self.provider, "response body", limit, self.status)
                parts.append(chunk)
        except (aiohttp.ClientError, ConnectionError) as exc:
            raise StreamBroken(
                f"{self.provider}: connection lost while reading the body ({exc.__class__.__name__})",
                provider=self.provider,
            ) from None
        return b"".join(parts)

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
        :class:`StreamBroken`, an event over ``limits.max_event_bytes`` :class:`ResponseTooLarge`.
        Comment lines (heartbeats) keep the stream alive without yielding.

        A burst of events costs one read, one timer reset and one hop through this generator rather
        than one per line; every batch is yielded as soon as its read completes, so nothing waits
        for later network data (PERF-4).
        """
        content = self._resp.content
        loop = asyncio.get_running_loop()
        idle = self.timeouts.idle_s
        wait = first_timeout_s if first_timeout_s is not None else idle
        sse = SseAssembler(self.limits.max_event_bytes, self.provider)
        got_any = False
        try:
            async with asyncio.timeout(wait) as cm:
                while True:
                    chunk = await content.readany()
                    if not chunk:
                        last = sse.finish()
                        if last:
                            yield last
                        return
                    batch, alive = sse.feed(chunk)
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

    def close(self) -> None:
        """Release the connection (aborting it when the body was not fully read)."""
        self._resp.close()


class PolicyResolver(AbstractResolver):
    """An aiohttp resolver that drops resolved addresses the policy refuses (a host name that
    resolves, or later re-resolves, to a metadata or refused address cannot receive a key).
    When every address is refused, raises :class:`OSError` (aiohttp reports a connection failure)."""

    def __init__(self, policy: Callable[[], EgressPolicy], inner: AbstractResolver | None = None) -> None:
        from aiohttp.resolver import DefaultResolver

        self._policy = policy  # read per lookup: a config reload changes it
        self._inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """The inner resolver's results minus refused addresses; :class:`OSError` if none is left."""
        policy = self._policy()
        results = await self._inner.resolve(host, port, family)
        kept: list[ResolveResult] = []
        reasons: list[str] = []
        for r in results:
            try:
                policy.check_address(ipaddress.ip_address(r["host"].split("%", 1)[0]), host)
            except (EgressDenied, ValueError) as exc:
                reasons.append(str(exc))
                continue
            kept.append(r)
        if not kept:
            raise OSError(f"every address of {host} is refused by the base_url policy: {'; '.join(reasons)}")
        return kept

    async def close(self) -> None:
        """Close the inner resolver."""
        await self._inner.close()


class UpstreamClient:
    """Owns the process's single aiohttp session (PROV-4). Create once at start-up, ``close`` at exit."""

    def __init__(
        self,
        timeouts: AttemptTimeouts,
        *,
        limits: ReadLimits | None = None,
        limit: int = 1000,
        policy: EgressPolicy | None = None,
    ) -> None:
        self.timeouts = timeouts
        self.limits = limits or ReadLimits()
        #: where keys may go: checked on every request's URL and on every resolved address
        self.policy = policy or EgressPolicy()
        self._limit = limit
        self._session: aiohttp.ClientSession | None = None
        # one immutable ClientTimeout per connect timeout, instead of one per request
        self._connect_timeouts: dict[float, aiohttp.ClientTimeout] = {}

    def _ensure(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._limit,
                limit_per_host=0,
                ttl_dns_cache=300,
                enable_cleanup_closed=True,
                resolver=PolicyResolver(lambda: self.policy),
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
        within ``ttft_s``, each body read within ``idle_s`` and the whole body within ``total_s`` of
        the start (RESIL-6), under one timer rather than one per phase (PERF-2). Raises as
        :meth:`send` and :meth:`UpstreamResponse.read`.
        """
        t = timeouts or self.timeouts
        deadline = asyncio.get_running_loop().time() + t.total_s
        resp: UpstreamResponse | None = None
        try:
            async with asyncio.timeout(min(t.ttft_s, t.total_s)) as timer:
                resp = await self._post(req, provider, t)
                return resp, await resp.read_now(timer, deadline)
        except BaseException as exc:
            if resp is not None:
                resp.close()
            if isinstance(exc, TimeoutError):
                if resp is None:
                    raise _ttft_timeout(provider, t) from None
                raise _body_timeout(provider, t, deadline) from None
            raise

    async def _post(self, req: UpstreamRequest, provider: str, t: AttemptTimeouts) -> UpstreamResponse:
        self._check_url(req.url, provider)
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
        return UpstreamResponse(resp, provider, t, self.limits)

    def _check_url(self, url: str, provider: str) -> None:
        """The request-time re-check of the ``base_url`` policy (a literal address or a refused name;
        resolved names are checked by :class:`PolicyResolver`): :class:`ConnectionFailed` if refused."""
        try:
            self.policy.check_url(url)
        except EgressDenied as exc:
            raise ConnectionFailed(f"{provider}: {exc}", provider=provider) from None

    async def get(self, url: str, headers: dict[str, str], *, timeout_s: float = 5.0) -> tuple[int, bytes]:
        """A plain GET (``doctor`` reachability checks); raises :class:`UpstreamError` subclasses."""
        self._check_url(url, url)
        session = self._ensure()
        try:
            async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)) as r:
                return r.status, await UpstreamResponse(r, url, self.timeouts, self.limits).read_now()
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


def _too_large(provider: str, what: str, limit: int, status: int) -> ResponseTooLarge:
    return ResponseTooLarge(
        f"{provider}: upstream {what} larger than {limit / MB:g} MB (upstream_limits)",
        provider=provider,
        upstream_status=status,
    )


def _body_timeout(provider: str, t: AttemptTimeouts, deadline: float) -> Timeout:
    """The idle timeout unless the attempt's ``deadline`` (event-loop seconds) has passed."""
    if asyncio.get_running_loop().time() < deadline:
        return Timeout(f"{provider}: no body data for {t.idle_s:g}s (idle timeout)", provider=provider)
    return Timeout(f"{provider}: response body not complete after {t.total_s:g}s", provider=provider)


__all__ = [
    "AttemptTimeouts",
    "ReadLimits",
    "SseAssembler",
    "UpstreamClient",
    "UpstreamError",
    "UpstreamResponse",
]
