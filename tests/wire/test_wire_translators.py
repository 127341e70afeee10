"""Unit tests of the pure wire-format translators and adapter helpers (SPEC PROV-1, API-3, API-4,
API-6, RESIL-9): the details the end-to-end suites do not pin one by one."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from omniroute.errors import InvalidRequest, StreamBroken
from omniroute.values import Candidate, Connection, ModelInfo, ProviderInfo, Usage
from omniroute.wire._common import NATIVE, call_id, signature_of
from omniroute.wire.anthropic import inbound as anthropic_in
from omniroute.wire.anthropic.outbound import AnthropicStreamEncoder, render_message
from omniroute.wire.anthropic.upstream import AnthropicStreamParser, messages_url, to_anthropic_request
from omniroute.wire.gemini import inbound as gemini_in
from omniroute.wire.gemini.outbound import GeminiStreamEncoder
from omniroute.wire.gemini.upstream import gemini_schema, generate_url
from omniroute.wire.responses import inbound as responses_in
from omniroute.wire.responses.outbound import ResponsesStreamEncoder, render_response


def sse_events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for frame in data.split(b"\n\n"):
        if not frame:
            continue
        event, payload = "", b""
        for line in frame.split(b"\n"):
            if line.startswith(b"event: "):
                event = line[7:].decode()
            elif line.startswith(b"data: "):
                payload = line[6:]
        out.append((event, orjson.loads(payload)))
    return out


def ch(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = (
        []
        if delta is None and finish is None
        else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    )
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": choices,
        **extra,
    }


CAND = Candidate(
    ProviderInfo(id="p", format="anthropic", base_url="http://h"),
    Connection(id="c", provider="p"),
    ModelInfo(id="m", max_output_tokens=30000),
)


def test_anthropic_url_never_doubles_v1() -> None:
    """PROV-1: the catalog's base URL may or may not end with /v1."""
    assert messages_url("https://api.anthropic.com/v1") == "https://api.anthropic.com/v1/messages"
    assert messages_url("http://127.0.0.1:9/") == "http://127.0.0.1:9/v1/messages"


def test_gemini_url_adds_version_and_strips_models_prefix() -> None:
    assert generate_url("https://g.example/v1beta", "models/gemini-x", stream=True) == (
        "https://g.example/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    )
    assert (
        generate_url("https://g.example", "g", stream=False)
        == "https://g.example/v1beta/models/g:generateContent"
    )


def test_thought_signature_survives_the_tool_call_id() -> None:
    """PROV-1: a Gemini thoughtSignature rides in the tool-call id, URL-safe, and comes back intact."""
    cid = call_id("QUJD+/8=")
    assert all(c.isalnum() or c in "_-" for c in cid)
    assert signature_of(cid) == "QUJD+/8="
    assert signature_of(call_id()) is None


def test_gemini_schema_keeps_only_the_supported_subset() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "$schema": "x",
        "properties": {"u": {"type": ["string", "null"], "format": "uri"}, "n": {"type": "integer"}},
    }
    assert gemini_schema(schema) == {
        "type": "object",
        "properties": {"u": {"type": "string", "nullable": True}, "n": {"type": "integer"}},
    }
    assert gemini_in.json_schema(
        {"type": "OBJECT", "properties": {"a": {"type": "STRING", "nullable": True}}}
    ) == {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}


