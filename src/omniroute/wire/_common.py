"""Helpers shared by several wire formats (PROV-1): canonical chunk and usage building, content and
reasoning text, data URLs, tool-argument JSON, ids, SSE framing, the ``_native`` frame key,
validation predicates and an upstream's base URL and credential headers.

The canonical shapes are OpenAI's: a ``chat.completion`` response, ``chat.completion.chunk`` stream
chunks and the Chat Completions request body. Two extensions ride along on assistant messages and
are ignored by OpenAI clients: ``reasoning_content`` (text of the model's reasoning) and
``thinking_blocks`` (Anthropic ``thinking``/``redacted_thinking`` blocks with their signatures, so a
conversation can be replayed to Anthropic). A stream chunk may carry :data:`NATIVE`: the upstream's
raw SSE frame, set only on same-format pass-through streams so the client surface can forward the
upstream's own events unchanged.
"""

from __future__ import annotations

import math
import time
import uuid
from typing import Any

import orjson

from omniroute.errors import InvalidRequest
from omniroute.values import Candidate, Usage

NATIVE = "_native"
"""Chunk key holding the raw upstream SSE frame (bytes) in same-format pass-through streams."""

SSE_COMMENT = b": keep-alive\n\n"
"""An SSE comment: every SSE client ignores it, and it keeps idle-timeout clocks and proxies alive."""

DEFAULT_MAX_TOKENS = 4096
"""Output cap sent to upstreams that require one (Anthropic) when neither request nor catalog has it."""


MID_CONVERSATION_SYSTEM_PREFIX = "System: "
"""Lead of the user-turn text a mid-conversation system message becomes for upstream families that
take instructions only at the start (Anthropic without the mid-conversation beta, Gemini)."""


def mid_conversation_system(content: Any) -> str:
    """A system/developer message that follows the first turn, as user-turn text for families with
    one top-level system prompt: kept at its place (order and the cached prefix stay intact)."""
    return MID_CONVERSATION_SYSTEM_PREFIX + text_of(content)


def base_url_for(cand: Candidate) -> str:
    """The connection's ``base_url`` override, else the provider's, without a trailing slash."""
    return (cand.connection.base_url or cand.provider.base_url).rstrip("/")


def auth_headers(cand: Candidate, api_key_header: str | None = None) -> dict[str, str]:
    """The connection's secret as upstream request headers: ``Authorization: Bearer`` for an OAuth
    token or when the format takes API keys that way (``api_key_header`` ``None``, as OpenAI does),
    else ``{api_key_header: key}`` (Anthropic ``x-api-key``, Gemini ``x-goog-api-key``); none
    without a secret."""
    secret = cand.connection.secret
    if not secret:
        return {}
    if api_key_header is None or cand.connection.auth_type == "oauth":
        return {"Authorization": f"Bearer {secret}"}
    return {api_key_header: secret}


def clamp_output_tokens(requested: int, model: Any) -> int:
    """``requested`` output tokens capped at the served model's ``max_output_tokens`` when the catalog
    knows it (> 0): an upstream rejects a cap above its model's limit (``max_tokens: 64000`` sent to a
    model configured with 4,096). ``model`` is a :class:`~omniroute.values.ModelInfo`."""
    limit = getattr(model, "max_output_tokens", 0) or 0
    return min(requested, limit) if limit > 0 else requested


def json_type(v: Any) -> str:
    """The JSON name of ``v``'s type for error messages (``object``, ``array``, ``string``,
    ``number``, ``boolean``, ``null``), not Python's (``dict``, ``list``, ``str``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list | tuple):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def shown(v: Any) -> str:
    """``v`` as a validation message echoes it: ``repr`` (strings quoted), except that a whole-number
    float is written as an integer (``99999999999999999999999`` is read as a float by the JSON parser,
    which takes integers up to 64 bits, and would otherwise read back as ``1e+23``)."""
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return str(int(v))
    return repr(v)


def is_int(v: Any) -> bool:
    """An integer that is not a boolean (JSON ``true`` is not ``1`` to a validator)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    """An integer or float that is not a boolean."""
    return isinstance(v, int | float) and not isinstance(v, bool)


