"""The official ``openai`` SDK (sync and async) against the gateway in front of fake providers
(API-1, API-2, API-7): chat, streaming, include_usage, tools, models.list."""

from __future__ import annotations

import json

import openai
import pytest

from omniroute.testing.gateway import GatewayThread


def client(gw: GatewayThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="unused", max_retries=0)


def test_chat_completion_returns_answer_and_served_model(gateway: GatewayThread) -> None:
    """API-1/API-7: non-streaming answer; body.model is the model that served; routing headers set."""
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="local-o/model-o", messages=[{"role": "user", "content": "hi there"}]
    )
    resp = raw.parse()
    assert resp.choices[0].message.content == "Hello from o (model-o)."
    assert resp.model == "model-o"
    assert resp.usage is not None and resp.usage.prompt_tokens == 2
    h = raw.headers
    assert h["x-omniroute-provider"] == "local-o"
    assert h["x-omniroute-model"] == "model-o"
    assert h["x-omniroute-connection"] == "o1"
    assert h["x-omniroute-attempts"] == "1"
    assert h["x-request-id"].startswith("req_")
    assert "strategy=" in h["x-omniroute-decision"]
    assert float(h["x-omniroute-overhead-ms"]) >= 0


def test_streaming_forwards_every_chunk_in_order(gateway: GatewayThread) -> None:
    """API-1: SSE chunks are forwarded as they arrive and reassemble the full answer."""
    stream = client(gateway).chat.completions.create(
        model="local-c/model-c+chunks-7", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) == 7
    assert "".join(pieces) == "Hello from c (model-c+chunks-7)."


@pytest.mark.parametrize("fault", ["usage-late", "usage-early"])
def test_include_usage_gives_exactly_one_final_usage_chunk(gateway: GatewayThread, fault: str) -> None:
    """API-1: with include_usage exactly one final chunk has choices [] and the usage, whatever the
    upstream did with its usage."""
    chunks = list(
        client(gateway).chat.completions.create(
            model=f"local-o/model-o+{fault}",
            messages=[{"role": "user", "content": "one two three"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    usage_chunks = [c for c in chunks if c.usage is not None]
    assert len(usage_chunks) == 1
    assert usage_chunks[0] is chunks[-1]
    assert chunks[-1].choices == []
    assert usage_chunks[0].usage.prompt_tokens == 3


def test_stream_without_include_usage_has_no_usage_chunk(gateway: GatewayThread) -> None:
    """API-1: without include_usage the client sees no usage chunk (it is still recorded for spend)."""
    chunks = list(
        client(gateway).chat.completions.create(
            model="local-o/model-o+usage-early", messages=[{"role": "user", "content": "x"}], stream=True
        )
    )
    assert all(c.usage is None for c in chunks)


def test_tool_call_streamed_arguments_reassemble(gateway: GatewayThread) -> None:
    """API-1: a streamed tool call keeps id, name and index; the argument fragments parse as JSON."""
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    stream = client(gateway).chat.completions.create(
        model="local-o/model-o+tool-call",
        messages=[{"role": "user", "content": "weather?"}],
        tools=tools,
        stream=True,
    )
    first = None
    args = ""
    finish = None
    for c in stream:
        if not c.choices:
            continue
        for tc in c.choices[0].delta.tool_calls or []:
            if first is None:
                first = tc
            args += tc.function.arguments or "" if tc.function else ""
        finish = c.choices[0].finish_reason or finish
    assert first is not None and first.id and first.function and first.function.name == "lookup"
    assert first.index == 0
    assert json.loads(args) == {"city": "Paris", "unit": "celsius"}
    assert finish == "tool_calls"


def test_tool_call_non_streaming(gateway: GatewayThread) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    resp = client(gateway).chat.completions.create(
        model="local-o/model-o+tool-call", messages=[{"role": "user", "content": "weather?"}], tools=tools
    )
    call = resp.choices[0].message.tool_calls[0]
    assert call.function.name == "lookup"
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "celsius"}
    assert resp.choices[0].finish_reason == "tool_calls"


def test_models_list_has_connected_models_with_limits(gateway: GatewayThread) -> None:
    """API-2: every connected provider/model with context_length and max_output_tokens."""
    models = {m.id: m for m in client(gateway).models.list()}
    assert {"local-o/model-o", "local-c/model-c", "local-g/model-g"} <= set(models)
    m = models["local-g/model-g"].model_dump()
    assert m["context_length"] == 1000000 and m["max_output_tokens"] == 8192
    one = client(gateway).models.retrieve("local-o/model-o")
    assert one.id == "local-o/model-o"


def test_bare_catalog_id_routes_to_connected_provider(gateway: GatewayThread) -> None:
    """SPEC §4 step 6: a bare model id the catalog knows goes to a connected provider serving it."""
    resp = client(gateway).chat.completions.create(
        model="model-c", messages=[{"role": "user", "content": "x"}]
    )
    assert resp.choices[0].message.content == "Hello from c (model-c)."


async def test_async_client_chat_and_stream(gateway: GatewayThread) -> None:
    """API-1 with the async SDK client."""
    ac = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0)
    resp = await ac.chat.completions.create(
        model="local-g/model-g", messages=[{"role": "user", "content": "x"}]
    )
    assert resp.choices[0].message.content == "Hello from g (model-g)."
    text = ""
    async for c in await ac.chat.completions.create(
        model="local-g/model-g+chunks-3", messages=[{"role": "user", "content": "x"}], stream=True
    ):
        if c.choices and c.choices[0].delta.content:
            text += c.choices[0].delta.content
    assert text == "Hello from g (model-g+chunks-3)."
    await ac.close()
