"""Signed reasoning through the stream translators: an Anthropic upstream's thinking block reaches a
canonical stream whole (text and signature), and an Anthropic client's stream renders a canonical
thinking block as ``thinking_delta`` + ``signature_delta`` (or a redacted block whole)."""

from __future__ import annotations

from typing import Any

import orjson

from omniroute.values import Usage
from omniroute.wire.anthropic.outbound import AnthropicStreamEncoder
from omniroute.wire.anthropic.upstream import AnthropicStreamParser
from omniroute.wire.reasoning import block_family, seal


def _events(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in data.split(b"\n") if line.startswith(b"data: ")]


def _feed(parser: AnthropicStreamParser, *events: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in events:
        out += parser.feed(str(e["type"]), orjson.dumps(e))
    return out


def test_streamed_anthropic_thinking_reaches_the_canonical_stream_with_its_signature() -> None:
    chunks = _feed(
        AnthropicStreamParser("p", "m"),
        {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Let me "},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "think."},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "c2ln"},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "redacted_thinking", "data": "ZW5j"},
        },
        {"type": "content_block_stop", "index": 1},
    )
    blocks = [b for c in chunks for b in c["choices"][0]["delta"].get("thinking_blocks", [])]
    assert blocks == [
        {"type": "thinking", "thinking": "Let me think.", "signature": "c2ln"},
        {"type": "redacted_thinking", "data": "ZW5j"},
    ]
    assert [block_family(b) for b in blocks] == ["anthropic", "anthropic"]


def test_anthropic_client_stream_gets_signature_delta_for_a_canonical_thinking_block() -> None:
    enc = AnthropicStreamEncoder("m")
    delta: dict[str, Any] = {"reasoning_content": "Let me think."}

    def chunk(d: dict[str, Any]) -> dict[str, Any]:
        return {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": d, "finish_reason": None}]}

    out = enc.chunk(chunk(delta))
    out += enc.chunk(
        chunk({"thinking_blocks": [{"type": "thinking", "thinking": "Let me think.", "signature": "c2ln"}]})
    )
    out += enc.chunk(chunk({"thinking_blocks": [{"type": "redacted_thinking", "data": "ZW5j"}]}))
    out += enc.chunk(chunk({"content": "Hi"}))
    out += enc.end(Usage(5, 2))
    deltas = [e["delta"] for e in _events(out) if e["type"] == "content_block_delta"]
    assert deltas[:2] == [
        {"type": "thinking_delta", "thinking": "Let me think."},
        {"type": "signature_delta", "signature": "c2ln"},
    ]
    starts = [e["content_block"]["type"] for e in _events(out) if e["type"] == "content_block_start"]
    assert starts == ["thinking", "redacted_thinking", "text"]


def test_a_sealed_signature_names_its_family_and_an_empty_one_none() -> None:
    assert (
        block_family({"type": "thinking", "thinking": "x", "signature": seal({"family": "gemini"})})
        == "gemini"
    )
    assert block_family({"type": "thinking", "thinking": "x", "signature": ""}) is None
    assert block_family({"type": "thinking", "thinking": "x", "signature": "omr1.not-base64!"}) is None
