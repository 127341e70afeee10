"""Anthropic Messages request → canonical request (API-3, PROV-1), with the validation that gives a
bad body a 400 naming the field (API-6), and the local ``count_tokens`` estimate.

Input: a ``POST /v1/messages`` body (https://docs.anthropic.com/en/api/messages): ``model``,
``max_tokens`` (required), ``messages`` (``user``/``assistant`` turns whose ``content`` is a string or
content blocks), ``system`` (string or text blocks), ``tools`` (``{name, description, input_schema}``;
typed server tools are kept for pass-through but not translated), ``tool_choice``
(``auto | any | tool | none``), ``stop_sequences``, ``temperature``, ``top_p``, ``thinking``,
``metadata.user_id``, ``stream``. Output: the canonical OpenAI Chat Completions body. Error messages
read like Anthropic's own (``max_tokens: Field required``) and name the field in ``param``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from omniroute.errors import InvalidRequest
from omniroute.wire._common import (
    collapse_text,
    data_url,
    effort_for_budget,
    is_int,
    is_number,
    json_type,
    shown,
)
from omniroute.wire.anthropic.blocks import assistant_message
from omniroute.wire.anthropic.outbound import SURFACE
from omniroute.wire.base import Call, Inbound, TokenCount

USER_BLOCKS = frozenset({"text", "image", "document", "search_result", "tool_result", "container_upload"})
ASSISTANT_BLOCKS = frozenset(
    {
        "text",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
"""Content block types Anthropic accepts per role (Messages API reference, ``ContentBlockParam``)."""

TOOL_CHOICE_TYPES = ("auto", "any", "tool", "none")
SERVICE_TIERS = ("auto", "standard_only")
MESSAGE_ROLES = ("user", "assistant", "system")
"""Roles accepted inside ``messages``: ``system`` entries mid-conversation are what Claude Code sends
with the ``mid-conversation-system-2026-04-07`` beta, and the real API accepts them; they are passed
through unchanged to Anthropic upstreams and become what each other family supports."""


IMAGE_TOKENS = 1600
"""Token estimate per image/document block for ``count_tokens`` (Anthropic's vision guide: about
(width × height) / 750, ~1,600 for a 1.15-megapixel image)."""

CHARS_PER_TOKEN = 4
"""The local estimate's ratio for ``count_tokens`` when the upstream cannot count."""

_SKIP_KEYS = frozenset({"type", "id", "tool_use_id", "signature", "cache_control", "media_type"})


