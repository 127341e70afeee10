"""Optional request fields get the same treatment as the required ones (API-6): a wrong type or value
is a 400 in the client's wire format whose ``param`` (or message, where the wire format has no
``param``) names the field, never a pass-through to the upstream or a 500; a valid value of every
field still succeeds. One case per field on each surface: OpenAI chat, Anthropic Messages and
count_tokens, Responses, embeddings, the Gemini routes, and combo targets on the management API
(COMBO-1, OPS-2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import base_config
from omniroute.api.admin.combos import TargetIn
from omniroute.config import ConfigError, config_from_dict
from omniroute.core.combo import TARGET_KEYS, ComboInvalid
from omniroute.routing.combo_validation import check_combo
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MODEL = "local-o/model-o"
HI = [{"role": "user", "content": "hi"}]
CHAT = {"model": MODEL, "messages": HI}
MESSAGES = {"model": MODEL, "max_tokens": 32, "messages": HI}
RESPONSES = {"model": MODEL, "input": "hi"}
EMBEDDINGS = {"model": MODEL, "input": "hi"}
GEMINI_PATH = f"/v1beta/models/{MODEL}:generateContent"
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def gw(
    fakes: dict[str, FakeProviderThread], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayThread]:
    """One gateway for the whole module: every case here is a single stateless request."""
    gt = GatewayThread(config_from_dict(base_config(fakes, tmp_path_factory.mktemp("opt")), env={})).start()
    yield gt
    gt.stop()


def post(gw: GatewayThread, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{gw.url}{path}", json=body, timeout=15)


def assert_openai_400(r: httpx.Response, param: str) -> str:
    """400 in the OpenAI error shape naming ``param``; returns the message."""
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "code", "param"}
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param, err
    assert "Traceback" not in r.text
    return str(err["message"])


def assert_anthropic_error(r: httpx.Response, status: int, kind: str, named: str) -> str:
    """Anthropic's ``{"type": "error", "error": {"type", "message"}}`` whose message names the field."""
    assert r.status_code == status, r.text
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == kind, body
    message = str(body["error"]["message"])
    assert named in message, message
    return message


def assert_gemini_400(r: httpx.Response, param: str) -> None:
    """Gemini's ``{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT"}}`` naming the field."""
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == 400 and err["status"] == "INVALID_ARGUMENT", err
    assert f"'{param}'" in err["message"], err


# -- OpenAI chat completions ------------------------------------------------------------------------

CHAT_BAD: list[tuple[dict[str, Any], str]] = [
    ({"seed": "42"}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"seed": True}, "seed"),
    ({"logprobs": "yes"}, "logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": "5"}, "top_logprobs"),
    ({"top_logprobs": 5}, "top_logprobs"),
    ({"logprobs": False, "top_logprobs": 5}, "top_logprobs"),
    ({"parallel_tool_calls": "no"}, "parallel_tool_calls"),
    ({"metadata": "x"}, "metadata"),
    ({"metadata": {"k": 1}}, "metadata.k"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ({"user": 5}, "user"),
    ({"service_tier": 1}, "service_tier"),
    ({"store": "true"}, "store"),
    ({"modalities": "text"}, "modalities"),
    ({"modalities": ["text", 1]}, "modalities"),
    ({"reasoning_effort": "extreme"}, "reasoning_effort"),
    ({"reasoning_effort": 3}, "reasoning_effort"),
    ({"reasoning_effort": ["high"]}, "reasoning_effort"),
    # unhashable values where a name is expected used to escape as a TypeError (500)
    ({"messages": [{"role": ["user"], "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": {"t": 1}}]}]}, "messages[0].content[0].type"),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "http://x/a.png"}]}]},
        "messages[0].content[0].image_url.url",
    ),
    ({"response_format": {"type": ["json_object"]}}, "response_format.type"),
    ({"tool_choice": {"type": "function", "function": "f"}}, "tool_choice"),
]


@pytest.mark.parametrize(("patch", "param"), CHAT_BAD)
def test_chat_optional_field_with_bad_value_is_400_naming_it(
    gw: GatewayThread, patch: dict[str, Any], param: str
) -> None:
    """API-1/API-6: a wrong type or value of an optional chat field is a 400 with ``param``."""
    assert_openai_400(post(gw, "/v1/chat/completions", {**CHAT, **patch}), param)


