"""Inbound OpenAI Chat Completions (API-1, API-6): the body is already the canonical shape, so reading
it is validating it.

Hand-written rather than a pydantic model on purpose: it runs on every request of the hot path, checks
only what the gateway relies on or what upstreams would reject with a less clear message, and leaves
unknown fields untouched so they pass through to the provider. Every error is a 400
:class:`~omniroute.errors.InvalidRequest` whose ``param`` names the field.
"""

from __future__ import annotations

from typing import Any

from omniroute.errors import InvalidRequest
from omniroute.wire._common import REASONING_EFFORTS, check_metadata, is_int, is_number, json_type, shown
from omniroute.wire.base import Call, Inbound
from omniroute.wire.openai.outbound import SURFACE

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal"})
TOOL_CHOICES = frozenset({"none", "auto", "required"})
RESPONSE_FORMATS = frozenset({"text", "json_object", "json_schema"})

# (field, min, max) from the OpenAI API reference for Chat Completions.
_NUMBER_RANGES: tuple[tuple[str, float, float], ...] = (
    ("temperature", 0.0, 2.0),
    ("top_p", 0.0, 1.0),
    ("presence_penalty", -2.0, 2.0),
    ("frequency_penalty", -2.0, 2.0),
)
_POSITIVE_INTS = ("max_tokens", "max_completion_tokens", "n")
_BOOLS = ("logprobs", "parallel_tool_calls", "store")
_STRINGS = ("user", "service_tier")
_OPTIONAL = frozenset(
    {*_BOOLS, *_STRINGS, "seed", "top_logprobs", "metadata", "modalities", "reasoning_effort"}
)
"""Fields checked by :func:`_validate_optional`, only when the body has one of them (most bodies don't)."""
MAX_TOP_LOGPROBS = 20


def _bad(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, param=param)


def validate_chat_body(body: dict[str, Any], *, model_required: bool = True) -> None:
    """Check a chat body; raises :class:`InvalidRequest` (400) naming the first bad field."""
    model = body.get("model")
    if model is None:
        if model_required:
            raise _bad("model", "Missing required field 'model'.")
    elif not isinstance(model, str) or not model:
        raise _bad("model", "'model' must be a non-empty string.")
    messages = body.get("messages")
    if messages is None:
        raise _bad("messages", "Missing required field 'messages'.")
    if not isinstance(messages, list):
        raise _bad("messages", f"'messages' must be an array, got {json_type(messages)}.")
    if not messages:
        raise _bad("messages", "'messages' must contain at least one message.")
    for i, m in enumerate(messages):
        _validate_message(i, m)
    _validate_sampling(body)
    _validate_tools(body)
    rf = body.get("response_format")
    if rf is not None and (
        not isinstance(rf, dict) or not isinstance(rf.get("type"), str) or rf["type"] not in RESPONSE_FORMATS
    ):
        raise _bad(
            "response_format.type",
            f"'response_format.type' must be one of {', '.join(sorted(RESPONSE_FORMATS))}.",
        )


def _validate_message(i: int, m: Any) -> None:
    """``messages[i]``: an object with a known ``role``, ``content`` (string, parts or null; required
    for user/system/developer), well-formed ``tool_calls`` and, for role ``tool``, ``tool_call_id``."""
    if not isinstance(m, dict):
        raise _bad(f"messages[{i}]", f"'messages[{i}]' must be an object.")
    role = m.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise _bad(
            f"messages[{i}].role",
            f"'messages[{i}].role' must be one of {', '.join(sorted(ROLES))}; got {shown(role)}.",
        )
    content = m.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise _bad(
            f"messages[{i}].content",
            f"'messages[{i}].content' must be a string, an array of content parts or null.",
        )
    if isinstance(content, list):
        for j, part in enumerate(content):
            _validate_part(i, j, part)
    tool_calls = m.get("tool_calls")
    if tool_calls is not None:
        if not isinstance(tool_calls, list):
            raise _bad(f"messages[{i}].tool_calls", f"'messages[{i}].tool_calls' must be an array.")
        _validate_tool_calls(i, tool_calls)
    if role == "tool" and not isinstance(m.get("tool_call_id"), str):
        missing = m.get("tool_call_id") is None
        raise _bad(
            f"messages[{i}].tool_call_id",
            f"'messages[{i}].tool_call_id' is required for role 'tool'."
            if missing
            else f"'messages[{i}].tool_call_id' must be a string; got {m['tool_call_id']!r}.",
        )
    if content is None and role in ("user", "system", "developer"):
        raise _bad(f"messages[{i}].content", f"'messages[{i}].content' is required for role '{role}'.")


