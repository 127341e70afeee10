"""omniroute.testing: the scripted fake providers behave as their model names say (DESIGN 4, 14).

The shapes are checked with the official ``openai`` and ``anthropic`` SDKs where they matter, and
with raw aiohttp for the faults (SPEC RESIL-2 hints, RESIL-5 statuses, RESIL-8 context windows,
RESIL-9 stream failures) that an SDK would hide.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import anthropic
import openai
import pytest

from omniroute.testing import FakeProvider, FakeProviderThread, parse_behaviour
from omniroute.testing.faults import stream_script

FORMATS = ("openai", "anthropic", "gemini")
WEATHER_TOOL_OPENAI: Any = {
    "type": "function",
    "function": {"name": "lookup_weather", "parameters": {"type": "object", "properties": {}}},
}
WEATHER_TOOL_ANTHROPIC: Any = {"name": "lookup_weather", "input_schema": {"type": "object", "properties": {}}}
ARGUMENTS = {"city": "Paris", "unit": "celsius"}


@pytest.fixture
async def fp() -> AsyncIterator[FakeProvider]:
    async with FakeProvider(name="p1") as provider:
        yield provider


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.fixture
async def oai(fp: FakeProvider) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=f"{fp.base_url}/v1", api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture
async def claude(fp: FakeProvider) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=fp.base_url, api_key="x", max_retries=0) as client:
        yield client


@dataclass
class Sse:
    name: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def request_for(
    fmt: str, model: str, *, stream: bool, text: str = "hello there", **extra: Any
) -> tuple[str, dict[str, Any]]:
    """The path and body of a minimal request in ``fmt``."""
    if fmt == "openai":
        body = {"model": model, "messages": [{"role": "user", "content": text}], "stream": stream}
        return "/v1/chat/completions", body | extra
    if fmt == "anthropic":
        body = {"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": text}]}
        return "/v1/messages", body | {"stream": stream} | extra
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": text}]}]}
    return f"/v1beta/models/{model}:{method}", body | extra


async def stream(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str, model: str, **extra: Any
) -> tuple[list[Sse], BaseException | None]:
    """Every SSE event received, and the exception that broke the stream (None if it ended cleanly)."""
    path, body = request_for(fmt, model, stream=True, **extra)
    events: list[Sse] = []
    name: str | None = None
    try:
        async with session.post(fp.base_url + path, json=body) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            async for raw in resp.content:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    name = line[len("event: ") :]
                elif line.startswith("data: "):
                    events.append(Sse(name, line[len("data: ") :]))
                    name = None
    except aiohttp.ClientPayloadError as exc:
        return events, exc
    return events, None


async def call(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str, model: str, **extra: Any
) -> tuple[int, Any, Any]:
    """Status, headers and JSON body of a non-streaming request."""
    path, body = request_for(fmt, model, stream=False, **extra)
    async with session.post(fp.base_url + path, json=body) as resp:
        return resp.status, resp.headers, await resp.json(content_type=None)


def is_content(fmt: str, event: Sse) -> bool:
    """Whether an event is content-bearing (text, reasoning or tool call; SPEC RESIL-9)."""
    if event.data.startswith("{not") or event.data == "[DONE]":
        return False
    data = event.json()
    if fmt == "openai":
        delta = data["choices"][0]["delta"] if data.get("choices") else {}
        return bool(delta.get("content") or delta.get("tool_calls") or delta.get("reasoning_content"))
    if fmt == "anthropic":
        return data.get("type") == "content_block_delta" and data["delta"]["type"] in (
            "text_delta",
            "thinking_delta",
            "input_json_delta",
        )
    parts = data["candidates"][0]["content"]["parts"] if "candidates" in data else []
    return any(part.get("text") or part.get("functionCall") for part in parts)


def text_of(fmt: str, events: list[Sse]) -> str:
    pieces = []
    for event in events:
        if not is_content(fmt, event):
            continue
        data = event.json()
        if fmt == "openai":
            pieces.append(data["choices"][0]["delta"].get("content") or "")
        elif fmt == "anthropic":
            pieces.append(data["delta"].get("text", ""))
        else:
            parts = data["candidates"][0]["content"]["parts"]
            pieces += [part["text"] for part in parts if "text" in part and not part.get("thought")]
    return "".join(pieces)


# --- grammar -------------------------------------------------------------------------------------


def test_plain_model_name_has_the_default_behaviour() -> None:
    behaviour = parse_behaviour("gpt-4o")
    assert behaviour == parse_behaviour("")
    assert behaviour.chunks == 5 and behaviour.fail_status is None and behaviour.usage == "late"


def test_directives_combine_on_plus_and_unknown_pieces_are_ignored() -> None:
    behaviour = parse_behaviour("openai/gpt-4o+chunks-3+latency-20+bogus-7+stamp+usage-early+ctx-50")
    assert (behaviour.chunks, behaviour.latency_ms, behaviour.stamp) == (3, 20, True)
    assert (behaviour.usage, behaviour.context_limit) == ("early", 50)


def test_fail_directive_takes_retry_after_and_times_suffixes() -> None:
    """RESIL-2 hints: ``fail-429-retry-2`` and ``fail-503-times-2`` parse into status, hint and count."""
    assert parse_behaviour("fail-429-retry-2").retry_after_s == 2
    behaviour = parse_behaviour("m+fail-503-times-2+retry-ms-1500")
    assert (behaviour.fail_status, behaviour.fail_times, behaviour.retry_after_ms) == (503, 2, 1500)


def test_msg_directive_turns_underscores_into_spaces_and_decodes_percent() -> None:
    assert parse_behaviour("msg-context_length_exceeded").message == "context length exceeded"
    assert parse_behaviour("msg-try_again_in_20s%2E").message == "try again in 20s."


def test_stream_script_places_faults_after_k_content_events() -> None:
    """cut/error/stall act right after the K-th content event; the earliest wins; slow-ttft sleeps first."""
    from omniroute.testing._openai import OpenAIRenderer
    from omniroute.testing.faults import Reply

    reply = Reply("r", "m", 0, "abcdef", "", (), "stop", 1, 1, "late", False, 3)
    events = OpenAIRenderer().stream(reply)
    steps = stream_script(events, parse_behaviour("cut-after-2+error-after-1+slow-ttft-5"))
    assert [step.kind for step in steps] == ["send", "sleep", "send", "error"]


# --- plain answers and shapes (SDK-validated) ----------------------------------------------------


async def test_openai_sdk_gets_a_plain_chat_completion(fp: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    raw = await oai.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "say hi please"}]
    )
    completion = raw.parse()
    assert raw.headers["x-fake-provider"] == "p1"
    assert completion.object == "chat.completion" and completion.model == "gpt-4o"
    assert completion.choices[0].message.content == "Hello from p1 (gpt-4o)."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (3, 4)


async def test_openai_sdk_streams_n_chunks_and_a_late_usage_chunk(
    fp: FakeProvider, oai: openai.AsyncOpenAI
) -> None:
    """API-1 / RESIL-9: with include_usage the last chunk has ``choices: []`` and usage, then [DONE]."""
    chunks = [
        chunk
        async for chunk in await oai.chat.completions.create(
            model="gpt-4o+chunks-3",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    ]
    texts = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(texts) == 3 and "".join(texts) == "Hello from p1 (gpt-4o+chunks-3)."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 1 + 4
    assert all(chunk.usage is None for chunk in chunks[:-1])


async def test_openai_stream_without_include_usage_sends_no_usage(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    events, broken = await stream(session, fp, "openai", "m")
    assert broken is None and events[-1].data == "[DONE]"
    assert all("usage" not in event.json() for event in events[:-1])


async def test_anthropic_sdk_gets_a_plain_message(fp: FakeProvider, claude: anthropic.AsyncAnthropic) -> None:
    message = await claude.messages.create(
        model="claude-x",
        max_tokens=50,
        system="be brief",
        messages=[{"role": "user", "content": "say hi"}],
    )
    assert message.type == "message" and message.model == "claude-x"
    assert message.content[0].type == "text" and message.content[0].text == "Hello from p1 (claude-x)."
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (4, 4)


async def test_anthropic_sdk_stream_accumulates_the_message(
    fp: FakeProvider, claude: anthropic.AsyncAnthropic
) -> None:
    async with claude.messages.stream(
        model="claude-x+chunks-4", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    ) as events:
        texts = [text async for text in events.text_stream]
        final = await events.get_final_message()
    assert len(texts) == 4 and "".join(texts) == "Hello from p1 (claude-x+chunks-4)."
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 4


async def test_anthropic_stream_follows_the_documented_event_sequence(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    events, broken = await stream(session, fp, "anthropic", "claude-x+chunks-2")
    assert broken is None
    assert [event.name for event in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(event.json()["type"] == event.name for event in events)
    start, delta = events[0].json(), events[-2].json()
    assert start["message"]["usage"]["input_tokens"] == 2
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] == 4


async def test_gemini_generate_content_returns_parts_finish_and_usage(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    status, headers, body = await call(
        session, fp, "gemini", "gemini-2.0-flash", systemInstruction={"parts": [{"text": "be brief"}]}
    )
    assert status == 200 and headers["x-fake-provider"] == "p1"
    candidate = body["candidates"][0]
    assert candidate["content"] == {"parts": [{"text": "Hello from p1 (gemini-2.0-flash)."}], "role": "model"}
    assert candidate["finishReason"] == "STOP"
    assert body["usageMetadata"] == {"promptTokenCount": 4, "candidatesTokenCount": 4, "totalTokenCount": 8}


async def test_gemini_stream_sends_chunks_and_usage_on_the_last_one(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    events, broken = await stream(session, fp, "gemini", "gemini-x+chunks-3")
    assert broken is None
    assert sum(is_content("gemini", event) for event in events) == 3
    assert text_of("gemini", events) == "Hello from p1 (gemini-x+chunks-3)."
    last = events[-1].json()
    assert (
        last["candidates"][0]["finishReason"] == "STOP" and last["usageMetadata"]["totalTokenCount"] == 2 + 4
    )
    assert all("usageMetadata" not in event.json() for event in events[:-1])


@pytest.mark.parametrize("fmt", FORMATS)
async def test_echo_in_the_last_user_message_sets_the_answer(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str
) -> None:
    events, _ = await stream(session, fp, fmt, "m", text="please echo: the quick fox")
    assert text_of(fmt, events) == "the quick fox"


async def test_constructor_answer_replaces_the_default() -> None:
    async with (
        FakeProvider(answer="fixed words", formats=("openai",)) as provider,
        openai.AsyncOpenAI(base_url=f"{provider.base_url}/v1", api_key="x", max_retries=0) as client,
    ):
        completion = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "?"}]
        )
        assert completion.choices[0].message.content == "fixed words"


@pytest.mark.parametrize(
    ("fmt", "finish"),
    [("openai", "length"), ("anthropic", "max_tokens"), ("gemini", "MAX_TOKENS")],
)
async def test_max_tokens_below_the_answer_truncates_with_a_length_finish(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str, finish: str
) -> None:
    limit = {"gemini": {"generationConfig": {"maxOutputTokens": 2}}}.get(fmt, {"max_tokens": 2})
    _, _, body = await call(session, fp, fmt, "m", **limit)
    if fmt == "openai":
        assert body["choices"][0]["message"]["content"] == "Hello from"
        assert body["choices"][0]["finish_reason"] == finish
    elif fmt == "anthropic":
        assert body["content"][0]["text"] == "Hello from" and body["stop_reason"] == finish
    else:
        assert body["candidates"][0]["finishReason"] == finish


# --- tool calls and reasoning ---------------------------------------------------------------------


async def test_openai_sdk_tool_call_streams_split_arguments_to_the_first_tool(
    fp: FakeProvider, oai: openai.AsyncOpenAI
) -> None:
    chunks = [
        chunk
        async for chunk in await oai.chat.completions.create(
            model="gpt-4o+tool-call",
            messages=[{"role": "user", "content": "weather?"}],
            tools=[WEATHER_TOOL_OPENAI],
            stream=True,
        )
    ]
    deltas = [c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    first, rest = deltas[0], deltas[1:]
    assert first.id and first.type == "function" and first.index == 0
    assert first.function is not None and first.function.name == "lookup_weather"
    assert first.function.arguments == ""
    assert len(rest) >= 3 and all(d.id is None and d.function and d.function.name is None for d in rest)
    assert json.loads("".join(d.function.arguments or "" for d in rest if d.function)) == ARGUMENTS
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_openai_sdk_parallel_tool_calls_when_not_streaming(
    fp: FakeProvider, oai: openai.AsyncOpenAI
) -> None:
    completion = await oai.chat.completions.create(
        model="gpt-4o+tools-2", messages=[{"role": "user", "content": "weather?"}]
    )
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "tool_calls" and message.content is None
    assert message.tool_calls is not None and len(message.tool_calls) == 2
    assert len({call.id for call in message.tool_calls}) == 2
    for tool_call in message.tool_calls:
        assert tool_call.type == "function"
        assert tool_call.function.name == "get_weather"
        assert json.loads(tool_call.function.arguments) == ARGUMENTS


async def test_openai_text_and_tool_share_one_delta(session: aiohttp.ClientSession, fp: FakeProvider) -> None:
    events, _ = await stream(session, fp, "openai", "m+text-and-tool+chunks-2", tools=[WEATHER_TOOL_OPENAI])
    deltas = [event.json()["choices"][0]["delta"] for event in events[:-1] if event.json()["choices"]]
    both = [delta for delta in deltas if delta.get("content") and delta.get("tool_calls")]
    assert len(both) == 1 and both[0]["tool_calls"][0]["function"]["name"] == "lookup_weather"
    assert text_of("openai", events) == "Hello from p1 (m+text-and-tool+chunks-2)."


async def test_anthropic_sdk_tool_use_stream_reassembles_input(
    fp: FakeProvider, claude: anthropic.AsyncAnthropic
) -> None:
    async with claude.messages.stream(
        model="claude-x+tool-call",
        max_tokens=50,
        messages=[{"role": "user", "content": "weather?"}],
        tools=[WEATHER_TOOL_ANTHROPIC],
    ) as events:
        raw = [event async for event in events]
        final = await events.get_final_message()
    pieces = [e for e in raw if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    assert len(pieces) >= 3
    block = final.content[0]
    assert block.type == "tool_use" and block.name == "lookup_weather" and block.input == ARGUMENTS
    assert final.stop_reason == "tool_use"


async def test_anthropic_text_and_tool_is_a_text_block_then_a_tool_use_block(
    fp: FakeProvider, claude: anthropic.AsyncAnthropic
) -> None:
    message = await claude.messages.create(
        model="claude-x+text-and-tool", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    assert [block.type for block in message.content] == ["text", "tool_use"]
    assert message.stop_reason == "tool_use"


@pytest.mark.parametrize("stream_it", [False, True])
async def test_gemini_function_call_part_is_whole(
    session: aiohttp.ClientSession, fp: FakeProvider, stream_it: bool
) -> None:
    tools = [{"functionDeclarations": [{"name": "lookup_weather"}]}]
    if stream_it:
        events, _ = await stream(session, fp, "gemini", "g+tool-call", tools=tools)
        parts = [p for e in events for p in e.json()["candidates"][0]["content"]["parts"]]
    else:
        _, _, body = await call(session, fp, "gemini", "g+tool-call", tools=tools)
        parts = body["candidates"][0]["content"]["parts"]
    calls = [part["functionCall"] for part in parts if "functionCall" in part]
    assert calls == [{"name": "lookup_weather", "args": ARGUMENTS}]


async def test_gemini_text_and_tool_share_one_chunk(session: aiohttp.ClientSession, fp: FakeProvider) -> None:
    events, _ = await stream(session, fp, "gemini", "g+text-and-tool")
    mixed = [
        parts
        for event in events
        if len(parts := event.json()["candidates"][0]["content"]["parts"]) == 2
        and "text" in parts[0]
        and "functionCall" in parts[1]
    ]
    assert len(mixed) == 1


async def test_openai_reasoning_delta_comes_before_the_answer(
    fp: FakeProvider, oai: openai.AsyncOpenAI
) -> None:
    chunks = [
        chunk
        async for chunk in await oai.chat.completions.create(
            model="o+reasoning", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    ]
    content_chunks = [
        c for c in chunks if c.choices and (c.choices[0].delta.content or c.choices[0].delta.model_extra)
    ]
    assert getattr(content_chunks[0].choices[0].delta, "reasoning_content", None)
    assert content_chunks[0].choices[0].delta.content is None
    completion = await oai.chat.completions.create(
        model="o+reasoning", messages=[{"role": "user", "content": "hi"}]
    )
    assert getattr(completion.choices[0].message, "reasoning_content", None)
    assert completion.usage is not None and completion.usage.completion_tokens_details is not None
    assert completion.usage.completion_tokens_details.reasoning_tokens


async def test_anthropic_sdk_reasoning_is_a_thinking_block(
    fp: FakeProvider, claude: anthropic.AsyncAnthropic
) -> None:
    async with claude.messages.stream(
        model="claude-x+reasoning", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    ) as events:
        kinds = [event.delta.type async for event in events if event.type == "content_block_delta"]
        final = await events.get_final_message()
    assert kinds[:2] == ["thinking_delta", "signature_delta"]
    assert [block.type for block in final.content] == ["thinking", "text"]


async def test_gemini_reasoning_is_a_thought_part_first(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    events, _ = await stream(session, fp, "gemini", "g+reasoning")
    first = events[0].json()["candidates"][0]["content"]["parts"][0]
    assert first["thought"] is True and first["text"]
    usage = events[-1].json()["usageMetadata"]
    assert usage["thoughtsTokenCount"] == len(first["text"].split())
    assert usage["totalTokenCount"] == (
        usage["promptTokenCount"] + usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]
    )


async def test_google_genai_sdk_reads_answers_streams_and_function_calls(fp: FakeProvider) -> None:
    """The Gemini shapes parse with the official google-genai SDK (which calls /v1/models/...)."""
    genai = pytest.importorskip("google.genai")
    types = pytest.importorskip("google.genai.types")
    client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=fp.base_url))
    answer = await client.aio.models.generate_content(model="gemini-x+reasoning", contents="hello there")
    assert answer.text == "Hello from p1 (gemini-x+reasoning)."
    assert answer.usage_metadata.prompt_token_count == 2
    tool = types.Tool(function_declarations=[types.FunctionDeclaration(name="lookup_weather")])
    config = types.GenerateContentConfig(tools=[tool])
    calls = [
        call
        async for chunk in await client.aio.models.generate_content_stream(
            model="gemini-x+tool-call", contents="weather?", config=config
        )
        for call in chunk.function_calls or []
    ]
    assert [(call.name, call.args) for call in calls] == [("lookup_weather", ARGUMENTS)]
    await client.aio.aclose()


# --- error replies ----------------------------------------------------------------------------------


async def test_openai_sdk_sees_429_with_retry_after(fp: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    """RESIL-2: the hint arrives as ``Retry-After`` and ``retry-after-ms`` headers."""
    with pytest.raises(openai.RateLimitError) as caught:
        await oai.chat.completions.create(
            model="gpt-4o+fail-429-retry-2+retry-ms-1500", messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.response.headers["Retry-After"] == "2"
    assert caught.value.response.headers["retry-after-ms"] == "1500"
    assert caught.value.code == "rate_limit_exceeded"


@pytest.mark.parametrize(
    ("status", "fmt", "kind"),
    [
        (429, "anthropic", "rate_limit_error"),
        (529, "anthropic", "overloaded_error"),
        (401, "anthropic", "authentication_error"),
        (400, "anthropic", "invalid_request_error"),
        (404, "anthropic", "not_found_error"),
        (500, "anthropic", "api_error"),
        (429, "gemini", "RESOURCE_EXHAUSTED"),
        (503, "gemini", "UNAVAILABLE"),
        (400, "gemini", "INVALID_ARGUMENT"),
        (404, "gemini", "NOT_FOUND"),
        (403, "gemini", "PERMISSION_DENIED"),
        (401, "gemini", "UNAUTHENTICATED"),
        (500, "gemini", "INTERNAL"),
        (503, "openai", "server_error"),
        (401, "openai", "invalid_request_error"),
    ],
)
async def test_fail_status_uses_the_formats_error_shape(
    session: aiohttp.ClientSession, fp: FakeProvider, status: int, fmt: str, kind: str
) -> None:
    """RESIL-5 classification input: each status with the provider's own error type / status name."""
    got, _, body = await call(session, fp, fmt, f"m+fail-{status}")
    assert got == status
    if fmt == "openai":
        assert body["error"]["type"] == kind and set(body["error"]) == {"message", "type", "param", "code"}
    elif fmt == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == kind
    else:
        assert body["error"]["status"] == kind and body["error"]["code"] == status