def test_canonical_to_anthropic_tool_choice_and_thinking() -> None:
    """PROV-1: tool_choice maps to auto/any/tool (+ disable_parallel_tool_use); reasoning_effort becomes a
    thinking budget that fits under max_tokens, and drops temperature as Anthropic requires."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    base = {"messages": [{"role": "user", "content": "x"}], "tools": tools}
    assert to_anthropic_request({**base, "tool_choice": "required"}, CAND)["tool_choice"] == {"type": "any"}
    out = to_anthropic_request(
        {
            **base,
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "parallel_tool_calls": False,
        },
        CAND,
    )
    assert out["tool_choice"] == {"type": "tool", "name": "f", "disable_parallel_tool_use": True}
    out = to_anthropic_request({**base, "reasoning_effort": "high", "temperature": 1.5}, CAND)
    assert out["thinking"] == {"type": "enabled", "budget_tokens": 24576} and "temperature" not in out
    assert out["max_tokens"] == 30000
    small = to_anthropic_request(
        {**base, "reasoning_effort": "high", "max_tokens": 500, "temperature": 1.5}, CAND
    )
    assert "thinking" not in small and small["temperature"] == 1.0


def test_anthropic_request_to_canonical_tool_results_and_thinking() -> None:
    """API-3: tool_result blocks become tool messages before the turn's text (errors flagged, images
    moved to the user message); thinking blocks keep their signature; budget → reasoning_effort."""
    body = {
        "model": "m",
        "max_tokens": 5,
        "thinking": {"type": "enabled", "budget_tokens": 10000},
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and?"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "boom"},
                            {
                                "type": "image",
                                "source": {"type": "base64", "media_type": "image/png", "data": "AA=="},
                            },
                        ],
                    },
                ],
            },
        ],
    }
    anthropic_in.validate(body)
    out = anthropic_in.to_canonical(body)
    assert (
        out["reasoning_effort"] == "high"
        and out["tool_choice"] == "required"
        and out["parallel_tool_calls"] is False
    )
    msgs = out["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "user"]
    assert msgs[1]["thinking_blocks"] == [{"type": "thinking", "thinking": "hmm", "signature": "sig"}]
    assert json.loads(msgs[1]["tool_calls"][0]["function"]["arguments"]) == {"a": 1}
    assert msgs[2] == {"role": "tool", "tool_call_id": "t1", "content": "Error: boom"}
    assert msgs[3]["content"] == [
        {"type": "text", "text": "and?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
    ]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ({"model": "m", "max_tokens": 0, "messages": []}, "max_tokens"),
        ({"model": "m", "max_tokens": 5, "messages": []}, "messages"),
        (
            {"model": "m", "max_tokens": 5, "messages": [{"role": "wizard", "content": "x"}]},
            "messages.0.role",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]}],
            },
            "messages.0.content.0.type",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "tools": [{"name": "f"}],
                "messages": [{"role": "user", "content": "x"}],
            },
            "tools.0.input_schema",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "tool_choice": {"type": "tool"},
                "messages": [{"role": "user", "content": "x"}],
            },
            "tool_choice.name",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "temperature": 1.5,
                "messages": [{"role": "user", "content": "x"}],
            },
            "temperature",
        ),
    ],
)
def test_anthropic_validation_names_the_field(body: dict[str, Any], param: str) -> None:
    """API-6: each bad Anthropic body raises a 400 whose param and message name the field."""
    with pytest.raises(InvalidRequest) as exc:
        anthropic_in.validate(body)
    assert exc.value.param == param and exc.value.message.startswith(param) and exc.value.status == 400


def test_anthropic_encoder_text_and_tool_in_one_chunk_and_no_empty_text_block() -> None:
    """API-3: a leading role chunk opens no block; one chunk with text and a tool-call start yields a
    text block then a tool_use block; finish stop with tools → stop_reason tool_use."""
    enc = AnthropicStreamEncoder("m")
    out = enc.chunk(ch({"role": "assistant", "content": ""}))
    out += enc.chunk(
        ch(
            {
                "content": "Hi",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "f", "arguments": ""},
                    }
                ],
            }
        )
    )
    out += enc.chunk(ch({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}))
    out += enc.chunk(ch({"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}))
    out += enc.chunk(ch(None, "stop"))
    out += enc.end(Usage(10, 3, 4))
    events = sse_events(out)
    assert [e for e, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[1][1]["content_block"]["type"] == "text" and events[1][1]["index"] == 0
    assert events[4][1]["content_block"] == {"type": "tool_use", "id": "call_1", "name": "f", "input": {}}
    assert events[4][1]["index"] == 1
    assert events[8][1]["delta"]["stop_reason"] == "tool_use"
    assert events[8][1]["usage"] == {
        "input_tokens": 6,
        "output_tokens": 3,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 4,
    }


def test_anthropic_encoder_forwards_native_frames() -> None:
    """PROV-1: pass-through chunks are forwarded byte for byte, and nothing is added after message_stop."""
    enc = AnthropicStreamEncoder("m")
    frames = [
        b'event: message_start\ndata: {"type":"message_start"}\n\n',
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ]
    assert b"".join(enc.chunk({**ch(), NATIVE: f}) for f in frames) == b"".join(frames)
    assert enc.end(None) == b""


def test_anthropic_parser_usage_counts_cache_reads_in_the_prompt() -> None:
    """PROV-1: Anthropic's input_tokens excludes cache reads/writes; canonical prompt_tokens includes them."""
    p = AnthropicStreamParser("p", "m")
    p.feed(
        "message_start",
        b'{"type":"message_start","message":{"id":"msg_1","model":"m","usage":'
        b'{"input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}',
    )
    (last,) = p.feed(
        "message_delta",
        b'{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":7}}',
    )
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["usage"] == {
        "prompt_tokens": 105,
        "completion_tokens": 7,
        "total_tokens": 112,
        "prompt_tokens_details": {"cached_tokens": 100},
    }
    with pytest.raises(StreamBroken):
        p.feed("content_block_delta", b"{oops")


