"""Raw ASGI helpers for the ``/v1`` hot path (DESIGN: plain ASGI handlers that write to ``send``).

Framework response classes cost about 40 % of streaming throughput (DESIGN "Built on"), so the hot
path reads the body and writes responses itself with these few helpers.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import orjson

from omniroute.deadlines import BodyDeadlines
from omniroute.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]

JSON_CT = (b"content-type", b"application/json")
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def header_map(scope: Scope) -> dict[str, str]:
    """Request headers as a dict with lower-case names (last value wins); values are read as UTF-8
    (what clients send for ``X-Route-Model: ü-modell``), as latin-1 when they are not valid UTF-8."""
    return {k.decode("latin-1"): _header_text(v) for k, v in scope["headers"]}


def _header_text(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def query_map(scope: Scope) -> dict[str, str]:
    """The query string as a flat dict."""
    from urllib.parse import parse_qsl

    qs = scope.get("query_string", b"")
    return dict(parse_qsl(qs.decode("latin-1"))) if qs else {}


async def read_body(
    receive: Receive,
    limit: int,
    declared: str | None = None,
    deadlines: BodyDeadlines | None = None,
    encoding: str | None = None,
) -> bytes:
    """The whole request body, decoded per its ``Content-Encoding`` (``encoding``, see
    :func:`decode_content`); raises :class:`PayloadTooLarge` past ``limit`` bytes (OPS-2
    max_body_mb) sent or decoded, at once when the declared ``Content-Length`` is already larger,
    :class:`UnsupportedMediaType` (415) for an encoding it cannot decode, and
    :class:`RequestTimeout` (408) when the body does not arrive within the ``deadlines`` allowance
    (default :data:`~omniroute.deadlines.BODY_TIMEOUT_S`)."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    codings = _codings(encoding)
    if deadlines is None:
        deadlines = BodyDeadlines()
    raw = await deadlines.run(lambda: _read_body(receive, limit))
    for coding in reversed(codings):  # applied in the order listed, so undone in reverse
        raw = decode_content(raw, coding, limit)
    return raw