CHAT_GOOD: list[dict[str, Any]] = [
    {"seed": 42},
    {"seed": -1},
    {"logprobs": True},
    {"logprobs": False},
    {"logprobs": True, "top_logprobs": 0},
    {"logprobs": True, "top_logprobs": 20},
    {"parallel_tool_calls": False, "tools": [TOOL]},
    {"metadata": {f"k{i}": "v" for i in range(16)}},
    {"metadata": {}},
    {"user": "user-1"},
    {"service_tier": "auto"},
    {"store": False},
    {"modalities": ["text"]},
    *({"reasoning_effort": e} for e in ("none", "minimal", "low", "medium", "high", "xhigh")),
    {"unknown_vendor_field": {"anything": [1, 2]}},
]


@pytest.mark.parametrize("patch", CHAT_GOOD)
def test_chat_optional_field_with_valid_value_still_succeeds(
    gw: GatewayThread, patch: dict[str, Any]
) -> None:
    r = post(gw, "/v1/chat/completions", {**CHAT, **patch})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("value", [5, 1.5, ["call_1"]])
def test_tool_message_with_non_string_tool_call_id_says_it_must_be_a_string(
    gw: GatewayThread, value: object
) -> None:
    """API-6: ``tool_call_id: 5`` is present but wrong, so the message says "must be a string"."""
    messages = [*HI, {"role": "tool", "tool_call_id": value, "content": "r"}]
    msg = assert_openai_400(
        post(gw, "/v1/chat/completions", {**CHAT, "messages": messages}), "messages[1].tool_call_id"
    )
    assert "must be a string" in msg and "required" not in msg


def test_tool_message_without_tool_call_id_still_says_required(gw: GatewayThread) -> None:
    messages = [*HI, {"role": "tool", "content": "r"}]
    msg = assert_openai_400(
        post(gw, "/v1/chat/completions", {**CHAT, "messages": messages}), "messages[1].tool_call_id"
    )
    assert "required" in msg


# -- Anthropic Messages -----------------------------------------------------------------------------

MESSAGES_BAD: list[tuple[dict[str, Any], str]] = [
    ({"top_k": -1}, "top_k"),
    ({"top_k": "5"}, "top_k"),
    ({"top_k": True}, "top_k"),
    ({"top_k": 1.5}, "top_k"),
    ({"metadata": "x"}, "metadata"),
    ({"metadata": {"user_id": 5}}, "metadata.user_id"),
    ({"stop_sequences": "END"}, "stop_sequences"),
    ({"stop_sequences": ["END", 1]}, "stop_sequences"),
    ({"temperature": 1.5}, "temperature"),
    ({"temperature": "warm"}, "temperature"),
    ({"top_p": 2}, "top_p"),
    ({"top_p": -0.1}, "top_p"),
    ({"tool_choice": "auto"}, "tool_choice.type"),
    ({"tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
    ({"tool_choice": {"type": ["auto"]}}, "tool_choice.type"),
    ({"tool_choice": {"type": "tool"}}, "tool_choice.name"),
    (
        {"tool_choice": {"type": "auto", "disable_parallel_tool_use": "yes"}},
        "tool_choice.disable_parallel_tool_use",
    ),
    ({"thinking": "enabled"}, "thinking"),
    ({"thinking": {"type": "on"}}, "thinking.type"),
    ({"thinking": {"budget_tokens": 2048}}, "thinking.type"),
    ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens"),
    ({"thinking": {"type": "enabled", "budget_tokens": 0}}, "thinking.budget_tokens"),
    ({"thinking": {"type": "enabled", "budget_tokens": "2048"}}, "thinking.budget_tokens"),
    ({"thinking": {"type": "enabled", "budget_tokens": True}}, "thinking.budget_tokens"),
    ({"service_tier": "premium"}, "service_tier"),
    ({"service_tier": 1}, "service_tier"),
    # content blocks whose inner fields used to reach the translator unchecked (500)
    (
        {"messages": [{"role": "user", "content": [{"type": "document", "source": "x"}]}]},
        "messages.0.content.0.source",
    ),
    (
        {"messages": [*HI, {"role": "assistant", "content": [{"type": "thinking", "thinking": 1}]}]},
        "messages.1.content.0.thinking",
    ),
    (
        {
            "messages": [
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 1}]}
            ]
        },
        "messages.0.content.0.content",
    ),
]