def _validate_part(i: int, j: int, part: Any) -> None:
    """``messages[i].content[j]``: a part of a known type; text parts carry a string ``text`` and image
    parts an ``image_url.url`` string."""
    if not isinstance(part, dict) or not isinstance(part.get("type"), str) or part["type"] not in PART_TYPES:
        raise _bad(
            f"messages[{i}].content[{j}].type",
            f"'messages[{i}].content[{j}]' must be an object whose 'type' is one of "
            f"{', '.join(sorted(PART_TYPES))}.",
        )
    if part["type"] == "text" and not isinstance(part.get("text"), str):
        raise _bad(
            f"messages[{i}].content[{j}].text",
            f"'messages[{i}].content[{j}].text' must be a string for a part of type 'text'.",
        )
    image = part.get("image_url")
    if part["type"] == "image_url" and not (isinstance(image, dict) and isinstance(image.get("url"), str)):
        raise _bad(
            f"messages[{i}].content[{j}].image_url.url",
            f"'messages[{i}].content[{j}].image_url.url' must be a string URL or data URL.",
        )


def _validate_sampling(body: dict[str, Any]) -> None:
    """The number ranges, positive integers, ``stream``, the optional fields, ``stream_options``,
    ``stop`` (a string or up to 4) and ``logit_bias`` (numbers in -100…100)."""
    for name, lo, hi in _NUMBER_RANGES:
        v = body.get(name)
        if v is not None and (not is_number(v) or not lo <= v <= hi):
            raise _bad(name, f"'{name}' must be a number between {lo:g} and {hi:g}; got {shown(v)}.")
    for name in _POSITIVE_INTS:
        v = body.get(name)
        if v is not None and (not is_int(v) or v < 1):
            raise _bad(name, f"'{name}' must be an integer >= 1; got {shown(v)}.")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _bad("stream", f"'stream' must be a boolean; got {shown(stream)}.")
    if not _OPTIONAL.isdisjoint(body):
        _validate_optional(body)
    so = body.get("stream_options")
    if so is not None and (not isinstance(so, dict) or not isinstance(so.get("include_usage", False), bool)):
        raise _bad("stream_options", "'stream_options' must be an object like {\"include_usage\": true}.")
    stop = body.get("stop")
    if stop is not None and not (
        isinstance(stop, str)
        or (isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) for s in stop))
    ):
        raise _bad("stop", "'stop' must be a string or an array of up to 4 strings.")
    lb = body.get("logit_bias")
    if lb is not None and (
        not isinstance(lb, dict) or not all(is_number(v) and -100 <= v <= 100 for v in lb.values())
    ):
        raise _bad(
            "logit_bias", "'logit_bias' must be an object mapping token ids to numbers between -100 and 100."
        )


def _validate_tool_calls(i: int, tool_calls: list[Any]) -> None:
    """An assistant message's ``tool_calls``: objects with a string ``id``, ``type`` "function" and a
    ``function`` whose ``name`` and ``arguments`` (JSON text) are strings."""
    for k, tc in enumerate(tool_calls):
        at = f"messages[{i}].tool_calls[{k}]"
        if not isinstance(tc, dict):
            raise _bad(at, f"'{at}' must be an object.")
        if not isinstance(tc.get("id"), str):
            raise _bad(f"{at}.id", f"'{at}.id' must be a string.")
        if tc.get("type") != "function":
            raise _bad(f"{at}.type", f"'{at}.type' must be 'function'; got {tc.get('type')!r}.")
        fn = tc.get("function")
        if not isinstance(fn, dict):
            raise _bad(f"{at}.function", f"'{at}.function' must be an object with 'name' and 'arguments'.")
        if not isinstance(fn.get("name"), str):
            raise _bad(f"{at}.function.name", f"'{at}.function.name' must be a string.")
        if not isinstance(fn.get("arguments"), str):
            raise _bad(
                f"{at}.function.arguments",
                f"'{at}.function.arguments' must be a string of JSON text; got {fn.get('arguments')!r}.",
            )


