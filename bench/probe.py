"""Streaming probes at concurrency 1, with a raw asyncio client (httptools parser, uvloop):

* **TTFB** (PERF-1 for streaming): time from sending the request to the first body byte, for the
  normal 20-chunk stream;
* **per-chunk delay** (PERF-4): the upstream's ``stamp`` model writes each event on its own with
  ``time.time_ns()`` as its content; the client records ``arrival − stamp`` per event. The same client
  and clock are used for every configuration, so ``gateway − direct`` is the delay the gateway adds.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httptools

from bench.load import chat_body

_STAMP = re.compile(rb'"content":"(\d{16,})"')


class _Response(asyncio.Protocol):
    """Reads one HTTP/1.1 response at a time; keeps arrival times of body bytes and SSE events."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.now = 0
        self.reset()

    def reset(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.first_body_ns: int | None = None
        self.buf = b""
        self.events: list[tuple[int, bytes]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.now = time.time_ns()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if not self.done.done():
                self.done.set_exception(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError("connection closed"))

    def on_body(self, body: bytes) -> None:
        if self.first_body_ns is None:
            self.first_body_ns = self.now
        self.buf += body
        while b"\n\n" in self.buf:
            ev, self.buf = self.buf.split(b"\n\n", 1)
            self.events.append((self.now, ev))

    def on_message_complete(self) -> None:
        if not self.done.done():
            self.done.set_result(None)

    @property
    def status(self) -> int:
        return int(self.parser.get_status_code())


async def _streams(
    url: str, model: str, headers: Mapping[str, str], count: int
) -> tuple[list[float], list[float], int]:
    """``count`` sequential streaming requests on one keep-alive connection.

    Returns (TTFB ms per request, per-chunk delay ms for stamped events, failed requests)."""
    u = urlsplit(url)
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_connection(_Response, u.hostname, u.port)
    body = chat_body(model, True)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        + "\r\n"
    ).encode()
    ttfb: list[float] = []
    delays: list[float] = []
    failed = 0
    try:
        for _ in range(count):
            proto.reset()
            t0 = time.time_ns()
            transport.write(head + body)
            await asyncio.wait_for(proto.done, 30)
            if proto.status != 200 or proto.first_body_ns is None:
                failed += 1
                continue
            ttfb.append((proto.first_body_ns - t0) / 1e6)
            for arrived, ev in proto.events:
                m = _STAMP.search(ev)
                if m:
                    delays.append((arrived - int(m.group(1))) / 1e6)
    finally:
        transport.close()
    return ttfb, delays, failed


def _summary(xs: list[float]) -> dict[str, float | int]:
    if not xs:
        return {"n": 0}
    s = sorted(xs)
    return {
        "n": len(s),
        "p50_ms": statistics.median(s),
        "p99_ms": s[min(len(s) - 1, int(0.99 * len(s)))],
        "mean_ms": statistics.fmean(s),
    }


def probe(
    url: str, model: str, stamp_model: str, headers: Mapping[str, str], *, ttfb_requests: int,
    stamp_streams: int,
) -> dict[str, Any]:
    """TTFB over ``ttfb_requests`` normal streams and per-chunk delay over ``stamp_streams`` stamped
    streams (20 events each)."""
    from bench.upstream import loop_factory

    async def go() -> dict[str, Any]:
        # warm the path (connection pools, caches) before measuring
        await _streams(url, model, headers, 20)
        ttfb, _, f1 = await _streams(url, model, headers, ttfb_requests)
        _, delays, f2 = await _streams(url, stamp_model, headers, stamp_streams)
        return {"ttfb": _summary(ttfb), "chunk_delay": _summary(delays), "failed": f1 + f2}

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(go())