async def test_anthropic_sdk_maps_529_to_an_overloaded_status_error(
    fp: FakeProvider, claude: anthropic.AsyncAnthropic
) -> None:
    with pytest.raises(anthropic.InternalServerError) as caught:
        await claude.messages.create(
            model="c+fail-529", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 529


async def test_msg_directive_sets_the_error_message(session: aiohttp.ClientSession, fp: FakeProvider) -> None:
    _, _, body = await call(session, fp, "openai", "m+fail-400+msg-context_length_exceeded")
    assert body["error"]["message"] == "context length exceeded"


async def test_fail_times_k_fails_k_calls_then_answers_and_reset_rearms_it(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    """RESIL-6-style retries: the first K calls for the exact model name fail, the next succeeds."""
    statuses = [(await call(session, fp, "openai", "m+fail-503-times-2"))[0] for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert (await call(session, fp, "openai", "other+fail-503-times-2"))[0] == 503  # own counter
    fp.reset()
    assert fp.calls() == 0
    assert (await call(session, fp, "openai", "m+fail-503-times-2"))[0] == 503


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("openai", "This model's maximum context length is 3 tokens. However, your messages resulted in 5"),
        ("anthropic", "prompt is too long: 5 tokens > 3 maximum"),
        ("gemini", "The input token count (5) exceeds the maximum number of tokens allowed (3)."),
    ],
)
async def test_ctx_n_rejects_longer_prompts_in_the_formats_wording(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str, expected: str
) -> None:
    """RESIL-8 / RESIL-5: a prompt over the window gets 400 with the provider's context message."""
    status, _, body = await call(session, fp, fmt, "m+ctx-3", text="one two three four five")
    assert status == 400 and body["error"]["message"].startswith(expected)
    if fmt == "openai":
        assert body["error"]["code"] == "context_length_exceeded"
    assert (await call(session, fp, fmt, "m+ctx-5", text="one two three four five"))[0] == 200


async def test_openai_sdk_raises_context_length_exceeded(fp: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await oai.chat.completions.create(model="m+ctx-1", messages=[{"role": "user", "content": "a b c"}])
    assert caught.value.code == "context_length_exceeded"


# --- streaming faults (RESIL-9) ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
async def test_cut_after_k_aborts_the_connection_after_k_content_chunks(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str
) -> None:
    events, broken = await stream(session, fp, fmt, "m+cut-after-2")
    assert isinstance(broken, aiohttp.ClientPayloadError)
    assert sum(is_content(fmt, event) for event in events) == 2
    assert all(event.data != "[DONE]" and event.name != "message_stop" for event in events)
    await fp.wait_until(lambda p: p.serving == 0)
    assert fp.cancelled == 0  # the server cut; no client went away


async def test_cut_after_k_without_streaming_truncates_the_body(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    path, body = request_for("openai", "m+cut-after-1", stream=False)
    async with session.post(fp.base_url + path, json=body) as resp:
        assert resp.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await resp.read()


async def test_openai_sdk_stream_breaks_on_cut(fp: FakeProvider, oai: openai.AsyncOpenAI) -> None:
    received = []
    with pytest.raises(openai.APIError):
        async for chunk in await oai.chat.completions.create(
            model="m+cut-after-1", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            received.append(chunk)
    assert received  # the role chunk and one content chunk arrived before the break


@pytest.mark.parametrize("fmt", FORMATS)
async def test_error_event_comes_before_any_content_with_status_200(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str
) -> None:
    events, broken = await stream(session, fp, fmt, "m+error-event")
    assert broken is None and len(events) == 1
    error = events[0].json()
    if fmt == "anthropic":
        assert events[0].name == "error" and error["error"]["type"] == "overloaded_error"
    elif fmt == "gemini":
        assert error["error"]["status"] == "UNAVAILABLE"
    else:
        assert error["error"]["message"] == "Overloaded"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_error_after_k_follows_k_content_chunks(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str
) -> None:
    events, _ = await stream(session, fp, fmt, "m+error-after-2+msg-upstream_broke")
    assert sum(is_content(fmt, event) for event in events) == 2
    assert "upstream broke" in events[-1].data and "error" in events[-1].json()


async def test_sdks_raise_on_error_events(
    fp: FakeProvider, oai: openai.AsyncOpenAI, claude: anthropic.AsyncAnthropic
) -> None:
    with pytest.raises(openai.APIError, match="Overloaded"):
        async for _ in await oai.chat.completions.create(
            model="m+error-event", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            pass
    with pytest.raises(anthropic.APIStatusError):
        async with claude.messages.stream(
            model="c+error-after-1", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        ) as events:
            async for _ in events:
                pass


@pytest.mark.parametrize("fmt", FORMATS)
async def test_malformed_at_k_replaces_the_kth_event_with_bad_json(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str
) -> None:
    clean, _ = await stream(session, fp, fmt, "m")
    events, broken = await stream(session, fp, fmt, "m+malformed-at-2")
    assert broken is None and [e.name for e in events] == [e.name for e in clean]
    assert events[1].data == "{not json"
    assert all(event.data == "[DONE]" or event.json() for i, event in enumerate(events) if i != 1)


async def test_malformed_at_1_without_streaming_sends_a_non_json_body(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    path, body = request_for("anthropic", "m+malformed-at-1", stream=False)
    async with session.post(fp.base_url + path, json=body) as resp:
        assert resp.status == 200 and await resp.text() == "{not json"


@pytest.mark.parametrize(("fmt", "marker"), [("openai", "[DONE]"), ("anthropic", "message_stop")])
async def test_no_done_ends_the_stream_without_its_terminal_event(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str, marker: str
) -> None:
    events, broken = await stream(session, fp, fmt, "m+no-done")
    assert broken is None and events
    assert all(marker not in (event.data, event.name) for event in events)
    assert text_of(fmt, events) == "Hello from p1 (m+no-done)."


async def test_stall_never_sends_headers_and_counts_the_client_disconnect(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    path, body = request_for("openai", "m+stall", stream=False)
    with pytest.raises(asyncio.TimeoutError):
        async with session.post(fp.base_url + path, json=body, timeout=aiohttp.ClientTimeout(total=0.1)):
            pass
    await fp.wait_until(lambda p: p.serving == 0)
    assert fp.cancelled == 1 and fp.cancel_times[0] > fp.requests[0].received_at


@pytest.mark.parametrize("fmt", FORMATS)
async def test_stall_after_k_hangs_after_k_content_chunks_until_the_client_leaves(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str
) -> None:
    path, body = request_for(fmt, "m+stall-after-1", stream=True)
    content = 0
    async with session.post(fp.base_url + path, json=body) as resp:
        with pytest.raises(asyncio.TimeoutError):
            async with asyncio.timeout(0.15):
                async for raw in resp.content:
                    line = raw.decode()
                    if line.startswith("data: "):
                        content += is_content(fmt, Sse(None, line[6:].strip()))
        resp.close()
    assert content == 1
    await fp.wait_until(lambda p: p.serving == 0)
    assert fp.cancelled == 1


async def test_latency_delays_the_headers(session: aiohttp.ClientSession, fp: FakeProvider) -> None:
    started = time.monotonic()
    status, _, _ = await call(session, fp, "gemini", "g+latency-120")
    assert status == 200 and time.monotonic() - started >= 0.12


async def test_latency_applies_to_failures_too(session: aiohttp.ClientSession, fp: FakeProvider) -> None:
    started = time.monotonic()
    status, _, _ = await call(session, fp, "openai", "m+latency-80+fail-503")
    assert status == 503 and time.monotonic() - started >= 0.08


@pytest.mark.parametrize("fmt", FORMATS)
async def test_slow_ttft_sends_headers_at_once_and_delays_the_first_content(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str
) -> None:
    """RESIL-6 TTFT timeouts: headers (and the preamble) come at once, content after the delay."""
    path, body = request_for(fmt, "m+slow-ttft-150", stream=True)
    started = time.monotonic()
    async with session.post(fp.base_url + path, json=body) as resp:
        headers_at = time.monotonic() - started
        first_content_at = None
        async for raw in resp.content:
            line = raw.decode()
            if line.startswith("data: ") and is_content(fmt, Sse(None, line[6:].strip())):
                first_content_at = time.monotonic() - started
                break
    assert headers_at < 0.1 and first_content_at is not None and first_content_at >= 0.15


async def test_slow_ttft_without_streaming_delays_the_headers(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    started = time.monotonic()
    await call(session, fp, "anthropic", "m+slow-ttft-100")
    assert time.monotonic() - started >= 0.1


# --- usage and stamps ---------------------------------------------------------------------------------


async def test_openai_usage_early_rides_on_the_first_chunk_even_without_include_usage(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    events, _ = await stream(session, fp, "openai", "m+usage-early")
    assert events[0].json()["usage"]["prompt_tokens"] == 2
    assert all("usage" not in event.json() for event in events[1:-1])


@pytest.mark.parametrize("fmt", FORMATS)
async def test_usage_missing_sends_no_usage_at_all(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str
) -> None:
    extra = {"stream_options": {"include_usage": True}} if fmt == "openai" else {}
    fp.set_behaviour("m", "usage-missing")
    events, _ = await stream(session, fp, fmt, "m", **extra)
    assert events and all("usage" not in event.data.lower() for event in events)
    _, _, body = await call(session, fp, fmt, "m")
    assert "usage" not in json.dumps(body).lower()


async def test_anthropic_usage_early_puts_output_tokens_in_message_start(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    events, _ = await stream(session, fp, "anthropic", "m+usage-early")
    assert events[0].json()["message"]["usage"]["output_tokens"] == 4


async def test_gemini_usage_early_is_on_the_first_chunk(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    events, _ = await stream(session, fp, "gemini", "m+usage-early")
    assert "usageMetadata" in events[0].json()
    assert all("usageMetadata" not in event.json() for event in events[1:])


@pytest.mark.parametrize("fmt", FORMATS)
async def test_stamp_puts_the_server_clock_on_every_json_event(
    session: aiohttp.ClientSession, fp: FakeProvider, fmt: str
) -> None:
    before = time.time_ns()
    events, _ = await stream(session, fp, fmt, "m+stamp")
    stamps = [event.json()["x_stamp_ns"] for event in events if event.data != "[DONE]"]
    assert stamps and stamps == sorted(stamps) and before <= stamps[0] <= time.time_ns()


# --- embeddings, models, recording, overrides ---------------------------------------------------------


async def test_openai_sdk_embeddings_are_deterministic_vectors_of_eight(
    fp: FakeProvider, oai: openai.AsyncOpenAI
) -> None:
    first = await oai.embeddings.create(model="emb", input=["alpha", "beta"])
    again = await oai.embeddings.create(model="emb", input="alpha")
    assert [len(item.embedding) for item in first.data] == [8, 8]
    assert first.data[0].embedding == again.data[0].embedding != first.data[1].embedding
    assert first.usage.prompt_tokens == 2


async def test_embeddings_as_floats_and_base64_agree(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    url = f"{fp.base_url}/v1/embeddings"
    async with session.post(url, json={"model": "e", "input": "x", "encoding_format": "float"}) as resp:
        floats = (await resp.json())["data"][0]["embedding"]
    async with session.post(url, json={"model": "e", "input": "x", "encoding_format": "base64"}) as resp:
        packed = base64.b64decode((await resp.json())["data"][0]["embedding"])
    assert struct.unpack("<8f", packed) == pytest.approx(floats, rel=1e-6)
    assert sum(value * value for value in floats) == pytest.approx(1.0)


async def test_embeddings_honour_fail_directives(session: aiohttp.ClientSession, fp: FakeProvider) -> None:
    async with session.post(
        f"{fp.base_url}/v1/embeddings", json={"model": "e+fail-429", "input": "x"}
    ) as resp:
        assert resp.status == 429


async def test_models_list_includes_configured_and_overridden_names(
    fp: FakeProvider, oai: openai.AsyncOpenAI, claude: anthropic.AsyncAnthropic
) -> None:
    fp.set_behaviour("my-model", "")
    ids = [model.id async for model in oai.models.list()]
    assert ids == ["fake-model", "my-model"]
    anthropic_ids = [model.id async for model in claude.models.list()]
    assert anthropic_ids == ["fake-model", "my-model"]
    assert fp.calls() == 0 and len(fp.requests) == 2


async def test_every_request_is_recorded_with_path_headers_body_and_model(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    before = time.monotonic()
    await call(session, fp, "openai", "a")
    await call(session, fp, "gemini", "g+fail-500")
    await stream(session, fp, "anthropic", "a")
    assert [request.model for request in fp.requests] == ["a", "g+fail-500", "a"]
    assert [request.format for request in fp.requests] == ["openai", "gemini", "anthropic"]
    first = fp.requests[0]
    assert first.path == "/v1/chat/completions" and first.method == "POST"
    assert first.body["messages"][0]["content"] == "hello there"
    assert "content-type" in first.headers and first.received_at >= before
    assert fp.requests[1].path == "/v1beta/models/g+fail-500:generateContent"
    assert (fp.calls(), fp.calls("a"), fp.calls("nope")) == (3, 2, 0)


async def test_set_behaviour_overrides_a_name_and_star_overrides_all(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    fp.set_behaviour("gpt-4o", "fail-401")
    assert (await call(session, fp, "openai", "gpt-4o"))[0] == 401
    assert (await call(session, fp, "openai", "other"))[0] == 200
    fp.set_behaviour("*", "fail-503")
    assert (await call(session, fp, "openai", "other"))[0] == 503
    fp.set_behaviour("gpt-4o", "")
    _, _, body = await call(session, fp, "openai", "gpt-4o")
    assert body["model"] == "gpt-4o"


async def test_bad_json_body_gets_a_400_in_the_formats_shape(
    session: aiohttp.ClientSession, fp: FakeProvider
) -> None:
    async with session.post(f"{fp.base_url}/v1/messages", data=b"{oops") as resp:
        assert resp.status == 400 and (await resp.json())["type"] == "error"
    assert fp.requests[0].body is None


async def test_formats_limit_the_routes_served() -> None:
    async with FakeProvider(formats=("anthropic",)) as provider, aiohttp.ClientSession() as client:
        async with client.post(f"{provider.base_url}/v1/chat/completions", json={"model": "m"}) as resp:
            assert resp.status == 404
        async with client.post(f"{provider.base_url}/v1/messages", json={"model": "m"}) as resp:
            assert resp.status == 200


async def test_stop_cancels_stalled_requests_promptly_without_counting_them() -> None:
    provider = FakeProvider()
    await provider.start()
    async with aiohttp.ClientSession() as client:
        pending = asyncio.ensure_future(
            client.post(f"{provider.base_url}/v1/messages", json={"model": "m+stall"})
        )
        await provider.wait_until(lambda p: p.calls() == 1)  # the stalled request is being served
        started = time.monotonic()
        await provider.stop()
        assert time.monotonic() - started < 1.0
        with pytest.raises(aiohttp.ClientError):
            await pending
    assert provider.cancelled == 0


def test_fake_provider_thread_serves_sync_clients() -> None:
    with (
        FakeProviderThread(name="bg") as server,
        openai.OpenAI(base_url=f"{server.base_url}/v1", api_key="x", max_retries=0) as client,
    ):
        completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert completion.choices[0].message.content == "Hello from bg (m)."
        server.set_behaviour("m", "fail-429")
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert server.calls("m") == 2 and server.requests[0].model == "m" and server.cancelled == 0
        server.reset()
        assert server.calls() == 0
    assert server.calls() == 0  # readable after stop