def test_render_message_maps_finish_and_usage() -> None:
    msg = render_message(
        {
            "id": "chatcmpl-9",
            "model": "m",
            "choices": [
                {
                    "message": {"role": "assistant", "content": "x", "reasoning_content": "r"},
                    "finish_reason": "length",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }
    )
    assert msg["id"] == "msg_9" and msg["stop_reason"] == "max_tokens"
    assert [b["type"] for b in msg["content"]] == ["thinking", "text"]
    assert msg["usage"]["input_tokens"] == 3 and msg["usage"]["output_tokens"] == 2


def test_responses_input_items_rebuild_the_conversation() -> None:
    """API-4: function_call items join the preceding assistant message; outputs become tool messages."""
    msgs = responses_in.input_messages(
        [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "checking"}],
            },
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "one"},
            {"type": "reasoning", "summary": []},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "two"}],
            },
        ]
    )
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool"]
    assert msgs[1]["content"] == "checking" and [t["id"] for t in msgs[1]["tool_calls"]] == ["c1", "c2"]
    assert msgs[3] == {"role": "tool", "tool_call_id": "c2", "content": "two"}
    body, convo = responses_in.to_canonical({"model": "m", "input": "again", "instructions": "be nice"}, msgs)
    assert body["messages"][0] == {"role": "system", "content": "be nice"} and len(convo) == 5


def test_responses_encoder_event_sequence_and_stored_message() -> None:
    """API-4: text then a tool call → message item events, function_call item events, completed; the
    assistant message of the turn is handed to on_done for previous_response_id storage."""
    stored: list[dict[str, Any]] = []
    enc = ResponsesStreamEncoder("resp_1", 0, {"model": "m"}, "m", stored.append)
    out = enc.chunk(ch({"content": "Hi"}))
    out += enc.chunk(
        ch({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}]})
    )
    out += enc.chunk(ch(None, "tool_calls"))
    out += enc.end(Usage(2, 3))
    events = sse_events(out)
    assert [e for e, _ in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    final = events[-1][1]["response"]
    assert [o["type"] for o in final["output"]] == ["message", "function_call"]
    assert final["usage"]["input_tokens"] == 2 and final["usage"]["output_tokens"] == 3
    assert stored == [
        {
            "role": "assistant",
            "content": "Hi",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        }
    ]


def test_gemini_encoder_sends_function_calls_whole_with_the_finish() -> None:
    """PROV-1: streamed argument fragments are assembled and sent as one functionCall in the final
    event with finishReason and usageMetadata."""
    enc = GeminiStreamEncoder("m")
    assert enc.chunk(ch({"role": "assistant"})) == b""
    enc.chunk(ch({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a"'}}]}))
    enc.chunk(ch({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}))
    enc.chunk(ch(None, "tool_calls"))
    ((_, final),) = sse_events(enc.end(Usage(4, 2)))
    cand = final["candidates"][0]
    assert cand["content"]["parts"] == [{"functionCall": {"id": "c1", "name": "f", "args": {"a": 1}}}]
    assert cand["finishReason"] == "STOP"
    assert final["usageMetadata"] == {"promptTokenCount": 4, "candidatesTokenCount": 2, "totalTokenCount": 6}


def test_gemini_request_matches_function_responses_to_calls() -> None:
    """PROV-1: a functionResponse without id answers the latest open call of the same name."""
    out = gemini_in.to_canonical(
        {
            "contents": [
                {"role": "user", "parts": [{"text": "hi"}]},
                {
                    "role": "model",
                    "parts": [
                        {"functionCall": {"name": "f", "args": {}}},
                        {"functionCall": {"name": "g", "args": {"x": 1}}},
                    ],
                },
                {
                    "role": "user",
                    "parts": [
                        {"functionResponse": {"name": "g", "response": {"ok": True}}},
                        {"functionResponse": {"name": "f", "response": {"ok": False}}},
                    ],
                },
            ]
        },
        "m",
        stream=False,
    )
    calls = out["messages"][1]["tool_calls"]
    assert out["messages"][2]["tool_call_id"] == calls[1]["id"]
    assert out["messages"][3]["tool_call_id"] == calls[0]["id"]


def test_responses_history_keeps_the_call_id_the_client_saw_for_a_tool_call_without_an_id() -> None:
    """API-4: when an upstream's tool call has no id, the client gets a generated ``call_id`` and the
    conversation stored for ``previous_response_id`` carries that same id, so the client's
    ``function_call_output`` for it answers the stored call."""
    call = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    resp = {
        "model": "m",
        "choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
    }
    obj, stored = render_response(resp, "resp_1", 0, {"model": "m"})
    (item,) = obj["output"]
    assert item["call_id"].startswith("call_")
    assert stored == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