def new_id(prefix: str) -> str:
    """A fresh random id such as ``call_3f2a…`` (24 hex digits)."""
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def now_s() -> int:
    """Unix time in whole seconds, for the ``created`` field of an answer the upstream did not stamp.

    The one real-time read in the wire formats: translation is pure and holds no clock, and the
    stamp is for the client to read, never for a routing rule."""
    return int(time.time())  # noqa: TID251


def dumps(obj: Any) -> str:
    """Compact JSON text."""
    return orjson.dumps(obj).decode()


def loads_object(text: Any) -> dict[str, Any]:
    """Tool-call arguments (JSON text) as an object; ``{}`` when empty, malformed or not an object."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str | bytes) or not text:
        return {}
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return obj if isinstance(obj, dict) else {}


def parse_data_url(url: str) -> tuple[str, str] | None:
    """``data:<media type>;base64,<data>`` → ``(media_type, data)``; ``None`` for other URLs."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[: -len(";base64")] or "application/octet-stream", data


def data_url(media_type: str, data: str) -> str:
    """``(media_type, base64 data)`` → a ``data:`` URL."""
    return f"data:{media_type};base64,{data}"


def text_of(content: Any) -> str:
    """The text of an OpenAI message ``content`` (a string or a list of parts); ``""`` for ``None``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or "")
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", None)
        )
    return ""


def collapse_text(parts: list[dict[str, Any]], sep: str = "") -> str | list[dict[str, Any]]:
    """Canonical content parts → one string joined with ``sep`` when they are all text (what every
    OpenAI-compatible server accepts), else the parts unchanged; parts carrying a prompt-cache marker
    (``cache_control``) are never merged, or the marker would lose its place."""
    if all(p["type"] == "text" and "cache_control" not in p for p in parts):
        return sep.join(p["text"] for p in parts)
    return parts


CACHE_CONTROL = "cache_control"
"""A prompt-cache breakpoint (``{"type": "ephemeral", "ttl": "5m" | "1h"}``; Anthropic prompt-caching
docs). Canonical requests keep it where the client put it — on a content part, a tool (next to
``function``) or a tool message — for the upstreams that use it (Anthropic)."""


def with_cache_marker(out: dict[str, Any], source: Any) -> dict[str, Any]:
    """``out`` with ``source``'s ``cache_control`` (when it is an object) copied onto it."""
    marker = source.get(CACHE_CONTROL) if isinstance(source, dict) else None
    if isinstance(marker, dict):
        out[CACHE_CONTROL] = marker
    return out


def _unmarked(obj: Any) -> Any:
    return {k: v for k, v in obj.items() if k != CACHE_CONTROL} if isinstance(obj, dict) else obj


def _unmarked_message(m: Any) -> Any:
    if not isinstance(m, dict):
        return m
    content = m.get("content")
    if isinstance(content, list):
        m = {**m, "content": [_unmarked(p) for p in content]}
    return _unmarked(m)


def _unmarked_tool(t: Any) -> Any:
    if isinstance(t, dict) and isinstance(t.get("function"), dict):
        t = {**t, "function": _unmarked(t["function"])}
    return _unmarked(t)


