"""OpenAI Responses API request → canonical request (API-4, PROV-1), with field-naming 400s (API-6).

Input: a ``POST /v1/responses`` body (https://platform.openai.com/docs/api-reference/responses/create):
``model``, ``input`` (a string, or items: messages ``{role, content}`` with ``input_text`` /
``input_image`` / ``input_file`` / ``output_text`` parts, ``function_call`` and
``function_call_output``, ``custom_tool_call`` and ``custom_tool_call_output`` items; ``reasoning``
and ``item_reference`` items are skipped; ``additional_tools`` items declare tools like ``tools``),
``instructions``, ``tools`` (``{type: function, name, description, parameters, strict}``, ``{type:
custom, name, description, format}`` and ``{type: namespace, tools}`` whose tools are declared under
their own names; hosted tools are skipped), ``tool_choice``, ``max_output_tokens``, ``temperature``,
``top_p``, ``parallel_tool_calls``, ``text.format``, ``reasoning.effort``, ``user``, ``stream``.

``previous_response_id`` is looked up in the gateway's store (per API key) and its stored
conversation passed to :func:`to_canonical` as ``history``; instructions of an earlier response are
not carried over (as in OpenAI's API).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from omniroute.errors import InvalidRequest
from omniroute.wire._common import (
    CACHE_CONTROL,
    REASONING_EFFORTS,
    check_metadata,
    collapse_text,
    is_int,
    is_number,
    shown,
    with_cache_marker,
)
from omniroute.wire.base import Call, Inbound, ResponseStore
from omniroute.wire.reasoning import blocks_from_encrypted
from omniroute.wire.responses.outbound import ResponsesSurface, declared_tools

ROLES = frozenset({"user", "assistant", "system", "developer"})
TOOL_CHOICES = frozenset({"auto", "none", "required"})
TRUNCATIONS = ("auto", "disabled")


def _bad(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, param=param)


def _text_parts(content: Any, where: str) -> list[dict[str, Any]]:
    """Message content → OpenAI chat parts (text, image_url, file)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise _bad(f"{where}.content", f"'{where}.content' must be a string or an array of content parts.")
    parts: list[dict[str, Any]] = []
    for j, p in enumerate(content):
        kind = p.get("type") if isinstance(p, dict) else None
        if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            parts.append(with_cache_marker({"type": "text", "text": str(p.get("text") or "")}, p))
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(p.get("refusal") or "")})
        elif kind == "input_image":
            url = p.get("image_url")
            if not isinstance(url, str) or not url:
                raise _bad(
                    f"{where}.content[{j}].image_url",
                    f"'{where}.content[{j}].image_url' must be a URL or data URL "
                    "(file ids are not supported).",
                )
            image: dict[str, Any] = {"url": url}
            if p.get("detail") in ("low", "high", "auto"):
                image["detail"] = p["detail"]
            parts.append(with_cache_marker({"type": "image_url", "image_url": image}, p))
        elif kind == "input_file":
            if not isinstance(p.get("file_data"), str):
                raise _bad(
                    f"{where}.content[{j}].file_data",
                    f"'{where}.content[{j}].file_data' is required (file ids are not supported).",
                )
            file = {"filename": p.get("filename") or "file", "file_data": p["file_data"]}
            parts.append(with_cache_marker({"type": "file", "file": file}, p))
        else:
            raise _bad(
                f"{where}.content[{j}].type",
                f"'{where}.content[{j}].type' must be one of input_text, input_image, input_file, "
                f"output_text; got {shown(kind)}.",
            )
    return parts


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(str(p.get("text") or "") for p in output if isinstance(p, dict))
    return "" if output is None else str(output)