def _validate_optional(body: dict[str, Any]) -> None:
    """The optional fields of :data:`_OPTIONAL`: booleans, strings, ``seed``, ``top_logprobs`` (0–20,
    needs ``logprobs: true``), ``metadata``, ``modalities``, ``reasoning_effort``."""
    for name in _BOOLS:
        v = body.get(name)
        if v is not None and not isinstance(v, bool):
            raise _bad(name, f"'{name}' must be a boolean; got {shown(v)}.")
    for name in _STRINGS:
        v = body.get(name)
        if v is not None and not isinstance(v, str):
            raise _bad(name, f"'{name}' must be a string; got {shown(v)}.")
    seed = body.get("seed")
    if seed is not None and not is_int(seed):
        raise _bad("seed", f"'seed' must be an integer; got {shown(seed)}.")
    top = body.get("top_logprobs")
    if top is not None:
        if not is_int(top) or not 0 <= top <= MAX_TOP_LOGPROBS:
            raise _bad(
                "top_logprobs",
                f"'top_logprobs' must be an integer from 0 to {MAX_TOP_LOGPROBS}; got {shown(top)}.",
            )
        if body.get("logprobs") is not True:
            raise _bad("top_logprobs", "'top_logprobs' requires 'logprobs' to be true.")
    check_metadata(body.get("metadata"))
    modalities = body.get("modalities")
    if modalities is not None and not (
        isinstance(modalities, list) and all(isinstance(m, str) for m in modalities)
    ):
        raise _bad("modalities", "'modalities' must be an array of strings such as [\"text\"].")
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise _bad(
            "reasoning_effort",
            f"'reasoning_effort' must be one of {', '.join(REASONING_EFFORTS)}; got {shown(effort)}.",
        )


def _validate_tools(body: dict[str, Any]) -> None:
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _bad("tools", "'tools' must be an array of tool definitions.")
        for i, t in enumerate(tools):
            fn = t.get("function") if isinstance(t, dict) else None
            if not isinstance(t, dict) or t.get("type", "function") != "function" or not isinstance(fn, dict):
                raise _bad(
                    f"tools[{i}]", f'\'tools[{i}]\' must be {{"type": "function", "function": {{...}}}}.'
                )
            if not isinstance(fn.get("name"), str) or not fn["name"]:
                raise _bad(
                    f"tools[{i}].function.name", f"'tools[{i}].function.name' must be a non-empty string."
                )
            if fn.get("parameters") is not None and not isinstance(fn["parameters"], dict):
                raise _bad(
                    f"tools[{i}].function.parameters",
                    f"'tools[{i}].function.parameters' must be a JSON Schema object.",
                )
    tc = body.get("tool_choice")
    if tc is None:
        return
    if isinstance(tc, str):
        if tc not in TOOL_CHOICES:
            raise _bad(
                "tool_choice",
                f"'tool_choice' must be one of none, auto, required or a function object; got {shown(tc)}.",
            )
    elif not (
        isinstance(tc, dict)
        and tc.get("type") == "function"
        and isinstance(tc.get("function"), dict)
        and isinstance(tc["function"].get("name"), str)
    ):
        raise _bad(
            "tool_choice", '\'tool_choice\' object must be {"type": "function", "function": {"name": ...}}.'
        )


async def read_chat(body: dict[str, Any], call: Call) -> Inbound:
    """``POST /v1/chat/completions`` (API-1): the validated body is the canonical request."""
    validate_chat_body(body, model_required=call.model_required)
    return Inbound(body, SURFACE)
