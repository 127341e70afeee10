"""The physical limit for this stack (SPEC §12): a bare pass-through proxy built from the gateway's parts.

A raw ASGI callable on uvicorn (uvloop, httptools) with one aiohttp ``ClientSession``, no routing, no
auth, no parsing: it forwards the request body to the upstream's same path and streams the response
bytes back as they arrive (``iter_any``), with a ``content-length`` for a complete body. Whatever the
gateway spends beyond this is the price of its features.

Run: ``python -m bench.bare_proxy --port P --upstream http://127.0.0.1:U``.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import aiohttp

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_JSON = b"application/json"


class BareProxy:
    """ASGI pass-through to ``upstream`` (``http://host:port``) over one pooled aiohttp session."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                self.session = aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=1000, limit_per_host=0),
                    skip_auto_headers=("User-Agent",),
                )
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                if self.session is not None:
                    await self.session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.session is not None
        chunks: list[bytes] = []
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        async with self.session.post(
            self.upstream + scope["path"], data=body, headers={"Content-Type": "application/json"}
        ) as resp:
            ctype = resp.headers.get("Content-Type", "application/json").encode("latin-1")
            if resp.headers.get("Content-Length") is not None:
                data = await resp.read()
                await send(
                    {
                        "type": "http.response.start",
                        "status": resp.status,
                        "headers": [(b"content-type", ctype), (b"content-length", b"%d" % len(data))],
                    }
                )
                await send({"type": "http.response.body", "body": data})
                return
            await send(
                {"type": "http.response.start", "status": resp.status, "headers": [(b"content-type", ctype)]}
            )
            async for data in resp.content.iter_any():
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description="Bare pass-through proxy (the benchmark's physical limit).")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--upstream", required=True, help="http://127.0.0.1:PORT of the fake upstream")
    args = ap.parse_args(argv)
    uvicorn.run(
        BareProxy(args.upstream),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
