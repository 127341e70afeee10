"""A coding agent's conversation with thinking and tools moving between Anthropic-, OpenAI- and
Gemini-format upstreams, every upstream a strict fake that refuses what the real provider refuses
(unknown message fields, long or ill-formed tool-call ids, thinking whose signature it did not issue,
a tool turn without its signed thinking, a Gemini call without its thought signature).

Every surface (Chat Completions, Messages on the Anthropic SDK, Responses through
``previous_response_id`` and statelessly with ``encrypted_content``, Gemini ``generateContent``) ×
streaming and not × several orders of families, a model switch in the middle of a tool turn
through combo failover included: every request is answered, and a turn that stays on Anthropic
replays its signed thinking with thinking still on.
"""

from __future__ import annotations

import re

import httpx
import pytest
from reasoning_agents import TOOL_SCHEMA, make_agent, strict_gateway

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

__all__ = ["strict_gateway"]  # the fixture

KINDS = ("chat", "messages", "responses", "responses-stateless", "gemini")
ORDERS = (
    ("a/m", "oa/m", "ge/m", "a/m"),
    ("ge/m", "a/m", "ge/m", "oa/m"),
    ("oa/m", "ge/m", "a/m", "oa/m"),
)


def _anthropic_thinking_replayed(fakes: dict[str, FakeProviderThread]) -> None:
    """The last Anthropic request sent the turn's tool call after its signed thinking, thinking on."""
    body = fakes["o"].requests[-1].body
    assert body.get("thinking", {}).get("type") == "enabled", body
    last = [m for m in body["messages"] if m["role"] == "assistant"][-1]
    assert last["content"][0]["type"] == "thinking" and last["content"][0]["signature"], last


@pytest.mark.parametrize("order", ORDERS, ids="-".join)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("kind", KINDS)
def test_agent_conversation_moves_between_families_and_every_turn_is_accepted(
    strict_gateway: GatewayThread,
    fakes: dict[str, FakeProviderThread],
    kind: str,
    stream: bool,
    order: tuple[str, ...],
) -> None:
    agent = make_agent(kind, strict_gateway)
    for turn, model in enumerate(order):
        ids = agent.call(model, stream, f"weather, turn {turn}?")
        assert all(len(i) <= 40 or model == "ge/m" for i in ids)
        answer = agent.answer(model, stream, ids)
        assert answer.startswith("Tool result:") and "sunny" in answer, answer
        if model == "a/m":
            _anthropic_thinking_replayed(fakes)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("kind", KINDS)
def test_tool_turn_fails_over_to_another_family_between_the_call_and_its_result(
    strict_gateway: GatewayThread, fakes: dict[str, FakeProviderThread], kind: str, stream: bool
) -> None:
    """The family that made a tool call fails before the result comes back: the result goes to the
    next family of the combo, which accepts the other family's call (Gemini with its documented
    stand-in signature, Anthropic with thinking off for that request)."""
    agent = make_agent(kind, strict_gateway)
    ids = agent.call("a-then-ge", stream, "weather?")  # Anthropic makes the call …
    fakes["o"].set_behaviour("mf", "fail-503")
    assert "sunny" in agent.answer("a-then-ge", stream, ids)  # … Gemini gets its result
    assert fakes["g"].requests[-1].path.endswith((":generateContent", ":streamGenerateContent"))
    ids = agent.call("ge-then-a", stream, "and tomorrow?")  # Gemini makes the call …
    fakes["g"].set_behaviour("mf", "fail-503")
    assert "sunny" in agent.answer("ge-then-a", stream, ids)  # … Anthropic gets its result
    sent = fakes["o"].requests[-1].body
    assert "thinking" not in sent, sent["messages"]
    ids = agent.call("a/m", stream, "and the day after?")  # a fresh turn on Anthropic thinks again
    assert "sunny" in agent.answer("a/m", stream, ids)
    _anthropic_thinking_replayed(fakes)


GEMINI_ID = "call_0123456789abcdef01234567__thought__" + "QUJD" * 90
ODD_ID = "functions.get_weather:0"


@pytest.mark.parametrize("model", ["a/m", "oa/m"])
def test_tool_call_ids_are_mapped_to_the_upstreams_rules_the_same_way_every_turn(
    strict_gateway: GatewayThread, fakes: dict[str, FakeProviderThread], model: str
) -> None:
    """A Gemini id carrying its thought signature (380 characters) and an id with ``.`` and ``:``
    reach an OpenAI-format upstream as ids of at most 40 characters and an Anthropic-format one as
    ids matching ``^[a-zA-Z0-9_-]+$`` (the strict fakes refuse anything else), without the
    signature; a call and its result keep one id, and the same id maps the same way next time."""
    calls = [
        {"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        for cid in (GEMINI_ID, ODD_ID)
    ]
    body = {
        "model": model,
        "max_tokens": 100,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": TOOL_SCHEMA}}],
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": c["id"], "content": "sunny"} for c in calls),
        ],
    }
    fake = fakes["o" if model == "a/m" else "c"]
    sent: list[list[str]] = []
    for _ in range(2):
        r = httpx.post(f"{strict_gateway.url}/v1/chat/completions", json=body, timeout=30)
        assert r.status_code == 200, r.text
        msgs = fake.requests[-1].body["messages"]
        if model == "a/m":
            call_ids = [b["id"] for b in msgs[1]["content"] if b["type"] == "tool_use"]
            result_ids = [b["tool_use_id"] for b in msgs[2]["content"]]
        else:
            call_ids = [c["id"] for c in msgs[1]["tool_calls"]]
            result_ids = [m["tool_call_id"] for m in msgs[2:4]]
        assert call_ids == result_ids
        rule = r"[A-Za-z0-9_-]{1,64}" if model == "a/m" else r".{1,40}"
        assert all("__thought__" not in i and re.fullmatch(rule, i) for i in call_ids), call_ids
        sent.append(call_ids)
    assert sent[0] == sent[1]
    assert sent[0][0] == "call_0123456789abcdef01234567"  # the id without its signature
