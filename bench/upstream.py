"""A minimal, fast fake OpenAI upstream for the benchmark: it must never be the bottleneck.

A raw asyncio protocol on uvloop with httptools' parser (no framework) answering
``POST /v1/chat/completions`` from precomputed bytes:

* non-streaming → one ``chat.completion`` with usage;
* ``"stream": true`` → 20 ``chat.completion.chunk`` events (role + 18 content deltas + a ``stop``
  finish), a usage chunk when ``stream_options.include_usage`` is set, then ``[DONE]`` — all written
  in one ``write`` (no delay);
* model ``long`` (streaming) → the same shape with 200 events (per-chunk CPU cost, :mod:`bench.scale`);
* model ``stamp`` (streaming) → the same 20 events spaced ``--stamp-interval-ms`` apart, each written
  on its own with ``time.time_ns()`` of the moment of writing as its ``delta.content``; the PERF-4 probe
  (:mod:`bench.probe`) subtracts it from the arrival time at the client.

Run: ``python -m bench.upstream --port 0`` prints ``READY <port>`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections.abc import Callable

import httptools
import orjson

CHUNKS = 20
_ID = "chatcmpl-bench"
_CREATED = 1_700_000_000
_STREAM_RE = re.compile(rb'"stream"\s*:\s*true')
_STAMP_RE = re.compile(rb'"model"\s*:\s*"[^"]*stamp')
_USAGE_RE = re.compile(rb'"include_usage"\s*:\s*true')
LONG_CHUNKS = 200
"""Content chunks of model ``long``'s stream (per-chunk CPU cost: its cost minus the 20-chunk one's)."""
_LONG_RE = re.compile(rb'"model"\s*:\s*"[^"]*long"')
USAGE = {"prompt_tokens": 12, "completion_tokens": CHUNKS - 1, "total_tokens": 12 + CHUNKS - 1}


def completion_body() -> bytes:
    """The non-streaming answer."""
    return orjson.dumps(
        {
            "id": _ID,
            "object": "chat.completion",
            "created": _CREATED,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Hello from the benchmark upstream."},
                    "finish_reason": "stop",
                }
            ],
            "usage": USAGE,
        }
    )


def chunk_obj(i: int, content: str | None = None) -> dict[str, object]:
    """Stream chunk ``i`` of :data:`CHUNKS`: role on the first, ``stop`` on the last."""
    if i == CHUNKS - 1:
        delta: dict[str, object] = {}
        finish: str | None = "stop"
    else:
        delta = {"content": content if content is not None else f"tok{i} "}
        if i == 0:
            delta["role"] = "assistant"
        finish = None
    return {
        "id": _ID,
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def sse(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def frame(data: bytes) -> bytes:
    """One HTTP/1.1 chunked-transfer frame."""
    return b"%x\r\n%s\r\n" % (len(data), data)


USAGE_EVENT = sse({"id": _ID, "object": "chat.completion.chunk", "created": _CREATED, "model": "m",
                   "choices": [], "usage": USAGE})
DONE_EVENT = b"data: [DONE]\n\n"
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _full(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


NONSTREAM_RESPONSE = _full(completion_body())
_EVENTS = b"".join(sse(chunk_obj(i)) for i in range(CHUNKS))
STREAM_RESPONSE = STREAM_HEAD + frame(_EVENTS + DONE_EVENT) + b"0\r\n\r\n"
STREAM_USAGE_RESPONSE = STREAM_HEAD + frame(_EVENTS + USAGE_EVENT + DONE_EVENT) + b"0\r\n\r\n"
_LONG_EVENTS = (sse(chunk_obj(0))
                + b"".join(sse(chunk_obj(1 + i % (CHUNKS - 2))) for i in range(LONG_CHUNKS - 2))
                + sse(chunk_obj(CHUNKS - 1)))
LONG_STREAM_RESPONSE = STREAM_HEAD + frame(_LONG_EVENTS + DONE_EVENT) + b"0\r\n\r\n"
LONG_STREAM_USAGE_RESPONSE = STREAM_HEAD + frame(_LONG_EVENTS + USAGE_EVENT + DONE_EVENT) + b"0\r\n\r\n"
MODELS_RESPONSE = _full(orjson.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}))
NOT_FOUND = (
    b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 21\r\n\r\n"
    b'{"error":"not found"}\n'
)


class UpstreamProtocol(asyncio.Protocol):
    """One client connection; HTTP/1.1 keep-alive, one request at a time."""

    def __init__(self, stamp_interval_s: float) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.body: list[bytes] = []
        self.stamp_interval_s = stamp_interval_s

    # asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.close()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self.url = b""
        self.body = []

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        t = self.transport
        if t is None:
            return
        path = self.url.split(b"?", 1)[0]
        if path.endswith(b"/chat/completions"):
            body = b"".join(self.body)
            if _STREAM_RE.search(body):
                if _STAMP_RE.search(body):
                    asyncio.get_running_loop().create_task(self._stamped(t, bool(_USAGE_RE.search(body))))
                    return
                usage = bool(_USAGE_RE.search(body))
                if _LONG_RE.search(body):
                    t.write(LONG_STREAM_USAGE_RESPONSE if usage else LONG_STREAM_RESPONSE)
                else:
                    t.write(STREAM_USAGE_RESPONSE if usage else STREAM_RESPONSE)
            else:
                t.write(NONSTREAM_RESPONSE)
        elif path.endswith(b"/models"):
            t.write(MODELS_RESPONSE)
        else:
            t.write(NOT_FOUND)
        if not self.parser.should_keep_alive():
            t.close()

    async def _stamped(self, t: asyncio.Transport, usage: bool) -> None:
        """The PERF-4 stream: each event written on its own, stamped with the send time (ns)."""
        t.write(STREAM_HEAD)
        for i in range(CHUNKS):
            await asyncio.sleep(self.stamp_interval_s)
            if t.is_closing():
                return
            t.write(frame(sse(chunk_obj(i, str(time.time_ns())))))
        tail = (USAGE_EVENT if usage else b"") + DONE_EVENT
        t.write(frame(tail) + b"0\r\n\r\n")


async def serve(host: str, port: int, stamp_interval_s: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: UpstreamProtocol(stamp_interval_s), host, port, backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    print(f"READY {bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--stamp-interval-ms", type=float, default=2.0)
    args = ap.parse_args(argv)
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(serve(args.host, args.port, args.stamp_interval_ms / 1000))
    except KeyboardInterrupt:
        sys.exit(0)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory when installed (it is, with ``uvicorn[standard]``), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return None
    return uvloop.new_event_loop


if __name__ == "__main__":
    main()
