"""Small I/O helpers of the fake providers: heartbeats while a slow first token waits, SSE framing
and the API key a request carried."""

from __future__ import annotations

import asyncio
import time

import orjson
from aiohttp import web

from omniroute.testing.faults import Event


async def _sleep_with_heartbeats(resp: web.StreamResponse, ms: int, heartbeat_ms: int) -> None:
    """Sleep ``ms``; with ``heartbeat_ms`` write an SSE comment every ``heartbeat_ms`` meanwhile (what
    llama.cpp, vLLM and proxies send while a slow model prepares its first token)."""
    if not heartbeat_ms:
        await asyncio.sleep(ms / 1000)
        return
    left = ms
    while left > 0:
        step = min(heartbeat_ms, left)
        await asyncio.sleep(step / 1000)
        left -= step
        if left > 0:
            await resp.write(b": keep-alive\n\n")


def _frame(event: Event, stamp: bool) -> bytes:
    if isinstance(event.data, str):
        payload = event.data.encode()
    else:
        data = dict(event.data)
        if stamp:
            data["x_stamp_ns"] = time.time_ns()
        payload = orjson.dumps(data)
    head = f"event: {event.name}\n".encode() if event.name else b""
    return head + b"data: " + payload + b"\n\n"


def _sent_key(request: web.Request) -> str:
    """The API key a request carried, in any of the three formats' places ("" when none)."""
    bearer = request.headers.get("Authorization", "")
    if bearer.lower().startswith("bearer "):
        return bearer[7:].strip()
    return (
        request.headers.get("x-api-key")
        or request.headers.get("x-goog-api-key")
        or request.query.get("key", "")
    )