@pytest.mark.parametrize(("patch", "param"), MESSAGES_BAD)
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_messages_optional_field_with_bad_value_is_anthropic_400_naming_it(
    gw: GatewayThread, path: str, patch: dict[str, Any], param: str
) -> None:
    """API-3/API-6: Anthropic's error shape, ``invalid_request_error``, the message led by the field."""
    r = post(gw, path, {**MESSAGES, **patch})
    msg = assert_anthropic_error(r, 400, "invalid_request_error", param)
    assert msg.startswith(f"{param}:"), msg


MESSAGES_GOOD: list[dict[str, Any]] = [
    {"top_k": 0},
    {"top_k": 40},
    {"metadata": {"user_id": "user-1"}},
    {"metadata": {"user_id": None}},
    {"metadata": {}},
    {"stop_sequences": ["END"]},
    {"stop_sequences": []},
    {"temperature": 0},
    {"temperature": 1},
    {"top_p": 0.9},
    {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
    {"tool_choice": {"type": "any"}},
    {"tool_choice": {"type": "none"}},
    {"tool_choice": {"type": "tool", "name": "f"}},
    {"thinking": {"type": "enabled", "budget_tokens": 1024}},
    {"thinking": {"type": "enabled", "budget_tokens": 1023}},  # the upstream's bound, not ours
    {"thinking": {"type": "disabled"}},
    {"thinking": {"type": "adaptive"}},
    {"service_tier": "auto"},
    {"service_tier": "standard_only"},
]


@pytest.mark.parametrize("patch", MESSAGES_GOOD)
def test_messages_optional_field_with_valid_value_still_succeeds(
    gw: GatewayThread, patch: dict[str, Any]
) -> None:
    tools = [{"name": "f", "description": "d", "input_schema": {"type": "object"}}]
    body = {**MESSAGES, "max_tokens": 2048, "tools": tools, **patch}
    r = post(gw, "/v1/messages", body)
    assert r.status_code == 200, r.text
    assert r.json()["type"] == "message"
    r = post(gw, "/v1/messages/count_tokens", body)
    assert r.status_code == 200 and r.json()["input_tokens"] >= 1, r.text


@pytest.mark.parametrize("model", ["no-such-model", "local-o/", "mistral/mistral-large-latest"])
def test_count_tokens_with_unknown_model_is_anthropic_404_naming_model(gw: GatewayThread, model: str) -> None:
    """API-3/API-6/SPEC §4: count_tokens resolves the model like /v1/messages: unknown → 404."""
    body = {"model": model, "messages": HI}
    msg = assert_anthropic_error(post(gw, "/v1/messages/count_tokens", body), 404, "not_found_error", "model")
    chat = assert_anthropic_error(
        post(gw, "/v1/messages", {**body, "max_tokens": 8}), 404, "not_found_error", "model"
    )
    assert msg == chat


# -- Responses --------------------------------------------------------------------------------------

RESPONSES_BAD: list[tuple[dict[str, Any], str]] = [
    ({"truncation": "sometimes"}, "truncation"),
    ({"truncation": True}, "truncation"),
    ({"metadata": "x"}, "metadata"),
    ({"metadata": {"k": 1}}, "metadata.k"),
    ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"store": "no"}, "store"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"max_output_tokens": "16"}, "max_output_tokens"),
    ({"max_output_tokens": True}, "max_output_tokens"),
    ({"previous_response_id": 5}, "previous_response_id"),
    ({"previous_response_id": ""}, "previous_response_id"),
    ({"user": 5}, "user"),
    ({"service_tier": 1}, "service_tier"),
    ({"reasoning": {"effort": "extreme"}}, "reasoning.effort"),
    ({"input": [{"role": ["user"], "content": "x"}]}, "input[0].role"),
]


