"""omniroute.testing: the fake providers' scripted agent turns and strict replay rules.

``call-NAME`` + ``args-JSON`` answer with a named tool call until a tool result comes back, then with
text that repeats the result; ``reasoning`` signs its thinking; ``strict`` refuses replayed
conversations the way real providers do (`omniroute.testing.strict`). Each format is checked through
its wire shape, streaming and not.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from omniroute.testing import FakeProviderThread, parse_behaviour
from omniroute.testing._gemini import call_signature
from omniroute.testing.faults import signature_for

ARGS = {"file_path": "/work/notes_1.txt"}
SPEC = "m+call-Read+args-" + urllib.parse.quote(json.dumps(ARGS), safe="")
USER_X = {"role": "user", "content": "x"}
GEMINI_USER_X = {"role": "user", "parts": [{"text": "x"}]}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": ARGS}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProviderThread]:
    with FakeProviderThread(name="s") as provider:
        yield provider


def post(fake: FakeProviderThread, fmt: str, body: dict[str, Any], model: str = SPEC) -> httpx.Response:
    if fmt == "openai":
        return httpx.post(f"{fake.base_url}/v1/chat/completions", json={"model": model, **body}, timeout=10)
    if fmt == "anthropic":
        payload = {"model": model, "max_tokens": 100, **body}
        return httpx.post(f"{fake.base_url}/v1/messages", json=payload, timeout=10)
    path = urllib.parse.quote(model, safe="")
    return httpx.post(f"{fake.base_url}/v1beta/models/{path}:generateContent", json=body, timeout=10)


def test_call_and_args_directives_parse_name_and_percent_decoded_json() -> None:
    behaviour = parse_behaviour(SPEC)
    assert behaviour.call_name == "Read"
    assert json.loads(behaviour.call_arguments) == ARGS  # ``_`` stays an underscore
    assert parse_behaviour("call-run%5Fshell").call_arguments == "{}"
    assert parse_behaviour("m+strict").strict


def test_openai_call_then_text_repeating_the_tool_result(fake: FakeProviderThread) -> None:
    first = post(fake, "openai", {"messages": [{"role": "user", "content": "read it"}]}).json()
    call = first["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "Read" and json.loads(call["function"]["arguments"]) == ARGS
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    messages = [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "The secret word is   PAPAYA."},
    ]
    second = post(fake, "openai", {"messages": messages}).json()
    assert second["choices"][0]["message"]["content"] == "Tool result: The secret word is PAPAYA."
    # A new user message after the answered call starts a new turn: the model calls the tool again.
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}]
    third = post(fake, "openai", {"messages": messages}).json()
    assert third["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "Read"


def test_anthropic_call_streams_and_the_result_comes_back_as_text(fake: FakeProviderThread) -> None:
    with httpx.stream(
        "POST",
        f"{fake.base_url}/v1/messages",
        json={"model": SPEC, "max_tokens": 100, "stream": True, "messages": [USER_X]},
        timeout=10,
    ) as r:
        raw = r.read().decode()
    assert '"type":"tool_use"' in raw and '"name":"Read"' in raw and '"stop_reason":"tool_use"' in raw
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [TOOL_USE]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "4"}]},
                {"type": "text", "text": "<system-reminder>ignored</system-reminder>"},
            ],
        },
    ]
    answer = post(fake, "anthropic", {"messages": messages}).json()
    assert answer["content"] == [{"type": "text", "text": "Tool result: 4"}]


def test_gemini_call_then_function_response_text(fake: FakeProviderThread) -> None:
    first = post(fake, "gemini", {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}).json()
    part = first["candidates"][0]["content"]["parts"][0]
    assert part["functionCall"] == {"name": "Read", "args": ARGS}
    contents = [
        {"role": "user", "parts": [{"text": "x"}]},
        {"role": "model", "parts": [part]},
        {"role": "user", "parts": [{"functionResponse": {"name": "Read", "response": {"output": "PAPAYA"}}}]},
    ]
    second = post(fake, "gemini", {"contents": contents}).json()
    assert second["candidates"][0]["content"]["parts"] == [{"text": "Tool result: PAPAYA"}]


def test_answer_directive_wins_over_the_tool_result_echo(fake: FakeProviderThread) -> None:
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [_openai_call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "r"},
    ]
    body = post(fake, "openai", {"messages": messages}, model=SPEC + "+answer-all_done").json()
    assert body["choices"][0]["message"]["content"] == "all done"


def test_anthropic_thinking_signature_is_derived_from_its_text(fake: FakeProviderThread) -> None:
    body = post(fake, "anthropic", {"messages": [USER_X]}, model="m+reasoning").json()
    thinking = body["content"][0]
    assert thinking["type"] == "thinking" and thinking["signature"] == signature_for(thinking["thinking"])


def test_gemini_calls_carry_a_thought_signature_when_reasoning(fake: FakeProviderThread) -> None:
    body = post(fake, "gemini", {"contents": [GEMINI_USER_X]}, SPEC + "+reasoning")
    parts = body.json()["candidates"][0]["content"]["parts"]
    assert parts[0] == {"text": parts[0]["text"], "thought": True}
    assert parts[1]["thoughtSignature"] == call_signature(parts[1]["functionCall"])


# -- strict ------------------------------------------------------------------------------------------


def _openai_call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "Read", "arguments": json.dumps(ARGS)}}


def _openai_replay(call_id: str, **extra: Any) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "tool_calls": [_openai_call(call_id)], **extra},
        {"role": "tool", "tool_call_id": call_id, "content": "r"},
    ]


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        (_openai_replay("call_ok"), None),
        (
            _openai_replay("call_" + "x" * 60),
            "Invalid 'messages[1].tool_calls[0].id': string too long. Expected a string with maximum "
            "length 40, but got a string with length 65 instead.",
        ),
        (
            _openai_replay("call_ok", reasoning_content="hidden"),
            "messages[1].reasoning_content: Extra inputs are not permitted",
        ),
    ],
)
def test_strict_openai_refuses_long_tool_ids_and_unknown_message_keys(
    fake: FakeProviderThread, messages: list[dict[str, Any]], message: str | None
) -> None:
    r = post(fake, "openai", {"messages": messages}, model=SPEC + "+strict")
    if message is None:
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 400
        assert r.json()["error"] == {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }


def _anthropic_replay(first_block: dict[str, Any] | None, call_id: str = "toolu_1") -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": call_id, "name": "Read", "input": ARGS}
    return [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [first_block, call] if first_block else [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "r"}]},
    ]


SIGNED = {"type": "thinking", "thinking": "hmm", "signature": signature_for("hmm")}


@pytest.mark.parametrize(
    ("messages", "thinking", "message"),
    [
        (_anthropic_replay(SIGNED), True, None),
        (_anthropic_replay(None), False, None),
        (
            _anthropic_replay(None),
            True,
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`.",
        ),
        (
            _anthropic_replay({**SIGNED, "signature": "made-up"}),
            True,
            "messages.1.content.0: Invalid `signature` in `thinking` block",
        ),
        (
            _anthropic_replay(None, call_id="call_1__thought__abc=="),
            False,
            "messages.1.content.0.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
        ),
    ],
)
def test_strict_anthropic_enforces_signed_thinking_before_tool_use_and_id_patterns(
    fake: FakeProviderThread, messages: list[dict[str, Any]], thinking: bool, message: str | None
) -> None:
    body: dict[str, Any] = {"messages": messages}
    if thinking:
        body["thinking"] = {"type": "adaptive"}
    r = post(fake, "anthropic", body, model=SPEC + "+strict")
    if message is None:
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 400
        error = r.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"].startswith(message)


def _gemini_replay(call_part: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "parts": [{"text": "x"}]},
        {"role": "model", "parts": [call_part]},
        {"role": "user", "parts": [{"functionResponse": {"name": "Read", "response": {"output": "r"}}}]},
    ]


CALL = {"name": "Read", "args": ARGS}


@pytest.mark.parametrize(
    ("call_part", "message"),
    [
        ({"functionCall": CALL, "thoughtSignature": call_signature(CALL)}, None),
        ({"functionCall": CALL}, "Function call is missing a thought_signature in functionCall parts."),
        ({"functionCall": CALL, "thoughtSignature": "other"}, "Corrupted thought signature."),
    ],
)
def test_strict_gemini_wants_the_calls_thought_signature_back_in_the_current_turn(
    fake: FakeProviderThread, call_part: dict[str, Any], message: str | None
) -> None:
    r = post(fake, "gemini", {"contents": _gemini_replay(call_part)}, model=SPEC + "+strict")
    if message is None:
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 400
        assert r.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert r.json()["error"]["message"].startswith(message)
    # An earlier turn (a user text came after it) is not checked.
    later = [*_gemini_replay({"functionCall": CALL}), {"role": "model", "parts": [{"text": "ok"}]}]
    later.append({"role": "user", "parts": [{"text": "next"}]})
    assert post(fake, "gemini", {"contents": later}, model="m+strict").status_code == 200


def test_strict_anthropic_with_thinking_on_thinks_before_it_calls(fake: FakeProviderThread) -> None:
    """As a real model does: thinking on → a signed thinking block first, even without ``reasoning``."""
    body = {"messages": [USER_X], "thinking": {"type": "enabled", "budget_tokens": 1024}}
    content = post(fake, "anthropic", body, model=SPEC + "+strict").json()["content"]
    assert [block["type"] for block in content] == ["thinking", "tool_use"]
    assert content[0]["signature"] == signature_for(content[0]["thinking"])
    assert [b["type"] for b in post(fake, "anthropic", body).json()["content"]] == ["tool_use"]
