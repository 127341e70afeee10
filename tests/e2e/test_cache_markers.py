"""Prompt-cache markers (``cache_control``, with ``ttl``) survive every surface on the way to an
Anthropic-format upstream, on every block kind the surface has (text, image and file parts, tools,
tool results), and never reach an OpenAI-format upstream that does not know the field."""

from __future__ import annotations

from typing import Any

import httpx
from reasoning_agents import TOOL_SCHEMA, strict_gateway

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

__all__ = ["strict_gateway"]  # the fixture

HOUR = {"type": "ephemeral", "ttl": "1h"}
FIVE = {"type": "ephemeral"}
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
    "AAAABJRU5ErkJggg=="
)


def _responses(gw: GatewayThread, model: str) -> httpx.Response:
    body = {
        "model": model,
        "max_output_tokens": 100,
        "instructions": "Be brief.",
        "tools": [
            {"type": "function", "name": "get_weather", "parameters": TOOL_SCHEMA, "cache_control": FIVE}
        ],
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "A long shared prefix.", "cache_control": HOUR},
                    {"type": "input_image", "image_url": PIXEL, "cache_control": FIVE},
                    {"type": "input_text", "text": "The question."},
                ],
            }
        ],
    }
    return httpx.post(f"{gw.url}/v1/responses", json=body, timeout=30)


def test_responses_keeps_cache_markers_on_parts_and_tools_and_does_not_merge_marked_text(
    strict_gateway: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    fakes["o"].set_behaviour("m", "")
    r = _responses(strict_gateway, "a/m")
    assert r.status_code == 200, r.text
    sent = fakes["o"].requests[-1].body
    assert sent["tools"][0]["cache_control"] == FIVE
    blocks = sent["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "text"]
    assert blocks[0] == {"type": "text", "text": "A long shared prefix.", "cache_control": HOUR}
    assert blocks[1]["cache_control"] == FIVE
    assert "cache_control" not in blocks[2]


def test_cache_markers_do_not_reach_an_openai_format_upstream(
    strict_gateway: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    fakes["c"].set_behaviour("m", "")
    r = _responses(strict_gateway, "oa/m")
    assert r.status_code == 200, r.text
    sent = fakes["c"].requests[-1].body
    assert "cache_control" not in repr(sent), sent
    assert sent["messages"][1]["content"][0] == {"type": "text", "text": "A long shared prefix."}


def test_chat_completions_keeps_tool_level_and_part_cache_markers_for_anthropic(
    strict_gateway: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    fakes["o"].set_behaviour("m", "")
    tools: list[dict[str, Any]] = [
        {
            "type": "function",
            "function": {"name": "get_weather", "parameters": TOOL_SCHEMA},
            "cache_control": HOUR,
        },
        {
            "type": "function",
            "function": {"name": "get_time", "parameters": TOOL_SCHEMA, "cache_control": FIVE},
        },
    ]
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "Rules.", "cache_control": HOUR}]},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": PIXEL}, "cache_control": FIVE},
                {"type": "text", "text": "weather?"},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny", "cache_control": FIVE},
    ]
    body = {"model": "a/m", "max_tokens": 100, "tools": tools, "messages": messages}
    r = httpx.post(f"{strict_gateway.url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    sent = fakes["o"].requests[-1].body
    assert [t.get("cache_control") for t in sent["tools"]] == [HOUR, FIVE]
    assert sent["system"] == [{"type": "text", "text": "Rules.", "cache_control": HOUR}]
    assert sent["messages"][0]["content"][0]["cache_control"] == FIVE
    assert sent["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": "sunny",
        "cache_control": FIVE,
    }


def _ask_anthropic(gw: GatewayThread, system: list[dict[str, Any]]) -> dict[str, Any]:
    body = {
        "model": "a/m",
        "max_tokens": 100,
        "system": system,
        "messages": [{"role": "user", "content": "hi"}],
    }
    r = httpx.post(
        f"{gw.url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}, timeout=30
    )
    assert r.status_code == 200, r.text
    return dict(r.json()["usage"])


def test_a_repeated_marked_prefix_is_written_once_then_read_as_anthropic_reports_it(
    strict_gateway: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """The strict Anthropic fake accounts cache breakpoints as Anthropic does; the gateway passes the
    numbers through: the first request writes the marked system prompt (at its 1-hour lifetime), the
    repeat reads it, and a different prefix writes again."""
    fakes["o"].set_behaviour("m", "strict")
    text = "A long stable system prompt of exactly nine words."
    system = [{"type": "text", "text": text, "cache_control": HOUR}]
    first = _ask_anthropic(strict_gateway, system)
    assert (first["cache_creation_input_tokens"], first["cache_read_input_tokens"]) == (9, 0)
    assert first["cache_creation"] == {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 9}
    again = _ask_anthropic(strict_gateway, system)
    assert (again["cache_creation_input_tokens"], again["cache_read_input_tokens"]) == (0, 9)
    other = _ask_anthropic(strict_gateway, [{**system[0], "text": "Another prompt."}])
    assert (other["cache_creation_input_tokens"], other["cache_read_input_tokens"]) == (2, 0)


def test_responses_cache_markers_get_cache_reads_on_the_next_turn(
    strict_gateway: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """Through /v1/responses (translated for the Anthropic upstream) the markers reach the upstream
    intact, so the second identical request is a cache read, reported in the Responses usage."""
    fakes["o"].set_behaviour("m", "strict")
    usages = []
    for _ in range(2):
        r = _responses(strict_gateway, "a/m")
        assert r.status_code == 200, r.text
        usages.append(r.json()["usage"]["input_tokens_details"])
    assert usages[0]["cache_write_tokens"] > 0 and usages[0]["cached_tokens"] == 0
    assert usages[1]["cached_tokens"] == usages[0]["cache_write_tokens"]
    assert usages[1]["cache_write_tokens"] == 0