@pytest.mark.parametrize(("patch", "param"), RESPONSES_BAD)
def test_responses_optional_field_with_bad_value_is_400_naming_it(
    gw: GatewayThread, patch: dict[str, Any], param: str
) -> None:
    """API-4/API-6."""
    assert_openai_400(post(gw, "/v1/responses", {**RESPONSES, **patch}), param)


RESPONSES_GOOD: list[dict[str, Any]] = [
    {"truncation": "auto"},
    {"truncation": "disabled"},
    {"metadata": {"k": "v"}},
    {"parallel_tool_calls": True},
    {"store": False},
    {"max_output_tokens": 16},
    {"user": "user-1"},
    {"service_tier": "default"},
    *({"reasoning": {"effort": e}} for e in ("none", "minimal", "low", "medium", "high", "xhigh")),
]


@pytest.mark.parametrize("patch", RESPONSES_GOOD)
def test_responses_optional_field_with_valid_value_still_succeeds(
    gw: GatewayThread, patch: dict[str, Any]
) -> None:
    r = post(gw, "/v1/responses", {**RESPONSES, **patch})
    assert r.status_code == 200, r.text
    assert r.json()["object"] == "response"


def test_responses_previous_response_id_string_still_succeeds(gw: GatewayThread) -> None:
    first = post(gw, "/v1/responses", RESPONSES)
    assert first.status_code == 200, first.text
    r = post(gw, "/v1/responses", {**RESPONSES, "previous_response_id": first.json()["id"]})
    assert r.status_code == 200, r.text


# -- embeddings -------------------------------------------------------------------------------------

EMBEDDINGS_BAD: list[tuple[dict[str, Any], str]] = [
    ({"dimensions": 0}, "dimensions"),
    ({"dimensions": "8"}, "dimensions"),
    ({"dimensions": 1.5}, "dimensions"),
    ({"dimensions": True}, "dimensions"),
    ({"encoding_format": "hex"}, "encoding_format"),
    ({"encoding_format": ["float"]}, "encoding_format"),
    ({"user": 5}, "user"),
    ({"input": None}, "input"),
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": [""]}, "input"),
    ({"input": ["a", 1]}, "input"),
    ({"input": [1, "a"]}, "input"),
    ({"input": [[]]}, "input"),
    ({"input": [[1, "a"]]}, "input"),
    ({"input": [True]}, "input"),
    ({"input": [1.5]}, "input"),
    ({"input": {"text": "hi"}}, "input"),
    ({"input": 5}, "input"),
    ({"input": ["x"] * 2049}, "input"),
]


@pytest.mark.parametrize(("patch", "param"), EMBEDDINGS_BAD)
def test_embeddings_field_with_bad_value_is_400_naming_it(
    gw: GatewayThread, patch: dict[str, Any], param: str
) -> None:
    """API-5/API-6."""
    assert_openai_400(post(gw, "/v1/embeddings", {**EMBEDDINGS, **patch}), param)


EMBEDDINGS_GOOD: list[dict[str, Any]] = [
    {"input": "hi"},
    {"input": ["a", "b"]},
    {"input": [1, 2, 3]},
    {"input": [[1, 2], [3]]},
    {"dimensions": 4},
    {"encoding_format": "float"},
    {"encoding_format": "base64"},
    {"user": "user-1"},
]


@pytest.mark.parametrize("patch", EMBEDDINGS_GOOD)
def test_embeddings_field_with_valid_value_still_succeeds(gw: GatewayThread, patch: dict[str, Any]) -> None:
    r = post(gw, "/v1/embeddings", {**EMBEDDINGS, **patch})
    assert r.status_code == 200, r.text
    assert r.json()["data"]


# -- Gemini -----------------------------------------------------------------------------------------