def without_cache_markers(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (canonical) without ``cache_control`` on messages, their content parts, tools and
    functions — for upstreams that do not know the field and whose strict validation would refuse
    it. ``body`` itself when it has none."""
    messages, tools = body.get("messages"), body.get("tools")
    if b'"cache_control"' not in orjson.dumps([messages, tools]):
        return body
    out = dict(body)
    if isinstance(messages, list):
        out["messages"] = [_unmarked_message(m) for m in messages]
    if isinstance(tools, list):
        out["tools"] = [_unmarked_tool(t) for t in tools]
    return out


def reasoning_text(message: Any) -> Any:
    """The reasoning text of a canonical message or stream delta: ``reasoning_content``, or
    ``reasoning`` as some OpenAI-compatible servers name it (``None``/empty when there is none)."""
    return message.get("reasoning_content") or message.get("reasoning")


def chunk(
    id: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    index: int = 0,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One canonical ``chat.completion.chunk`` with a single choice (``choices: []`` when ``delta`` is
    ``None`` and there is no finish)."""
    out: dict[str, Any] = {"id": id, "object": "chat.completion.chunk", "created": created, "model": model}
    if delta is None and finish is None:
        out["choices"] = []
    else:
        out["choices"] = [{"index": index, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        out["usage"] = usage
    return out


def usage_dict(
    prompt: int,
    completion: int,
    cached: int = 0,
    reasoning: int = 0,
    cache_write: int = 0,
    cache_write_1h: int = 0,
) -> dict[str, Any]:
    """An OpenAI ``usage`` object (shape of ``Usage.to_openai``): ``cached`` (cache reads) and
    ``cache_write`` (of which ``cache_write_1h`` at the 1-hour lifetime) are part of ``prompt``,
    ``reasoning`` of ``completion``."""
    return Usage(prompt, completion, cached, cache_write, cache_write_1h, reasoning).to_openai()


def usage_numbers(usage: Any) -> tuple[int, int, int]:
    """``(prompt, completion, cached)`` from a canonical ``usage`` object (zeros when absent)."""
    if not isinstance(usage, dict):
        return 0, 0, 0
    details = usage.get("prompt_tokens_details")
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), cached


def sse(event: str | None, obj: Any) -> bytes:
    """One SSE frame: ``event: <name>`` (when given) and ``data: <json>``."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + orjson.dumps(obj) + b"\n\n"


def sse_frame(event: str, data: bytes) -> bytes:
    """Re-frame a received SSE event unchanged (pass-through streams)."""
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + data + b"\n\n"


EFFORT_BUDGETS: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
"""``reasoning_effort`` → thinking budget in tokens (Anthropic ``budget_tokens``, Gemini
``thinkingBudget``); the inverse uses the nearest bucket (:func:`effort_for_budget`)."""


REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
"""``reasoning_effort`` / ``reasoning.effort`` values in the OpenAI API reference (``none`` and ``xhigh``
for newer models); only the :data:`EFFORT_BUDGETS` levels map to a thinking budget."""

MAX_METADATA_KEYS = 16
"""OpenAI ``metadata``: at most 16 key-value pairs (Chat Completions and Responses API reference)."""


def check_metadata(metadata: Any, param: str = "metadata") -> None:
    """OpenAI ``metadata``: an object of at most 16 string values (Chat Completions, Responses)."""
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise InvalidRequest(f"'{param}' must be an object of string values.", param=param)
    if len(metadata) > MAX_METADATA_KEYS:
        raise InvalidRequest(
            f"'{param}' may have at most {MAX_METADATA_KEYS} keys; got {len(metadata)}.", param=param
        )
    for k, v in metadata.items():
        if not isinstance(v, str):
            raise InvalidRequest(f"'{param}.{k}' must be a string; got {json_type(v)}.", param=f"{param}.{k}")


def effort_for_budget(budget: int) -> str:
    """A thinking budget in tokens → the nearest ``reasoning_effort`` (low/medium/high)."""
    if budget <= EFFORT_BUDGETS["low"]:
        return "low"
    if budget <= EFFORT_BUDGETS["medium"]:
        return "medium"
    return "high"


SIG_SEP = "__thought__"
"""Separator between a generated tool-call id and the URL-safe Gemini ``thoughtSignature`` it carries
(Gemini requires a function call's signature back on the next turn; carrying it in the id lets it
survive a round trip through any client format)."""


def call_id(signature: str | None = None) -> str:
    """A fresh tool-call id, carrying ``signature`` (base64) URL-safe after :data:`SIG_SEP`."""
    return with_signature(new_id("call_"), signature)


def with_signature(tool_call_id: str, signature: str | None) -> str:
    """``tool_call_id`` carrying a Gemini ``signature`` (base64) URL-safe after :data:`SIG_SEP`."""
    if not signature:
        return tool_call_id
    return tool_call_id + SIG_SEP + signature.replace("+", "-").replace("/", "_").rstrip("=")


def signature_of(tool_call_id: str) -> str | None:
    """The ``thoughtSignature`` carried in a tool-call id made by :func:`call_id`, else ``None``."""
    _, sep, sig = tool_call_id.partition(SIG_SEP)
    if not sep or not sig:
        return None
    sig = sig.replace("-", "+").replace("_", "/")
    return sig + "=" * (-len(sig) % 4)
