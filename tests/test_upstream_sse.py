"""SSE parsing of upstream streams (API-1/API-3 wire formats): events come out whole and in order
however the bytes are split across socket reads — CRLF, comments, ``event:`` lines, multi-line data
and a last event without its blank line included."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from omniroute.providers.upstream import AttemptTimeouts, UpstreamClient, UpstreamRequest
from omniroute.testing.gateway import free_port

CASES: list[tuple[str, list[bytes], list[tuple[str, bytes]]]] = [
    ("one read", [b"data: a\n\ndata: b\n\n"], [("", b"a"), ("", b"b")]),
    ("split inside a line", [b"data: hel", b"lo\n\ndata: x\n", b"\n"], [("", b"hello"), ("", b"x")]),
    ("split inside the blank line", [b"data: a\n", b"\ndata: b\n\n"], [("", b"a"), ("", b"b")]),
    ("crlf", [b"data: a\r\n\r\ndata: b\r\n", b"\r\n"], [("", b"a"), ("", b"b")]),
    (
        "event names and multi-line data",
        [b'event: message_start\ndata: {"a":1}\n\n', b"data: l1\ndata: l2\n\n"],
        [("message_start", b'{"a":1}'), ("", b"l1\nl2")],
    ),
    ("comments are not events", [b": ping\n\n", b"data: a\n\n: ping\n\n"], [("", b"a")]),
    ("no space after the colon", [b"data:a\n\n"], [("", b"a")]),
    ("extra blank lines", [b"\n\ndata: a\n\n\n\ndata: b\n\n"], [("", b"a"), ("", b"b")]),
    ("last event without its blank line", [b"data: a\n\ndata: b"], [("", b"a"), ("", b"b")]),
    (
        "last event of several lines, unterminated",
        [b"data: a\n\ndata: b\ndata: c\n"],
        [("", b"a"), ("", b"b\nc")],
    ),
    ("partial event carried over", [b"event: e\ndata: x", b"y\n\n"], [("e", b"xy")]),
]


async def _serve(pieces: list[bytes], port: int) -> web.AppRunner:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for p in pieces:
            await resp.write(p)
            await asyncio.sleep(0.02)  # separate socket reads
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


@pytest.mark.parametrize(("name", "pieces", "expected"), CASES, ids=[c[0] for c in CASES])
def test_events_come_out_whole_however_the_bytes_are_split(
    name: str, pieces: list[bytes], expected: list[tuple[str, bytes]]
) -> None:
    async def run() -> list[tuple[str, bytes]]:
        port = free_port()
        runner = await _serve(pieces, port)
        client = UpstreamClient(AttemptTimeouts(ttft_s=5, idle_s=5, total_s=10))
        try:
            req = UpstreamRequest(f"http://127.0.0.1:{port}/v1/chat/completions", {}, b"{}")
            resp = await client.send(req, provider="p")
            try:
                return [e async for e in resp.events()]
            finally:
                resp.close()
        finally:
            await client.close()
            await runner.cleanup()

    assert asyncio.run(run()) == expected
