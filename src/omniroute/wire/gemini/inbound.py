"""Gemini ``generateContent`` request → canonical request (PROV-1, API-6), for the Gemini-style inbound
routes: ``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent`` (SSE with
``?alt=sse``, else Google's streamed JSON array) and ``:countTokens`` — also under
``/v1/models/...``, since the google-genai SDK defaults to API version ``v1``.

Input: a ``GenerateContentRequest`` (https://ai.google.dev/api/generate-content): ``contents`` (turns
with role ``user`` | ``model`` and ``parts``: ``text``, ``inlineData``, ``fileData``, ``functionCall``,
``functionResponse``; ``thought`` parts are dropped), ``systemInstruction``, ``tools``
(``functionDeclarations`` with ``parameters`` in Gemini's OpenAPI subset or ``parametersJsonSchema``),
``toolConfig.functionCallingConfig`` and ``generationConfig``. Field names are accepted in camelCase
(REST) and snake_case (as some SDKs send them). ``{model}`` comes from the URL and is any routable
model string (``local-o/model-o``, a combo, ``auto``).

A ``functionResponse`` is matched to its call by ``id`` when both carry one, else to the latest
unanswered call of the same name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from omniroute.errors import InvalidRequest
from omniroute.wire._common import (
    SIG_SEP,
    collapse_text,
    data_url,
    dumps,
    effort_for_budget,
    is_int,
    new_id,
    shown,
    with_signature,
)
from omniroute.wire.base import Call, Inbound, TokenCount
from omniroute.wire.gemini.json_array import ARRAY_SURFACE, JSON_ARRAY_CONTENT_TYPE
from omniroute.wire.gemini.outbound import SURFACE
from omniroute.wire.openai.inbound import validate_chat_body
from omniroute.wire.reasoning import blocks_from_encrypted

PATH = re.compile(r"^/(?:v1|v1beta|v1alpha)/models/(.+):(generateContent|streamGenerateContent|countTokens)$")
"""The model-method paths the Gemini routes serve: ``(model, method)``."""

MEDIA_TOKENS = 258
"""``countTokens`` estimate per inline/file media part (Gemini's token guide: 258 per small image)."""

_MODES = {"AUTO": "auto", "VALIDATED": "auto", "NONE": "none", "ANY": "required"}
_PART_KINDS = "text, inlineData, fileData, functionCall, functionResponse"
THINKING_LEVELS = ("THINKING_LEVEL_UNSPECIFIED", "MINIMAL", "LOW", "MEDIUM", "HIGH")
"""``thinkingConfig.thinkingLevel`` values (Gemini API reference, ``ThinkingLevel``); any case."""


def _bad(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, param=param)


def _get(d: Mapping[str, Any], camel: str) -> Any:
    """``d[camel]``, else its snake_case spelling."""
    if camel in d:
        return d[camel]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return d.get(snake)


def json_schema(schema: Any) -> Any:
    """Gemini's OpenAPI-subset schema → JSON Schema: type names lower-cased, ``nullable`` → a
    ``"null"`` type, ``propertyOrdering`` dropped."""
    if isinstance(schema, list):
        return [json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("propertyOrdering", "property_ordering", "nullable"):
            continue
        if key == "type" and isinstance(value, str):
            value = value.lower()
        elif key == "properties" and isinstance(value, dict):
            value = {name: json_schema(p) for name, p in value.items()}
        elif key in ("items", "anyOf", "any_of"):
            key, value = ("anyOf" if key == "any_of" else key), json_schema(value)
        out[key] = value
    if schema.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


def _media(where: str, blob: Any, key: str) -> dict[str, Any]:
    if not isinstance(blob, dict):
        raise _bad(where, f"'{where}' must be an object.")
    mime = str(_get(blob, "mimeType") or "application/octet-stream")
    if key == "inlineData":
        if not isinstance(blob.get("data"), str):
            raise _bad(f"{where}.data", f"'{where}.data' must be base64 text.")
        url = data_url(mime, blob["data"])
    else:
        url = str(_get(blob, "fileUri") or "")
        if not url:
            raise _bad(f"{where}.fileUri", f"'{where}.fileUri' is required.")
    if mime.startswith("image/") or key == "fileData":
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "file", "file": {"filename": "file", "file_data": url}}


class _Calls:
    """Tool-call ids for ``functionCall`` parts and the matching of ``functionResponse`` parts; the
    thinking blocks sealed in the current turn's call signatures (:mod:`omniroute.wire.reasoning`)."""

    def __init__(self) -> None:
        self.open: list[tuple[str, str]] = []  # (id, name) not yet answered, oldest first
        self.blocks: list[dict[str, Any]] = []

    def call(self, fc: Mapping[str, Any], signature: Any = None) -> dict[str, Any]:
        """A canonical tool call for ``fc``; a Gemini ``signature`` rides with the id, a gateway-sealed
        one gives back the thinking blocks it carries (another family's reasoning)."""
        cid = str(fc.get("id") or new_id("call_"))
        sealed = blocks_from_encrypted(signature)
        if sealed:
            self.blocks += sealed
        elif isinstance(signature, str) and signature and SIG_SEP not in cid:
            cid = with_signature(cid, signature)
        name = str(fc.get("name") or "")
        self.open.append((cid, name))
        return {
            "id": cid,
            "type": "function",
            "function": {"name": name, "arguments": dumps(fc.get("args") or {})},
        }

    def answer(self, fr: Mapping[str, Any]) -> str:
        want, name = fr.get("id"), fr.get("name")
        for pos in range(len(self.open) - 1, -1, -1):
            cid, cname = self.open[pos]
            if (want and cid == want) or (not want and cname == name):
                del self.open[pos]
                return cid
        return str(want or new_id("call_"))


def _turn(content: Any, i: int, calls: _Calls) -> list[dict[str, Any]]:
    """One ``Content`` → canonical messages (user text/media, model text + tool_calls, tool results)."""
    where = f"contents[{i}]"
    if not isinstance(content, dict):
        raise _bad(where, f"'{where}' must be an object with 'role' and 'parts'.")
    role = content.get("role") or "user"
    if role not in ("user", "model", "function", "tool"):
        raise _bad(f"{where}.role", f"'{where}.role' must be 'user' or 'model'; got {shown(role)}.")
    parts = content.get("parts")
    if not isinstance(parts, list):
        raise _bad(f"{where}.parts", f"'{where}.parts' must be an array of parts.")
    texts, tool_calls, results = _parts(parts, where, calls)
    if role == "model":
        if not texts and not tool_calls:
            return []
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(t.get("text", "") for t in texts) if texts else None,
        }
        if tool_calls:
            msg["tool_calls"] = tool_calls
        if calls.blocks:
            msg["thinking_blocks"], calls.blocks = calls.blocks, []
        return [msg]
    out = results
    if texts:
        out = [*out, {"role": "user", "content": collapse_text(texts)}]
    return out


