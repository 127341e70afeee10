"""Responses API tool declarations as Codex CLI sends them (API-4, PROV-1, API-6): custom tools
(free-form or grammar input), ``additional_tools`` input items with namespaced tools, and
``include: ["reasoning.encrypted_content"]`` — through ``/v1/responses`` to every upstream family,
streaming and not, against the scripted fake providers."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from test_wire_formats import UPSTREAMS, raw_events, wire_config

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

CODE = 'const greeting = "hi there";\ntext(greeting)'  # no "+" or "/": it travels in a model name
EXEC: Any = {
    "type": "custom",
    "name": "exec",
    "description": "Run JavaScript code.",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: SOURCE\nSOURCE: /[\\s\\S]+/"},
}
WAIT: Any = {
    "type": "function",
    "name": "wait",
    "strict": False,
    "parameters": {"type": "object", "properties": {"cell_id": {"type": "string"}}, "required": ["cell_id"]},
}
SLEEP: Any = {"type": "function", "name": "sleep", "parameters": {"type": "object", "properties": {}}}
# Codex CLI 0.171's default model gets its tools this way, with "tools": [] at the top level.
ADDITIONAL_TOOLS: Any = {
    "type": "additional_tools",
    "id": "at_1",
    "role": "developer",
    "tools": [
        {"type": "namespace", "name": "functions", "description": "", "tools": [EXEC, WAIT]},
        {"type": "namespace", "name": "clock", "description": "Time.", "tools": [SLEEP]},
    ],
}


def calling(upstream: str, tool: str, args: dict[str, Any]) -> str:
    """The model name that makes ``upstream``'s fake call ``tool`` with ``args``."""
    quoted = urllib.parse.quote(json.dumps(args), safe="")
    return f"{UPSTREAMS[upstream][0]}+call-{tool}+args-{quoted}"


@pytest.fixture
def gw(make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]) -> GatewayThread:
    return make_gateway(wire_config(fakes))