def _bad(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{param}: {message}", param=param)


def _number(body: Mapping[str, Any], name: str, lo: float, hi: float) -> None:
    v = body.get(name)
    if v is not None and (not is_number(v) or not lo <= v <= hi):
        raise _bad(name, f"Input should be a number between {lo:g} and {hi:g}; got {shown(v)}")


def _validate_block(block: Any, role: str, where: str) -> None:
    """One content block, checked per role and field as the Messages API does (a type the API does
    not know is rejected in its wording, so clients' own fallbacks recognise the error)."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _bad(where, "Input should be a content block object with a string 'type'")
    kind = block["type"]
    if role == "system":
        if kind != "text":
            raise _bad(f"{where}.type", f"system messages take text blocks only; got '{kind}'")
        allowed = frozenset({"text"})
    else:
        allowed = USER_BLOCKS if role == "user" else ASSISTANT_BLOCKS
    if kind not in allowed:
        other = "assistant" if role == "user" else "user"
        if kind in (ASSISTANT_BLOCKS if role == "user" else USER_BLOCKS):
            raise _bad(f"{where}.type", f"'{kind}' blocks are only allowed in '{other}' messages")
        raise _bad(
            f"{where}.type",
            f"Input tag '{kind}' does not match any of the expected content block "
            f"types: {', '.join(sorted(allowed))}",
        )
    if kind == "text" and not isinstance(block.get("text"), str):
        raise _bad(f"{where}.text", "Field required (a string)")
    if kind == "image":
        src = block.get("source")
        ok = isinstance(src, dict) and (
            (
                src.get("type") == "base64"
                and isinstance(src.get("data"), str)
                and isinstance(src.get("media_type"), str)
            )
            or (src.get("type") == "url" and isinstance(src.get("url"), str))
            or src.get("type") == "file"
        )
        if not ok:
            raise _bad(
                f"{where}.source", "Input should be {type: base64, media_type, data} or {type: url, url}"
            )
    if kind == "tool_use" and not (
        isinstance(block.get("id"), str)
        and isinstance(block.get("name"), str)
        and isinstance(block.get("input"), dict)
    ):
        raise _bad(where, "tool_use blocks need string 'id' and 'name' and an object 'input'")
    if kind == "tool_result":
        if not isinstance(block.get("tool_use_id"), str):
            raise _bad(f"{where}.tool_use_id", "Field required")
        inner = block.get("content")
        if inner is not None and not (
            isinstance(inner, str) or (isinstance(inner, list) and all(isinstance(b, dict) for b in inner))
        ):
            raise _bad(f"{where}.content", "Input should be a string or an array of content blocks")
    if kind == "document" and not (isinstance(block.get("source"), dict)):
        raise _bad(f"{where}.source", "Input should be a document source object {type, ...}")
    if kind == "thinking" and not isinstance(block.get("thinking"), str):
        raise _bad(f"{where}.thinking", "Field required (a string)")


def validate(body: Mapping[str, Any], *, model_required: bool = True) -> None:
    """Check an Anthropic Messages body; raises :class:`InvalidRequest` (400) naming the first bad field.

    Checked: ``model``, ``max_tokens`` (required, integer ≥ 1), ``messages`` (roles and content block
    types per role), ``system``, ``tools``, ``tool_choice``, ``temperature``/``top_p`` (0–1),
    ``top_k`` (≥ 0), ``stop_sequences``, ``stream``, ``metadata.user_id``, ``service_tier``,
    ``thinking``."""
    model = body.get("model")
    if model is None and model_required:
        raise _bad("model", "Field required")
    if model is not None and (not isinstance(model, str) or not model):
        raise _bad("model", "Input should be a non-empty string")
    mt = body.get("max_tokens")
    if mt is None:
        raise _bad("max_tokens", "Field required")
    if not is_int(mt) or mt < 1:
        raise _bad("max_tokens", f"Input should be an integer >= 1; got {shown(mt)}")
    _validate_messages(body.get("messages"))
    system = body.get("system")
    blocks_ok = isinstance(system, list) and all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in system
    )
    if system is not None and not isinstance(system, str) and not blocks_ok:
        raise _bad("system", "Input should be a string or an array of text blocks")
    _validate_tools(body)
    _number(body, "temperature", 0.0, 1.0)
    _number(body, "top_p", 0.0, 1.0)
    stop = body.get("stop_sequences")
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise _bad("stop_sequences", "Input should be an array of strings")
    if body.get("stream") is not None and not isinstance(body.get("stream"), bool):
        raise _bad("stream", "Input should be a boolean")
    _validate_options(body)
    _validate_thinking(body.get("thinking"))


def _validate_messages(messages: Any) -> None:
    """``messages``: a non-empty array of ``{role, content}`` whose blocks suit their role."""
    if messages is None:
        raise _bad("messages", "Field required (an array of messages)")
    if not isinstance(messages, list):
        raise _bad("messages", f"Input should be a valid array of messages; got {json_type(messages)}")
    if not messages:
        raise _bad("messages", "List should have at least 1 item")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise _bad(f"messages.{i}", "Input should be an object")
        role = m.get("role")
        if role not in MESSAGE_ROLES:
            raise _bad(
                f"messages.{i}.role", f"Input should be 'user', 'assistant' or 'system'; got {shown(role)}"
            )
        content = m.get("content")
        if isinstance(content, list):
            for j, block in enumerate(content):
                _validate_block(block, role, f"messages.{i}.content.{j}")
        elif not isinstance(content, str):
            raise _bad(f"messages.{i}.content", "Input should be a string or an array of content blocks")


def _validate_options(body: Mapping[str, Any]) -> None:
    """``top_k`` (≥ 0), ``metadata.user_id`` (a string) and ``service_tier``."""
    top_k = body.get("top_k")
    if top_k is not None and (not is_int(top_k) or top_k < 0):
        raise _bad("top_k", f"Input should be an integer >= 0; got {shown(top_k)}")
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise _bad("metadata", "Input should be an object like {user_id: string}")
        uid = metadata.get("user_id")
        if uid is not None and not isinstance(uid, str):
            raise _bad("metadata.user_id", f"Input should be a string; got {shown(uid)}")
    tier = body.get("service_tier")
    if tier is not None and tier not in SERVICE_TIERS:
        raise _bad("service_tier", f"Input should be 'auto' or 'standard_only'; got {shown(tier)}")


def _validate_thinking(thinking: Any) -> None:
    """``{type: enabled, budget_tokens: int >= 1}``, ``{type: disabled}`` or ``{type: adaptive}``.

    The budget's lower bound is the upstream's to enforce (Anthropic's has changed across models):
    a budget the gateway refused itself would break clients the real API serves."""
    if thinking is None:
        return
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind not in ("enabled", "disabled", "adaptive"):
        raise _bad(
            "thinking.type" if isinstance(thinking, dict) else "thinking",
            "Input should be {type: enabled, budget_tokens}, {type: disabled} or {type: adaptive}",
        )
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not is_int(budget) or budget < 1:
            raise _bad(
                "thinking.budget_tokens",
                f"Input should be a positive integer when enabled; got {shown(budget)}",
            )


def _validate_tools(body: Mapping[str, Any]) -> None:
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _bad("tools", "Input should be an array of tools")
        for i, t in enumerate(tools):
            if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
                raise _bad(f"tools.{i}.name", "Field required")
            custom = t.get("type") in (None, "custom")
            if custom and not isinstance(t.get("input_schema"), dict):
                raise _bad(f"tools.{i}.input_schema", "Field required (a JSON Schema object)")
    tc = body.get("tool_choice")
    if tc is None:
        return
    if not isinstance(tc, dict) or tc.get("type") not in TOOL_CHOICE_TYPES:
        got = tc.get("type") if isinstance(tc, dict) else tc
        raise _bad(
            "tool_choice.type", f"Input should be one of {', '.join(TOOL_CHOICE_TYPES)}; got {shown(got)}"
        )
    if tc["type"] == "tool" and not isinstance(tc.get("name"), str):
        raise _bad("tool_choice.name", "Field required when tool_choice.type is 'tool'")
    dptu = tc.get("disable_parallel_tool_use")
    if dptu is not None and not isinstance(dptu, bool):
        raise _bad("tool_choice.disable_parallel_tool_use", "Input should be a boolean")


# -- translation ----------------------------------------------------------------------------------


def _text(blocks: Any) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        return ""
    return "\n".join(
        str(b.get("text") or "") for b in blocks or () if isinstance(b, dict) and b.get("type") == "text"
    )


def _image_part(src: Any) -> dict[str, Any] | None:
    if not isinstance(src, Mapping):
        return None
    if src.get("type") == "base64":
        return {
            "type": "image_url",
            "image_url": {"url": data_url(str(src.get("media_type")), str(src.get("data")))},
        }
    if src.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": str(src.get("url"))}}
    return None


def _part(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """One user content block → an OpenAI content part (``None`` when it has no equivalent)."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block.get("text") or ""}
    src = block.get("source") or {}
    if kind == "image":
        return _image_part(src)
    if kind == "document":
        if src.get("type") == "base64":
            return {
                "type": "file",
                "file": {
                    "filename": block.get("title") or "document.pdf",
                    "file_data": data_url(str(src.get("media_type")), str(src.get("data"))),
                },
            }
        if src.get("type") == "text":
            return {"type": "text", "text": str(src.get("data") or "")}
    if kind == "search_result":
        return {"type": "text", "text": _text(block.get("content"))}
    return None


def _user_messages(content: Any) -> list[dict[str, Any]]:
    """One Anthropic user turn → tool messages (one per ``tool_result``, first) + a user message."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") == "tool_result":
            inner = block.get("content")
            text = inner if isinstance(inner, str) else _text(inner)
            if block.get("is_error") and text and not text.lower().startswith("error"):
                text = f"Error: {text}"
            tools.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
            for b in inner if isinstance(inner, list) else ():
                if (
                    isinstance(b, dict)
                    and b.get("type") == "image"
                    and (p := _image_part(b.get("source") or {}))
                ):
                    parts.append(p)
        elif (p := _part(block)) is not None:
            parts.append(p)
    if parts:
        tools.append({"role": "user", "content": collapse_text(parts, "\n")})
    return tools


def _assistant_message(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    return assistant_message(content)


def _tools(tools: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in tools or ():
        if t.get("type") not in (None, "custom") and not isinstance(t.get("input_schema"), dict):
            continue  # server tools (web search, code execution …) run at Anthropic: pass-through only
        fn: dict[str, Any] = {"name": t["name"], "parameters": t.get("input_schema") or {"type": "object"}}
        if t.get("description"):
            fn["description"] = t["description"]
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(tc: Mapping[str, Any]) -> str | dict[str, Any]:
    kind = tc.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": tc["name"]}}
    return {"auto": "auto", "any": "required", "none": "none"}[str(kind)]


def to_canonical(body: Mapping[str, Any]) -> dict[str, Any]:
    """A validated Anthropic Messages body → canonical Chat Completions body.

    ``system`` → a first system message; ``system`` entries inside ``messages`` → system messages at
    their place in the conversation; ``tool_result`` blocks → ``tool`` messages placed before the
    rest of their user turn; ``tool_use`` → ``tool_calls``; images → ``image_url`` parts (data URLs for
    base64); ``thinking`` blocks → ``reasoning_content`` + ``thinking_blocks``; ``stop_sequences`` →
    ``stop``; ``thinking.budget_tokens`` → ``reasoning_effort``; ``metadata.user_id`` → ``user``."""
    messages: list[dict[str, Any]] = []
    system = _text(body.get("system")) if body.get("system") else ""
    if system:
        messages.append({"role": "system", "content": system})
    for m in body.get("messages") or ():
        if m["role"] == "user":
            messages.extend(_user_messages(m["content"]))
        elif m["role"] == "system":
            messages.append({"role": "system", "content": _text(m["content"])})
        else:
            messages.append(_assistant_message(m["content"]))
    out: dict[str, Any] = {"messages": messages, "max_tokens": body["max_tokens"]}
    if body.get("model") is not None:
        out["model"] = body["model"]
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            out[name] = body[name]
    if body.get("stop_sequences"):
        out["stop"] = list(body["stop_sequences"])
    if body.get("stream"):
        out["stream"] = True
    tools = _tools(body.get("tools"))
    if tools:
        out["tools"] = tools
        tc = body.get("tool_choice")
        if isinstance(tc, dict):
            out["tool_choice"] = _tool_choice(tc)
            if tc.get("disable_parallel_tool_use") and tc.get("type") != "none":
                out["parallel_tool_calls"] = False
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        out["reasoning_effort"] = effort_for_budget(int(thinking.get("budget_tokens") or 0))
    user = (body.get("metadata") or {}).get("user_id") if isinstance(body.get("metadata"), dict) else None
    if isinstance(user, str) and user:
        out["user"] = user
    return out


# -- routes ------------------------------------------------------------------------------------------


async def read_messages(body: dict[str, Any], call: Call) -> Inbound:
    """``POST /v1/messages`` (API-3; ``?beta=true`` is the same path): validated, translated, and kept
    as the native body for Anthropic upstreams (same-format pass-through)."""
    validate(body, model_required=call.model_required)
    return Inbound(to_canonical(body), SURFACE, native=body)


def _chars(value: Any) -> tuple[int, int]:
    """``(characters of text, number of image/document blocks)`` in a Messages body fragment."""
    if isinstance(value, str):
        return len(value), 0
    if isinstance(value, list):
        totals = [_chars(v) for v in value]
        return sum(t[0] for t in totals), sum(t[1] for t in totals)
    if isinstance(value, dict):
        if value.get("type") in ("image", "document"):
            return 0, 1
        chars = media = 0
        for k, v in value.items():
            if k not in _SKIP_KEYS:
                c, m = _chars(v)
                chars, media = chars + c, media + m
        return chars, media
    return (len(str(value)), 0) if isinstance(value, int | float) else (0, 0)


def estimate_input_tokens(body: Mapping[str, Any]) -> int:
    """Local ``count_tokens`` estimate: ~characters/4 over system, messages and tools, plus
    :data:`IMAGE_TOKENS` per image or document block (at least 1)."""
    chars, media = _chars([body.get("system"), body.get("messages"), body.get("tools")])
    return max(1, math.ceil(chars / CHARS_PER_TOKEN) + media * IMAGE_TOKENS)


async def read_count_tokens(body: dict[str, Any], call: Call) -> TokenCount:
    """``POST /v1/messages/count_tokens`` → ``{"input_tokens": N}`` (the upstream's count, a tokenizer's
    or the local estimate: :mod:`omniroute.wire.count_tokens`); the body is validated as for
    ``/v1/messages`` and the model must be routable (404 naming ``model``)."""
    validate({"max_tokens": 1, **body}, model_required=call.model_required)
    model = str(call.headers.get("x-route-model") or body.get("model") or "")
    return TokenCount(
        model,
        {"input_tokens": estimate_input_tokens(body)},
        resolve=True,
        canonical=to_canonical({"max_tokens": 1, **body}),
        native=body,
        count_key="input_tokens",
    )