GEMINI_BAD: list[tuple[dict[str, Any], str]] = [
    ({"tools": "x"}, "tools"),
    ({"tools": [5]}, "tools[0]"),
    ({"tools": [{"functionDeclarations": "f"}]}, "tools[0].functionDeclarations"),
    ({"toolConfig": "auto"}, "toolConfig"),
    ({"toolConfig": {"functionCallingConfig": 5}}, "toolConfig.functionCallingConfig"),
    (
        {"toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": "f"}}},
        "toolConfig.functionCallingConfig.allowedFunctionNames",
    ),
    ({"safetySettings": {"category": "x"}}, "safetySettings"),
    ({"safetySettings": [5]}, "safetySettings[0]"),
    ({"safetySettings": [{"category": 1, "threshold": "BLOCK_NONE"}]}, "safetySettings[0].category"),
    ({"safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT"}]}, "safetySettings[0].threshold"),
    ({"systemInstruction": 5}, "systemInstruction"),
    ({"systemInstruction": {"parts": "be brief"}}, "systemInstruction.parts"),
    ({"generationConfig": "x"}, "generationConfig"),
    ({"generationConfig": {"topK": -1}}, "generationConfig.topK"),
    ({"generationConfig": {"topK": "40"}}, "generationConfig.topK"),
    ({"generationConfig": {"stopSequences": "END"}}, "generationConfig.stopSequences"),
    ({"generationConfig": {"responseMimeType": 5}}, "generationConfig.responseMimeType"),
    ({"generationConfig": {"responseSchema": "x"}}, "generationConfig.responseSchema"),
    ({"generationConfig": {"responseModalities": "TEXT"}}, "generationConfig.responseModalities"),
    ({"generationConfig": {"responseLogprobs": "yes"}}, "generationConfig.responseLogprobs"),
    ({"generationConfig": {"logprobs": "5"}}, "generationConfig.logprobs"),
    ({"generationConfig": {"seed": "7"}}, "generationConfig.seed"),
    ({"generationConfig": {"candidateCount": 0}}, "generationConfig.candidateCount"),
    ({"generationConfig": {"thinkingConfig": 5}}, "generationConfig.thinkingConfig"),
    (
        {"generationConfig": {"thinkingConfig": {"thinkingBudget": "x"}}},
        "generationConfig.thinkingConfig.thinkingBudget",
    ),
    (
        {"generationConfig": {"thinkingConfig": {"thinkingLevel": "extreme"}}},
        "generationConfig.thinkingConfig.thinkingLevel",
    ),
    (
        {"generationConfig": {"thinkingConfig": {"includeThoughts": "yes"}}},
        "generationConfig.thinkingConfig.includeThoughts",
    ),
]


@pytest.mark.parametrize(("patch", "param"), GEMINI_BAD)
def test_gemini_field_with_bad_value_is_400_naming_it(
    gw: GatewayThread, patch: dict[str, Any], param: str
) -> None:
    """PROV-1/API-6: Gemini's error shape, the message naming the Gemini field."""
    assert_gemini_400(post(gw, GEMINI_PATH, {**GEMINI, **patch}), param)