def post(gw: GatewayThread, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{gw.base_url}/responses", json=body, timeout=10)


def declared(fake: FakeProviderThread) -> dict[str, str]:
    """Tool name → description as the upstream saw them, whatever its format."""
    body = fake.requests[-1].body
    if "tools" in body and body["tools"] and "function" in body["tools"][0]:  # OpenAI
        return {t["function"]["name"]: t["function"].get("description", "") for t in body["tools"]}
    if "tools" in body and body["tools"] and "input_schema" in body["tools"][0]:  # Anthropic
        return {t["name"]: t.get("description", "") for t in body["tools"]}
    decls = [d for t in body["tools"] for d in t.get("functionDeclarations", [])]  # Gemini
    return {d["name"]: d.get("description", "") for d in decls}


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_additional_tools_item_declares_namespaced_and_custom_tools(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread], upstream: str
) -> None:
    """Codex's ``additional_tools`` input item (with ``tools: []``) is read as tool declarations:
    every namespaced function and the custom tool reach the upstream; the answer is a plain reply."""
    r = post(
        gw,
        {
            "model": UPSTREAMS[upstream][0],
            "tools": [],
            "include": ["reasoning.encrypted_content"],
            "store": False,
            "input": [ADDITIONAL_TOOLS, {"role": "user", "content": "hi"}],
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["output"][-1]["type"] == "message"
    tools = declared(fakes[UPSTREAMS[upstream][1]])
    assert set(tools) == {"exec", "wait", "sleep"}
    assert "free-form text" in tools["exec"] and "SOURCE" in tools["exec"]


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_custom_tool_call_comes_back_as_custom_tool_call_item(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread], upstream: str
) -> None:
    """A model's call of a custom tool → a ``custom_tool_call`` output item with the free-form
    ``input``; the next turn's ``custom_tool_call`` + ``custom_tool_call_output`` items reach the
    upstream as that call and its result."""
    first = post(
        gw,
        {"model": calling(upstream, "exec", {"input": CODE}), "input": "run it", "tools": [EXEC, WAIT]},
    )
    assert first.status_code == 200, first.text
    (call,) = [o for o in first.json()["output"] if o["type"] != "message"]
    assert call["type"] == "custom_tool_call" and call["name"] == "exec" and call["input"] == CODE
    second = post(
        gw,
        {
            "model": calling(upstream, "exec", {"input": CODE}),
            "tools": [EXEC],
            "input": [
                {"role": "user", "content": "run it"},
                {"type": "custom_tool_call", "call_id": call["call_id"], "name": "exec", "input": CODE},
                {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "Done!"},
            ],
        },
    )
    assert second.status_code == 200, second.text
    assert second.json()["output"][-1]["content"][0]["text"] == "Tool result: Done!"


@pytest.mark.parametrize("upstream", list(UPSTREAMS))
def test_streamed_custom_tool_call_events(gw: GatewayThread, upstream: str) -> None:
    """Streaming: the call is an ``output_item.added`` of type ``custom_tool_call``, then
    ``custom_tool_call_input.delta`` / ``.done`` with the whole input, then ``output_item.done``."""
    events = raw_events(
        gw,
        "/v1/responses",
        {
            "model": calling(upstream, "exec", {"input": CODE}),
            "input": [ADDITIONAL_TOOLS, {"role": "user", "content": "run it"}],
            "tools": [],
            "stream": True,
        },
    )
    kinds = [e for e, _ in events]
    added = next(d for e, d in events if e == "response.output_item.added")
    assert added["item"]["type"] == "custom_tool_call" and added["item"]["name"] == "exec"
    assert "response.function_call_arguments.delta" not in kinds
    done = next(d for e, d in events if e == "response.custom_tool_call_input.done")
    assert done["input"] == CODE
    item = next(d for e, d in events if e == "response.output_item.done")["item"]
    assert item["type"] == "custom_tool_call" and item["input"] == CODE
    assert kinds[-1] == "response.completed"
    assert events[-1][1]["response"]["output"][-1]["input"] == CODE


def test_tool_choice_can_name_a_custom_tool(gw: GatewayThread, fakes: dict[str, FakeProviderThread]) -> None:
    """``tool_choice: {type: custom, name}`` forces the function the custom tool is declared as."""
    r = post(
        gw,
        {
            "model": "local-o/model-o",
            "input": "x",
            "tools": [EXEC],
            "tool_choice": {"type": "custom", "name": "exec"},
        },
    )
    assert r.status_code == 200, r.text
    assert fakes["o"].requests[-1].body["tool_choice"] == {"type": "function", "function": {"name": "exec"}}


def test_custom_tool_call_is_replayed_by_previous_response_id(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """The stored turn keeps a custom call, so a follow-up with only its output replays it upstream."""
    first = post(gw, {"model": calling("openai", "exec", {"input": "1+1"}), "input": "go", "tools": [EXEC]})
    call = first.json()["output"][-1]
    second = post(
        gw,
        {
            "model": "local-o/model-o",
            "previous_response_id": first.json()["id"],
            "tools": [EXEC],
            "input": [{"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "2"}],
        },
    )
    assert second.status_code == 200, second.text
    sent = fakes["o"].requests[-1].body["messages"]
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"input": "1+1"}
    assert sent[2] == {"role": "tool", "tool_call_id": call["call_id"], "content": "2"}


@pytest.mark.parametrize(
    ("tools", "field"),
    [
        ([{"type": "custom", "description": "no name"}], "tools[0].name"),
        ([EXEC, {**WAIT, "name": "exec"}], "tools[1].name"),
        ("exec", "tools"),
    ],
)
def test_undeclarable_tool_is_400_naming_it(gw: GatewayThread, tools: Any, field: str) -> None:
    """A tool that cannot be declared upstream (no name, a name declared twice) → 400 naming it."""
    r = post(gw, {"model": "local-o/model-o", "input": "x", "tools": tools})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field