def _reasoning(item: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """A ``reasoning`` input item → ``(reasoning text, replayable thinking blocks)``: the blocks the
    gateway sealed in its ``encrypted_content`` (none for a value the gateway did not issue)."""
    text = "".join(
        str(p.get("text") or "") for p in item.get("content") or () if isinstance(p, dict)
    ) or "".join(str(p.get("text") or "") for p in item.get("summary") or () if isinstance(p, dict))
    return text, blocks_from_encrypted(item.get("encrypted_content"))


def _attach(out: list[dict[str, Any]], text: str, blocks: list[dict[str, Any]]) -> None:
    """Give the assistant message just added the reasoning that preceded it."""
    msg = out[-1] if out else None
    if msg is None or msg["role"] != "assistant":
        return
    if text:
        msg["reasoning_content"] = (msg.get("reasoning_content") or "") + text
    if blocks:
        msg.setdefault("thinking_blocks", []).extend(blocks)


def input_messages(items: Any) -> list[dict[str, Any]]:
    """``input`` (string or item list) → canonical messages; ``function_call`` items join the
    preceding assistant message as ``tool_calls``; ``function_call_output`` → ``tool`` messages;
    a ``reasoning`` item's text and sealed blocks go to the assistant message that follows it."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise _bad("input", "'input' must be a string or an array of input items.")
    out: list[dict[str, Any]] = []
    pending: tuple[str, list[dict[str, Any]]] = ("", [])
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("type") == "reasoning":
            text, blocks = _reasoning(item)
            pending = (pending[0] + text, pending[1] + blocks)
            continue
        _input_item(out, item, i)
        if pending[0] or pending[1]:
            _attach(out, *pending)
            pending = ("", [])
    return out


def _input_item(out: list[dict[str, Any]], item: Any, i: int) -> None:
    """One input item (not ``reasoning``) → canonical messages appended to ``out``."""
    where = f"input[{i}]"
    if not isinstance(item, dict):
        raise _bad(where, f"'{where}' must be an object.")
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "message":
        role = item.get("role")
        if not isinstance(role, str) or role not in ROLES:
            raise _bad(
                f"{where}.role",
                f"'{where}.role' must be one of {', '.join(sorted(ROLES))}; got {shown(role)}.",
            )
        parts = _text_parts(item.get("content"), where)
        if role == "assistant" and not any(CACHE_CONTROL in p for p in parts):
            out.append({"role": "assistant", "content": "".join(str(p.get("text") or "") for p in parts)})
        else:
            out.append({"role": role, "content": collapse_text(parts)})
    elif kind in ("function_call", "custom_tool_call"):
        _append_call(out, item, where)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        if not isinstance(item.get("call_id"), str):
            raise _bad(f"{where}.call_id", f"'{where}.call_id' is required.")
        out.append(
            {"role": "tool", "tool_call_id": item["call_id"], "content": _output_text(item.get("output"))}
        )
    elif kind in ("item_reference", "additional_tools"):
        return  # additional_tools are read by declared_tools
    else:
        raise _bad(
            f"{where}.type",
            f"'{where}.type' must be message, function_call, function_call_output, custom_tool_call, "
            f"custom_tool_call_output, reasoning, item_reference or additional_tools; got {shown(kind)}.",
        )


def _append_call(out: list[dict[str, Any]], item: Mapping[str, Any], where: str) -> None:
    """A ``function_call`` or ``custom_tool_call`` item → a tool call of the preceding assistant
    message (a new one if there is none); a custom call's free-form ``input`` becomes the arguments
    ``{"input": ...}`` of the function the custom tool is declared as upstream."""
    if not isinstance(item.get("call_id"), str) or not isinstance(item.get("name"), str):
        raise _bad(f"{where}.call_id", f"'{where}' needs string 'call_id' and 'name'.")
    if item.get("type") == "custom_tool_call":
        arguments = json.dumps({"input": str(item.get("input") or "")})
    else:
        arguments = str(item.get("arguments") or "{}")
    call = {
        "id": item["call_id"],
        "type": "function",
        "function": {"name": item["name"], "arguments": arguments},
    }
    last = out[-1] if out else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
        if not last.get("content"):
            last["content"] = None
    else:
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})


CUSTOM_TOOL_NOTE = (
    "This tool takes free-form text, not JSON: put the whole input, verbatim, in the string "
    "parameter `input`."
)
"""Appended to a custom tool's description where it is declared to an upstream as a function."""


def _custom_function(t: Mapping[str, Any]) -> dict[str, Any]:
    """A custom tool (free-form or grammar input) → a function with one string parameter ``input``
    whose description says it takes free-form text (and the grammar the text must follow)."""
    note = CUSTOM_TOOL_NOTE
    fmt = t.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "grammar" and fmt.get("definition"):
        note += f" The text must follow this {fmt.get('syntax') or ''} grammar:\n{fmt['definition']}"
    description = f"{t['description']}\n\n{note}" if t.get("description") else note
    return {
        "name": t["name"],
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The tool's free-form input."}},
            "required": ["input"],
        },
    }


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Function and custom tools of ``tools`` and of ``additional_tools`` input items → canonical
    function tools; raises :class:`InvalidRequest` naming a tool without a name or declared twice."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for where, t in declared_tools(body):
        if not isinstance(t.get("name"), str) or not t["name"]:
            raise _bad(f"{where}.name", f"'{where}.name' must be a non-empty string.")
        if t["name"] in seen:
            raise _bad(
                f"{where}.name",
                f"'{where}.name': tool {t['name']!r} is declared twice (namespaced tools are declared "
                "to the model under their own names, which must be unique).",
            )
        seen.add(t["name"])
        if t["type"] == "custom":
            out.append(with_cache_marker({"type": "function", "function": _custom_function(t)}, t))
            continue
        fn: dict[str, Any] = {
            "name": t["name"],
            "parameters": t.get("parameters") or {"type": "object", "properties": {}},
        }
        if t.get("description"):
            fn["description"] = t["description"]
        if isinstance(t.get("strict"), bool):
            fn["strict"] = t["strict"]
        out.append(with_cache_marker({"type": "function", "function": fn}, t))
    return out