def _parts(
    parts: list[Any], where: str, calls: _Calls
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """A turn's parts → ``(text and media parts, tool calls, tool result messages)``; ``thought``
    parts and bare thought signatures are dropped."""
    texts: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for j, p in enumerate(parts):
        pw = f"{where}.parts[{j}]"
        if not isinstance(p, dict):
            raise _bad(pw, f"'{pw}' must be an object.")
        if isinstance(p.get("text"), str):
            if not p.get("thought"):
                texts.append({"type": "text", "text": p["text"]})
        elif (blob := _get(p, "inlineData")) is not None:
            texts.append(_media(f"{pw}.inlineData", blob, "inlineData"))
        elif (blob := _get(p, "fileData")) is not None:
            texts.append(_media(f"{pw}.fileData", blob, "fileData"))
        elif isinstance(fc := _get(p, "functionCall"), dict):
            tool_calls.append(calls.call(fc, _get(p, "thoughtSignature")))
        elif isinstance(fr := _get(p, "functionResponse"), dict):
            results.append(
                {"role": "tool", "tool_call_id": calls.answer(fr), "content": dumps(fr.get("response") or {})}
            )
        elif not (_get(p, "thoughtSignature") and len(p) == 1):
            raise _bad(pw, f"'{pw}' must carry one of {_PART_KINDS}.")
    return texts, tool_calls, results


def _system(si: Any) -> str:
    if isinstance(si, str):
        return si
    if isinstance(si, dict):
        return "".join(str(p.get("text") or "") for p in si.get("parts") or () if isinstance(p, dict))
    return ""


def _tools(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _bad("tools", "'tools' must be an array.")
    out: list[dict[str, Any]] = []
    for i, group in enumerate(tools):
        decls = _get(group, "functionDeclarations") if isinstance(group, dict) else None
        for j, d in enumerate(decls or ()):
            if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d["name"]:
                raise _bad(
                    f"tools[{i}].functionDeclarations[{j}].name",
                    f"'tools[{i}].functionDeclarations[{j}].name' must be a non-empty string.",
                )
            params = _get(d, "parametersJsonSchema")
            if params is None:
                params = json_schema(d.get("parameters")) if d.get("parameters") else None
            fn: dict[str, Any] = {
                "name": d["name"],
                "parameters": params or {"type": "object", "properties": {}},
            }
            if d.get("description"):
                fn["description"] = d["description"]
            out.append({"type": "function", "function": fn})
    return out


def _tool_choice(body: Mapping[str, Any]) -> str | dict[str, Any] | None:
    tc = _get(body, "toolConfig")
    cfg = _get(tc, "functionCallingConfig") if isinstance(tc, dict) else None
    if not isinstance(cfg, dict) or cfg.get("mode") is None:
        return None
    mode = str(cfg["mode"]).upper()
    if mode not in _MODES:
        raise _bad(
            "toolConfig.functionCallingConfig.mode",
            f"'toolConfig.functionCallingConfig.mode' must be one of {', '.join(_MODES)}; "
            f"got {cfg['mode']!r}.",
        )
    names = _get(cfg, "allowedFunctionNames") or []
    if mode == "ANY" and len(names) == 1:
        return {"type": "function", "function": {"name": names[0]}}
    return _MODES[mode]


def _generation(cfg: Any, out: dict[str, Any]) -> None:
    if cfg is None:
        return
    if not isinstance(cfg, dict):
        raise _bad("generationConfig", "'generationConfig' must be an object.")
    for src, dst in (
        ("temperature", "temperature"),
        ("topP", "top_p"),
        ("maxOutputTokens", "max_tokens"),
        ("candidateCount", "n"),
        ("seed", "seed"),
        ("presencePenalty", "presence_penalty"),
        ("frequencyPenalty", "frequency_penalty"),
    ):
        v = _get(cfg, src)
        if v is not None:
            out[dst] = v
    stop = _get(cfg, "stopSequences")
    if stop:
        out["stop"] = list(stop)
    schema = _get(cfg, "responseJsonSchema") or _get(cfg, "responseSchema")
    if isinstance(schema, dict):
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": json_schema(schema)},
        }
    elif _get(cfg, "responseMimeType") == "application/json":
        out["response_format"] = {"type": "json_object"}
    thinking = _get(cfg, "thinkingConfig")
    if isinstance(thinking, dict):
        level = _get(thinking, "thinkingLevel")
        budget = _get(thinking, "thinkingBudget")
        if isinstance(level, str) and level.upper() != "THINKING_LEVEL_UNSPECIFIED":
            out["reasoning_effort"] = level.lower()
        elif isinstance(budget, int) and budget > 0:
            out["reasoning_effort"] = effort_for_budget(budget)


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _check_objects(body: Mapping[str, Any]) -> None:
    """Shapes of ``systemInstruction``, ``tools``, ``toolConfig`` and ``safetySettings``."""
    si = _get(body, "systemInstruction")
    if si is not None:
        if not isinstance(si, dict | str):
            raise _bad("systemInstruction", "'systemInstruction' must be a Content object {parts: [...]}.")
        parts = si.get("parts") if isinstance(si, dict) else None
        if parts is not None and not (isinstance(parts, list) and all(isinstance(p, dict) for p in parts)):
            raise _bad("systemInstruction.parts", "'systemInstruction.parts' must be an array of parts.")
    _check_tools(_get(body, "tools"))
    _check_tool_config(_get(body, "toolConfig"))
    _check_safety(_get(body, "safetySettings"))


def _check_tools(tools: Any) -> None:
    """``tools``: an array of Tool objects whose ``functionDeclarations`` is an array."""
    if tools is not None:
        if not isinstance(tools, list):
            raise _bad("tools", "'tools' must be an array of Tool objects.")
        for i, group in enumerate(tools):
            if not isinstance(group, dict):
                raise _bad(f"tools[{i}]", f"'tools[{i}]' must be a Tool object.")
            decls = _get(group, "functionDeclarations")
            if decls is not None and not isinstance(decls, list):
                raise _bad(
                    f"tools[{i}].functionDeclarations", f"'tools[{i}].functionDeclarations' must be an array."
                )


def _check_tool_config(tc: Any) -> None:
    """``toolConfig``: ``{functionCallingConfig: {mode, allowedFunctionNames: [string]}}``."""
    if tc is not None:
        if not isinstance(tc, dict):
            raise _bad("toolConfig", "'toolConfig' must be an object {functionCallingConfig: {...}}.")
        fcc = _get(tc, "functionCallingConfig")
        if fcc is not None and not isinstance(fcc, dict):
            raise _bad(
                "toolConfig.functionCallingConfig", "'toolConfig.functionCallingConfig' must be an object."
            )
        names = _get(fcc, "allowedFunctionNames") if isinstance(fcc, dict) else None
        if names is not None and not _strings(names):
            where = "toolConfig.functionCallingConfig.allowedFunctionNames"
            raise _bad(where, f"'{where}' must be an array of strings.")


def _check_safety(safety: Any) -> None:
    """``safetySettings``: an array of ``{category, threshold}`` strings."""
    if safety is not None:
        if not isinstance(safety, list):
            raise _bad("safetySettings", "'safetySettings' must be an array of {category, threshold}.")
        for i, setting in enumerate(safety):
            if not isinstance(setting, dict):
                raise _bad(f"safetySettings[{i}]", f"'safetySettings[{i}]' must be {{category, threshold}}.")
            for key in ("category", "threshold"):
                if not isinstance(setting.get(key), str):
                    raise _bad(f"safetySettings[{i}].{key}", f"'safetySettings[{i}].{key}' must be a string.")


def _check_generation(cfg: Any) -> None:
    """``generationConfig`` fields the canonical checks do not cover (those name the Gemini field
    through the surface: temperature, topP, maxOutputTokens, candidateCount, seed, penalties)."""
    if cfg is None:
        return
    if not isinstance(cfg, dict):
        raise _bad("generationConfig", "'generationConfig' must be an object.")
    where = "generationConfig"
    top_k = _get(cfg, "topK")
    if top_k is not None and (not is_int(top_k) or top_k < 0):
        raise _bad(f"{where}.topK", f"'{where}.topK' must be an integer >= 0; got {shown(top_k)}.")
    stop = _get(cfg, "stopSequences")
    if stop is not None and not _strings(stop):
        raise _bad(f"{where}.stopSequences", f"'{where}.stopSequences' must be an array of strings.")
    mime = _get(cfg, "responseMimeType")
    if mime is not None and not isinstance(mime, str):
        raise _bad(f"{where}.responseMimeType", f"'{where}.responseMimeType' must be a string.")
    for key in ("responseSchema", "responseJsonSchema"):
        if _get(cfg, key) is not None and not isinstance(_get(cfg, key), dict):
            raise _bad(f"{where}.{key}", f"'{where}.{key}' must be a schema object.")
    modalities = _get(cfg, "responseModalities")
    if modalities is not None and not _strings(modalities):
        raise _bad(
            f"{where}.responseModalities", f"'{where}.responseModalities' must be an array of strings."
        )
    if _get(cfg, "responseLogprobs") is not None and not isinstance(_get(cfg, "responseLogprobs"), bool):
        raise _bad(f"{where}.responseLogprobs", f"'{where}.responseLogprobs' must be a boolean.")
    if _get(cfg, "logprobs") is not None and not is_int(_get(cfg, "logprobs")):
        raise _bad(f"{where}.logprobs", f"'{where}.logprobs' must be an integer.")
    _check_thinking(_get(cfg, "thinkingConfig"))


def _check_thinking(thinking: Any) -> None:
    """``generationConfig.thinkingConfig``: ``thinkingBudget`` (integer), ``thinkingLevel`` (one of
    :data:`THINKING_LEVELS`, any case) and ``includeThoughts`` (boolean)."""
    if thinking is None:
        return
    at = "generationConfig.thinkingConfig"
    if not isinstance(thinking, dict):
        raise _bad(at, f"'{at}' must be an object.")
    budget = _get(thinking, "thinkingBudget")
    if budget is not None and not is_int(budget):
        raise _bad(f"{at}.thinkingBudget", f"'{at}.thinkingBudget' must be an integer; got {shown(budget)}.")
    level = _get(thinking, "thinkingLevel")
    if level is not None and not (isinstance(level, str) and level.upper() in THINKING_LEVELS):
        raise _bad(
            f"{at}.thinkingLevel",
            f"'{at}.thinkingLevel' must be one of {', '.join(THINKING_LEVELS)}; got {shown(level)}.",
        )
    include = _get(thinking, "includeThoughts")
    if include is not None and not isinstance(include, bool):
        raise _bad(f"{at}.includeThoughts", f"'{at}.includeThoughts' must be a boolean.")


def to_canonical(body: Mapping[str, Any], model: str, *, stream: bool) -> dict[str, Any]:
    """A ``GenerateContentRequest`` for ``model`` → canonical chat body; raises :class:`InvalidRequest`
    (400) naming the first bad field (``contents``, ``contents[i].parts[j]``, ``systemInstruction``,
    ``tools[…]``, ``toolConfig…``, ``safetySettings[i]…``, ``generationConfig…``)."""
    _check_objects(body)
    _check_generation(_get(body, "generationConfig"))
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise _bad("contents", "'contents' is required: a non-empty array of {role, parts}.")
    messages: list[dict[str, Any]] = []
    system = _system(_get(body, "systemInstruction"))
    if system:
        messages.append({"role": "system", "content": system})
    calls = _Calls()
    for i, content in enumerate(contents):
        messages.extend(_turn(content, i, calls))
    if not messages:
        raise _bad("contents", "'contents' has no text, media or function parts.")
    out: dict[str, Any] = {"model": model, "messages": messages}
    if stream:
        out["stream"] = True
    tools = _tools(body)
    tc = _tool_choice(body)
    if tools:
        out["tools"] = tools
        if tc is not None:
            out["tool_choice"] = tc
    _generation(_get(body, "generationConfig"), out)
    return out


# -- routes ------------------------------------------------------------------------------------------


def _count(value: Any) -> tuple[int, int]:
    if isinstance(value, str):
        return len(value), 0
    if isinstance(value, list):
        parts = [_count(v) for v in value]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    if isinstance(value, dict):
        if any(k in value for k in ("inlineData", "inline_data", "fileData", "file_data")):
            return 0, 1
        parts = [_count(v) for k, v in value.items() if k not in ("role", "mimeType", "thoughtSignature")]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    return 0, 0


def estimate_tokens(body: Mapping[str, Any]) -> int:
    """Local ``countTokens`` estimate: ~characters/4 plus :data:`MEDIA_TOKENS` per media part."""
    inner = body.get("generateContentRequest") or body
    chars, media = _count([inner.get("systemInstruction"), inner.get("contents"), inner.get("tools")])
    return max(1, math.ceil(chars / 4) + media * MEDIA_TOKENS)


_GEMINI_NAMES = {
    "temperature": "generationConfig.temperature",
    "top_p": "generationConfig.topP",
    "max_tokens": "generationConfig.maxOutputTokens",
    "n": "generationConfig.candidateCount",
    "presence_penalty": "generationConfig.presencePenalty",
    "frequency_penalty": "generationConfig.frequencyPenalty",
    "stop": "generationConfig.stopSequences",
    "seed": "generationConfig.seed",
    "reasoning_effort": "generationConfig.thinkingConfig.thinkingLevel",
}


def _validate_canonical(canonical: dict[str, Any]) -> None:
    """The translated request passes the same checks as an OpenAI one; errors name the Gemini field."""
    try:
        validate_chat_body(canonical, model_required=False)
    except InvalidRequest as err:
        name = _GEMINI_NAMES.get(err.param or "")
        if name is None:
            raise
        raise InvalidRequest(err.message.replace(f"'{err.param}'", f"'{name}'"), param=name) from None


def _count_tokens(body: dict[str, Any], model: str) -> TokenCount:
    """``countTokens``: the local estimate, and the request as a chat for a better count (none when
    the body does not read as one: the estimate is answered then)."""
    inner = body.get("generateContentRequest")
    inner = inner if isinstance(inner, dict) else body
    try:
        canonical: dict[str, Any] | None = to_canonical(inner, model, stream=False)
    except InvalidRequest:
        canonical = None
    return TokenCount(
        model,
        {"totalTokens": estimate_tokens(body)},
        canonical=canonical,
        native=inner,
        count_key="totalTokens",
    )


async def read_model_method(body: dict[str, Any], call: Call) -> Inbound | TokenCount:
    """One request on a :data:`PATH` route: ``countTokens`` → ``{"totalTokens": N}`` (the upstream's
    count, a tokenizer's or the local estimate: :mod:`omniroute.wire.count_tokens`);
    ``generateContent`` / ``streamGenerateContent`` → the canonical request (validated like an OpenAI
    one), the client's body kept for Gemini upstreams (same-format pass-through)."""
    m = PATH.match(call.path)
    model, method = (m.group(1), m.group(2)) if m else ("", "")
    if not model:
        raise InvalidRequest("The model is missing from the URL.", param="model")
    if method == "countTokens":
        return _count_tokens(body, call.headers.get("x-route-model") or model)
    stream = method == "streamGenerateContent"
    canonical = to_canonical(body, model, stream=stream)
    _validate_canonical(canonical)
    if stream and call.query.get("alt", "").lower() != "sse":  # Google's streamed JSON array
        return Inbound(canonical, ARRAY_SURFACE, native=body, stream_content_type=JSON_ARRAY_CONTENT_TYPE)
    return Inbound(canonical, SURFACE, native=body)