CONTENT_CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""Request ``Content-Encoding`` values decoded, with their zlib ``wbits`` (RFC 9110 §8.4.1: gzip,
deflate = zlib format; ``identity`` is the absence of one). Others are a 415."""


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"Request body exceeds the limit of {limit / (1024 * 1024):g} MB (server.max_body_mb)."
    )


def _codings(encoding: str | None) -> list[str]:
    """The non-identity codings of a ``Content-Encoding`` value; a 415 naming the header for one
    that is not in :data:`CONTENT_CODINGS`."""
    if not encoding:
        return []
    codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    for c in codings:
        if c not in CONTENT_CODINGS:
            raise UnsupportedMediaType(
                f"Unsupported Content-Encoding '{c[:50]}': send the body uncompressed or as gzip or deflate.",
                param="content-encoding",
            )
    return codings


def decode_content(raw: bytes, coding: str, limit: int) -> bytes:
    """``raw`` decoded from ``coding`` (a :data:`CONTENT_CODINGS` key; ``deflate`` also accepts raw
    DEFLATE without the zlib wrapper), never inflating past ``limit`` bytes
    (:class:`PayloadTooLarge`, so a small compressed bomb cannot exhaust memory); corrupt or truncated
    data is an :class:`InvalidRequest` naming ``content-encoding``."""
    try:
        return _inflate(raw, CONTENT_CODINGS[coding], limit)
    except zlib.error:
        if coding == "deflate":
            with contextlib.suppress(zlib.error):
                return _inflate(raw, -zlib.MAX_WBITS, limit)
    raise InvalidRequest(
        f"The request body is not valid {coding} data (Content-Encoding: {coding}).",
        param="content-encoding",
    )


def _inflate(raw: bytes, wbits: int, limit: int) -> bytes:
    """Inflate one stream; :class:`zlib.error` when corrupt or cut short."""
    d = zlib.decompressobj(wbits)
    out = d.decompress(raw, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise _too_large(limit)
    out += d.flush()
    if not d.eof:
        raise zlib.error("truncated stream")
    return out


async def _read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return b""
        chunk = msg.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(
                    f"Request body exceeds the limit of {limit / (1024 * 1024):g} MB (server.max_body_mb).",
                )
            chunks.append(chunk)
        if not msg.get("more_body", False):
            break
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


MAX_JSON_DEPTH = 64
"""Deepest nesting of objects and arrays accepted in a client body. Bodies are rebuilt recursively
for the upstream and orjson writes at most 254 levels, so deeper input would fail there with a 500;
real requests, tool schemas included, stay far below 64."""
_ORJSON_DUMPS_MAX_DEPTH = 254  # orjson.dumps refuses deeper values with "Recursion limit reached"


def _too_deep(body: bytes, data: Any) -> bool:
    """Whether ``data`` (parsed from ``body``) nests deeper than :data:`MAX_JSON_DEPTH`.

    A body with fewer brackets than the limit cannot be; otherwise ``data`` is serialised inside
    ``254 - MAX_JSON_DEPTH`` one-element arrays, so orjson's own fixed limit trips exactly when
    ``data`` is too deep: one C pass instead of a walk of every value in Python (hot path).
    """
    if body.count(b"{") + body.count(b"[") <= MAX_JSON_DEPTH:
        return False
    wrapped = data
    for _ in range(_ORJSON_DUMPS_MAX_DEPTH - MAX_JSON_DEPTH):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except orjson.JSONEncodeError as exc:
        return "Recursion limit" in str(exc)
    return False


def _too_deep_error() -> InvalidRequest:
    return InvalidRequest(
        f"The request body nests objects and arrays deeper than {MAX_JSON_DEPTH} levels.", param="body"
    )


def parse_json_object(body: bytes, content_type: str | None) -> dict[str, Any]:
    """Decode a JSON object body; raises :class:`InvalidRequest` naming what is wrong (API-6),
    nesting deeper than :data:`MAX_JSON_DEPTH` included."""
    if content_type is not None and "json" not in content_type.lower():
        raise InvalidRequest(
            f"Unsupported Content-Type '{content_type}': send the body as application/json.",
            param="content-type",
        )
    if not body:
        raise InvalidRequest("The request body is empty: send a JSON object.", param="body")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("depth limit exceeded"):  # deeper than orjson reads at all
            raise _too_deep_error() from None
        raise InvalidRequest(f"The request body is not valid JSON: {exc}.", param="body") from None
    if _too_deep(body, data):
        raise _too_deep_error()
    if not isinstance(data, dict):
        raise InvalidRequest("The request body must be a JSON object.", param="body")
    return data


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    headers: Iterable[tuple[bytes, bytes]] = (),
    content_type: bytes | None = None,
) -> None:
    """Send a complete response with ``body`` (JSON by default)."""
    hdrs = [
        (b"content-type", content_type) if content_type else JSON_CT,
        (b"content-length", str(len(body)).encode()),
    ]
    hdrs.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})


async def send_json(send: Send, status: int, obj: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Send ``obj`` as JSON (orjson)."""
    await send_bytes(send, status, orjson.dumps(obj), headers)


_CONTROL = bytes(range(0x20)) + b"\x7f"
MAX_HEADER_VALUE = 2048  # bytes; longer values (e.g. a huge decision summary) are truncated


def header_value(v: str) -> bytes:
    """A header value that is always valid on the wire: latin-1 (others → ``?``), no control
    characters, at most :data:`MAX_HEADER_VALUE` bytes."""
    b = v.encode("latin-1", "replace")
    if not v.isprintable():
        b = b.translate(None, _CONTROL)
    return b[:MAX_HEADER_VALUE]


def encode_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """``{name: value}`` → ASGI header pairs, values made safe by :func:`header_value`."""
    return [(k.lower().encode("latin-1"), header_value(v)) for k, v in headers.items()]