def _tool_choice(tc: Any) -> str | dict[str, Any]:
    if isinstance(tc, str):
        if tc not in TOOL_CHOICES:
            raise _bad(
                "tool_choice",
                f"'tool_choice' must be one of auto, none, required or "
                f'{{"type": "function", "name": ...}}; got {shown(tc)}.',
            )
        return tc
    # A custom tool is declared upstream as a function of the same name.
    if isinstance(tc, dict) and tc.get("type") in ("function", "custom") and isinstance(tc.get("name"), str):
        return {"type": "function", "function": {"name": tc["name"]}}
    if isinstance(tc, dict) and tc.get("type") == "allowed_tools":
        return str(tc.get("mode") or "auto")
    raise _bad(
        "tool_choice",
        '\'tool_choice\' must be one of auto, none, required or {"type": "function", "name": ...}.',
    )


def _response_format(text: Any) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        schema: dict[str, Any] = {"name": fmt.get("name") or "response", "schema": fmt.get("schema") or {}}
        if isinstance(fmt.get("strict"), bool):
            schema["strict"] = fmt["strict"]
        return {"type": "json_schema", "json_schema": schema}
    raise _bad("text.format.type", "'text.format.type' must be text, json_object or json_schema.")


def validate(body: Mapping[str, Any], *, model_required: bool = True) -> None:
    """Top-level checks (items are checked while translating); raises :class:`InvalidRequest`."""
    model = body.get("model")
    if model is None and model_required:
        raise _bad("model", "Missing required field 'model'.")
    if model is not None and (not isinstance(model, str) or not model):
        raise _bad("model", "'model' must be a non-empty string.")
    if body.get("input") is None:
        raise _bad("input", "Missing required field 'input'.")
    mot = body.get("max_output_tokens")
    if mot is not None and (not is_int(mot) or mot < 1):
        raise _bad("max_output_tokens", f"'max_output_tokens' must be an integer >= 1; got {shown(mot)}.")
    for name, hi in (("temperature", 2.0), ("top_p", 1.0)):
        v = body.get(name)
        if v is not None and (not is_number(v) or not 0 <= v <= hi):
            raise _bad(name, f"'{name}' must be a number between 0 and {hi:g}; got {shown(v)}.")
    for name in ("stream", "store", "parallel_tool_calls"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise _bad(name, f"'{name}' must be a boolean.")
    prev = body.get("previous_response_id")
    if prev is not None and (not isinstance(prev, str) or not prev):
        raise _bad("previous_response_id", "'previous_response_id' must be a response id string.")
    inp = body.get("input")
    if not isinstance(inp, str | list) or not inp:
        raise _bad("input", "'input' must be a non-empty string or a non-empty array of input items.")
    _validate_options(body)


def _validate_options(body: Mapping[str, Any]) -> None:
    """``instructions``, ``reasoning`` and ``text`` objects, ``metadata``, ``reasoning.effort``,
    ``truncation``, ``user``/``service_tier`` strings and ``include``."""
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _bad("instructions", "'instructions' must be a string.")
    for name in ("reasoning", "text"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            raise _bad(name, f"'{name}' must be an object.")
    check_metadata(body.get("metadata"))
    effort = (body.get("reasoning") or {}).get("effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise _bad(
            "reasoning.effort",
            f"'reasoning.effort' must be one of {', '.join(REASONING_EFFORTS)}; got {shown(effort)}.",
        )
    truncation = body.get("truncation")
    if truncation is not None and truncation not in TRUNCATIONS:
        raise _bad("truncation", f"'truncation' must be 'auto' or 'disabled'; got {shown(truncation)}.")
    for name in ("user", "service_tier"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise _bad(name, f"'{name}' must be a string.")
    include = body.get("include")
    if include is not None and not (isinstance(include, list) and all(isinstance(i, str) for i in include)):
        raise _bad("include", "'include' must be an array of strings.")


def to_canonical(
    body: Mapping[str, Any], history: list[dict[str, Any]] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Responses body (+ the stored ``history`` of ``previous_response_id``) → ``(canonical chat
    body, conversation)`` where ``conversation`` is history + this input without the instructions (what
    is stored for the next turn)."""
    new_messages = input_messages(body.get("input"))
    conversation = [*(history or ()), *new_messages]
    messages = list(conversation)
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.insert(0, {"role": "system", "content": body["instructions"]})
    out: dict[str, Any] = {"messages": messages}
    if body.get("model") is not None:
        out["model"] = body["model"]
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    for name in ("temperature", "top_p", "user"):
        if body.get(name) is not None:
            out[name] = body[name]
    if body.get("stream"):
        out["stream"] = True
    tools = _tools(body)
    if tools:
        out["tools"] = tools
        if body.get("tool_choice") is not None:
            out["tool_choice"] = _tool_choice(body["tool_choice"])
        if body.get("parallel_tool_calls") is False:
            out["parallel_tool_calls"] = False
    elif body.get("tool_choice") is not None:
        _tool_choice(body["tool_choice"])
    rf = _response_format(body.get("text"))
    if rf is not None:
        out["response_format"] = rf
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        out["reasoning_effort"] = reasoning["effort"]
    return out, conversation


async def _history(
    store: ResponseStore | None, body: Mapping[str, Any], api_key_id: str | None
) -> list[dict[str, Any]] | None:
    """The stored conversation of ``previous_response_id`` (``None`` without one); raises
    :class:`InvalidRequest` when it is unknown, expired or another key's."""
    prev = body.get("previous_response_id")
    if not prev:
        return None
    data = await store.get_response(prev, api_key_id) if store is not None else None
    if data is None:
        raise InvalidRequest(
            f"previous_response_id: no response '{prev}' was found for this API key (unknown or expired).",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    messages = data.get("messages")
    return list(messages) if isinstance(messages, list) else []


async def read_responses(body: dict[str, Any], call: Call) -> Inbound:
    """``POST /v1/responses`` (API-4): validated, the ``previous_response_id`` history prepended,
    translated, and rendered by a :class:`ResponsesSurface` that saves this turn when it is done."""
    validate(body, model_required=call.model_required)
    history = await _history(call.store, body, call.api_key_id)
    canonical, conversation = to_canonical(body, history)
    surface = ResponsesSurface(call.store, body, conversation, call.api_key_id, int(call.clock.time()))
    return Inbound(canonical, surface, before_end=surface.flush)