GEMINI_GOOD: list[dict[str, Any]] = [
    {"tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}]},
    {"tools": [{"googleSearch": {}}]},
    {"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}},
    {"toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}},
    {"safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}]},
    {"systemInstruction": {"parts": [{"text": "be brief"}]}},
    {"systemInstruction": "be brief"},
    {"system_instruction": {"parts": [{"text": "be brief"}]}},
    {"generationConfig": {"topK": 40, "stopSequences": ["END"], "responseMimeType": "text/plain"}},
    {"generationConfig": {"seed": 7, "candidateCount": 1, "responseModalities": ["TEXT"]}},
    {"generationConfig": {"responseLogprobs": True, "logprobs": 2}},
    {"generationConfig": {"responseMimeType": "application/json", "responseSchema": {"type": "OBJECT"}}},
    {"generationConfig": {"thinkingConfig": {"thinkingBudget": -1, "includeThoughts": True}}},
    {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
    {"generationConfig": {"thinkingConfig": {"thinkingLevel": "low"}}},
    {"generationConfig": {"thinkingConfig": {"thinkingLevel": "HIGH"}}},
    {"generationConfig": {"thinkingConfig": {"thinkingLevel": "THINKING_LEVEL_UNSPECIFIED"}}},
    {"generation_config": {"top_k": 40}},
]


@pytest.mark.parametrize("patch", GEMINI_GOOD)
def test_gemini_field_with_valid_value_still_succeeds(gw: GatewayThread, patch: dict[str, Any]) -> None:
    r = post(gw, GEMINI_PATH, {**GEMINI, **patch})
    assert r.status_code == 200, r.text
    assert r.json()["candidates"]


# -- combo targets (management API, config file, CLI validation) ------------------------------------

ALL_KEYS_TARGET = {
    "model": MODEL,
    "connection_id": "o1",
    "weight": 10,
    "priority": 1,
    "timeout_s": 5,
    "tags": ["team-x"],
    "prompt": "Answer briefly.",
}


@pytest.mark.parametrize("extra", ["bogus", "label", "provider", "modelId"])
def test_combo_target_with_unknown_field_is_400_naming_it(gw: GatewayThread, extra: str) -> None:
    """COMBO-1/API-6: an unknown key inside a target is named, on create and on update."""
    body = {"name": f"cx-{extra}", "strategy": "priority", "targets": [{"model": MODEL, extra: 1}]}
    assert_openai_400(post(gw, "/api/combos", body), f"targets[0].{extra}")
    ok = post(gw, "/api/combos", {**body, "targets": [MODEL]})
    assert ok.status_code == 201, ok.text
    r = httpx.put(
        f"{gw.url}/api/combos/cx-{extra}", json={"targets": [MODEL, {"model": MODEL, extra: "x"}]}, timeout=10
    )
    assert_openai_400(r, f"targets[1].{extra}")
    assert httpx.get(f"{gw.url}/api/combos/cx-{extra}", timeout=10).json()["targets"] == [{"model": MODEL}]


def test_combo_target_with_every_config_file_key_is_accepted(gw: GatewayThread) -> None:
    """COMBO-1/OPS-2: the management API takes every key a config-file target may carry."""
    targets = [ALL_KEYS_TARGET, {"model": "local-c/model-c", "timeout_ms": 2500}]
    r = post(gw, "/api/combos", {"name": "all-keys", "strategy": "pipeline", "targets": targets})
    assert r.status_code == 201, r.text
    assert r.json()["targets"][0] == ALL_KEYS_TARGET
    r = post(gw, "/api/combos", {"name": "with-ref", "targets": [{"combo_ref": "all-keys", "priority": 2}]})
    assert r.status_code == 201, r.text


def test_combo_target_keys_match_the_config_file_contract(tmp_path: Path) -> None:
    """OPS-2: the management API and the config file accept exactly the same target keys."""
    assert set(TARGET_KEYS) == set(TargetIn.model_fields)
    data = {
        "database_url": f"sqlite:///{tmp_path}/x.db",
        "combos": [
            {"name": "a", "targets": [ALL_KEYS_TARGET, {"combo_ref": "b"}]},
            {"name": "b", "targets": [{"model": MODEL, "timeout_ms": 100}]},
        ],
    }
    cfg = config_from_dict(data, env={})
    assert cfg.combos[0].targets[0].prompt == "Answer briefly."
    data["combos"][0]["targets"][0] = {**ALL_KEYS_TARGET, "bogus": 1}  # type: ignore[index]
    with pytest.raises(ConfigError, match=r"combos\[0\]\.targets\[0\]\.bogus"):
        config_from_dict(data, env={})


def test_check_combo_rejects_unknown_target_fields_for_the_cli() -> None:
    """COMBO-1: the shared validation (CLI ``combos create``) names an unknown target key too."""
    combo = {"name": "c", "strategy": "priority", "targets": [{"model": MODEL, "weights": 3}]}
    with pytest.raises(ComboInvalid) as exc:
        check_combo(combo, [], None)
    assert exc.value.param == "targets[0].weights"
    long_prompt = {"name": "c", "strategy": "pipeline", "targets": [{"model": MODEL, "prompt": "x" * 20_001}]}
    with pytest.raises(ComboInvalid) as exc:
        check_combo(long_prompt, [], None)
    assert exc.value.param == "targets[0].prompt"
    ok, _ = check_combo({**combo, "targets": [ALL_KEYS_TARGET]}, [], None)
    assert [t.to_json() for t in ok.targets] == [ALL_KEYS_TARGET]
