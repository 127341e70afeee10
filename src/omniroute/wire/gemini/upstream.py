"""The Google Gemini adapter (PROV-1, DESIGN house style 3):
``POST {base_url}/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``, key in
``x-goog-api-key``.

Pure: no I/O, no globals, no retries. Builds ``GenerateContentRequest`` bodies from the canonical
(OpenAI chat) body — or, for a Gemini client, sends the client's own body unchanged (same-format
pass-through; the model is in the URL) — and parses ``GenerateContentResponse`` objects and their
SSE stream into canonical ``chat.completion`` / ``chat.completion.chunk`` objects. Errors
(``{"error": {code, message, status}}``: ``RESOURCE_EXHAUSTED`` → RateLimited, ``UNAVAILABLE`` →
Overloaded, …) go through :func:`~omniroute.resilience.classify.classify_http`.

Shapes follow the Gemini API reference (https://ai.google.dev/api/generate-content): roles ``user``
and ``model``; ``systemInstruction``; ``functionCall`` parts arrive whole (never split) and get
generated tool-call ids; tool results are ``functionResponse`` parts in a user turn; ``thought: true``
parts are reasoning; ``finishReason`` ``STOP | MAX_TOKENS | SAFETY | RECITATION | …``;
``usageMetadata.promptTokenCount`` includes ``cachedContentTokenCount``. A function call's
``thoughtSignature`` (which Gemini requires back on the next turn) is carried inside the tool-call id
after :data:`~omniroute.wire._common.SIG_SEP`, so it survives a round trip through any client format.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from typing import Any

import orjson

from omniroute.core.egress import path_segment
from omniroute.errors import InvalidRequest, MalformedEvent, StreamBroken, UpstreamError
from omniroute.providers.upstream import UpstreamRequest
from omniroute.resilience.classify import classify_http, error_from_payload
from omniroute.values import Candidate, ChatRequest
from omniroute.wire._common import (
    EFFORT_BUDGETS,
    NATIVE,
    auth_headers,
    base_url_for,
    call_id,
    chunk,
    clamp_output_tokens,
    dumps,
    loads_object,
    mid_conversation_system,
    new_id,
    now_s,
    parse_data_url,
    sse_frame,
    text_of,
    usage_dict,
)
from omniroute.wire.gemini.outbound import call_part
from omniroute.wire.reasoning import GEMINI_SKIP_SIGNATURE, SEAL_PREFIX

FINISH_REASONS: dict[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "LANGUAGE": "content_filter",
}
"""Gemini ``finishReason`` → canonical ``finish_reason`` (anything else → ``stop``)."""

_SCHEMA_KEYS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
_SCHEMA_FORMATS = frozenset({"enum", "date-time", "int32", "int64", "float", "double"})
_TOOL_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def generate_url(base_url: str, model: str, *, stream: bool) -> str:
    """``{base}/models/{model}:generateContent`` or ``:streamGenerateContent?alt=sse``; a base without
    an API version gets ``/v1beta``. The model id is checked and percent-encoded
    (:func:`omniroute.core.egress.path_segment`), so it can never reach another path on the
    provider; an id that does not match is an :class:`~omniroute.errors.InvalidRequest` naming ``model``.
    """
    base = base_url.rstrip("/")
    if not base.rsplit("/", 1)[-1].startswith("v1"):
        base += "/v1beta"
    try:
        model = path_segment(model.removeprefix("models/"))
    except ValueError as exc:
        raise InvalidRequest(str(exc), param="model") from None
    return (
        f"{base}/models/{model}:streamGenerateContent?alt=sse"
        if stream
        else f"{base}/models/{model}:generateContent"
    )


# -- canonical → Gemini request --------------------------------------------------------------------


def gemini_schema(schema: Any) -> Any:
    """JSON Schema → the OpenAPI subset Gemini's ``parameters``/``responseSchema`` accept: unknown
    keywords dropped, ``type: [t, "null"]`` → ``type: t`` + ``nullable``."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _SCHEMA_KEYS:
            continue
        if key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            if len(types) < len(value):
                out["nullable"] = True
            value = types[0] if types else "string"
        elif key == "format" and value not in _SCHEMA_FORMATS:
            continue
        elif key == "properties" and isinstance(value, dict):
            value = {name: gemini_schema(p) for name, p in value.items()}
        elif key == "items":
            value = gemini_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            value = [gemini_schema(v) for v in value]
        out[key] = value
    return out


def _media_part(url: str) -> dict[str, Any]:
    data = parse_data_url(url)
    if data is not None:
        return {"inlineData": {"mimeType": data[0], "data": data[1]}}
    mime = mimetypes.guess_type(url.split("?", 1)[0])[0] or "image/jpeg"
    return {"fileData": {"mimeType": mime, "fileUri": url}}


def content_parts(content: Any) -> list[dict[str, Any]]:
    """OpenAI content (string or text/image_url/file parts) → Gemini parts."""
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for p in content if isinstance(content, list) else ():
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind == "text" and p.get("text"):
            parts.append({"text": str(p["text"])})
        elif kind == "image_url":
            img = p.get("image_url")
            url = img.get("url") if isinstance(img, dict) else img
            if isinstance(url, str) and url:
                parts.append(_media_part(url))
        elif kind == "file" and isinstance(p.get("file"), dict) and p["file"].get("file_data"):
            parts.append(_media_part(str(p["file"]["file_data"])))
    return parts


def _response_object(content: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else text_of(content)
    obj = loads_object(text)
    return obj if obj else {"output": text}


def to_gemini_contents(messages: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Canonical messages → ``(contents, system parts)``; consecutive turns of one role are merged
    (parallel function responses must share one turn)."""
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    for m in messages if isinstance(messages, list) else ():
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role in ("system", "developer"):
            if contents:  # mid-conversation: a user turn at its place (Gemini has one systemInstruction)
                add("user", [{"text": mid_conversation_system(m.get("content"))}])
            else:
                system += content_parts(m.get("content"))
        elif role == "user":
            add("user", content_parts(m.get("content")))
        elif role == "assistant":
            parts = content_parts(m.get("content"))
            calls = []
            for tc in m.get("tool_calls") or ():
                fn = tc.get("function") or {}
                names[str(tc.get("id"))] = str(fn.get("name") or "")
                calls.append(
                    call_part(
                        str(tc.get("id") or ""), fn.get("name") or "", fn.get("arguments"), with_id=False
                    )
                )
            if calls and not any("thoughtSignature" in c for c in calls):
                # calls another family made: Gemini's documented stand-in signature (thought-signatures FAQ)
                calls[0]["thoughtSignature"] = GEMINI_SKIP_SIGNATURE
            add("model", parts + calls)
        elif role in ("tool", "function"):
            name = names.get(str(m.get("tool_call_id")), str(m.get("name") or ""))
            add(
                "user", [{"functionResponse": {"name": name, "response": _response_object(m.get("content"))}}]
            )
    return contents, system


def _tools(body: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    decls = []
    for t in body.get("tools") or ():
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not fn.get("name"):
            continue
        decl: dict[str, Any] = {"name": fn["name"]}
        if fn.get("description"):
            decl["description"] = fn["description"]
        params = fn.get("parameters")
        if isinstance(params, dict) and params.get("properties"):
            decl["parameters"] = gemini_schema(params)
        decls.append(decl)
    if not decls:
        return out
    out["tools"] = [{"functionDeclarations": decls}]
    choice = body.get("tool_choice")
    cfg: dict[str, Any] | None = None
    if isinstance(choice, str) and choice in _TOOL_MODES:
        cfg = {"mode": _TOOL_MODES[choice]}
    elif isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        cfg = {"mode": "ANY", "allowedFunctionNames": [name]} if name else None
    if cfg is not None:
        out["toolConfig"] = {"functionCallingConfig": cfg}
    return out


def _generation_config(body: Mapping[str, Any]) -> dict[str, Any]:
    cfg: dict[str, Any] = {}
    for src, dst in (
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("n", "candidateCount"),
        ("seed", "seed"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
    ):
        if body.get(src) is not None:
            cfg[dst] = body[src]
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_tokens:
        cfg["maxOutputTokens"] = max_tokens
    stop = body.get("stop")
    if stop:
        cfg["stopSequences"] = [stop] if isinstance(stop, str) else list(stop)
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") in ("json_object", "json_schema"):
        cfg["responseMimeType"] = "application/json"
        schema = (rf.get("json_schema") or {}).get("schema")
        if isinstance(schema, dict):
            cfg["responseSchema"] = gemini_schema(schema)
    effort = body.get("reasoning_effort")
    if effort == "none":
        cfg["thinkingConfig"] = {"thinkingBudget": 0}
    elif isinstance(effort, str) and effort in EFFORT_BUDGETS:
        cfg["thinkingConfig"] = {"thinkingBudget": EFFORT_BUDGETS[effort], "includeThoughts": True}
    return cfg


def to_gemini_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """Canonical chat body → Gemini ``GenerateContentRequest`` (the model goes in the URL).

    ``max_tokens``/``max_completion_tokens`` → ``maxOutputTokens``; ``stop`` → ``stopSequences``;
    ``tool_choice`` → ``toolConfig.functionCallingConfig.mode`` AUTO/NONE/ANY (+ allowed name);
    ``response_format`` → ``responseMimeType``/``responseSchema``; ``reasoning_effort`` →
    ``thinkingConfig``."""
    contents, system = to_gemini_contents(body.get("messages"))
    out: dict[str, Any] = {"contents": contents}
    if system:
        out["systemInstruction"] = {"parts": system}
    out.update(_tools(body))
    cfg = _generation_config(body)
    if cfg:
        out["generationConfig"] = cfg
    return out


# -- Gemini response → canonical -------------------------------------------------------------------


def usage_from_gemini(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``usageMetadata`` → canonical usage (completion includes ``thoughtsTokenCount``)."""
    thoughts = int(meta.get("thoughtsTokenCount") or 0)
    return usage_dict(
        int(meta.get("promptTokenCount") or 0),
        int(meta.get("candidatesTokenCount") or 0) + thoughts,
        int(meta.get("cachedContentTokenCount") or 0),
        thoughts,
    )


def _read_parts(parts: Any, first_index: int) -> tuple[str, str, list[dict[str, Any]]]:
    """Parts → ``(text, reasoning, tool-call deltas)``; calls are numbered from ``first_index``."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for p in parts if isinstance(parts, list) else ():
        if not isinstance(p, dict):
            continue
        if isinstance(p.get("functionCall"), dict):
            fc = p["functionCall"]
            calls.append(
                {
                    "index": first_index + len(calls),
                    "id": call_id(p.get("thoughtSignature")),
                    "type": "function",
                    "function": {"name": fc.get("name") or "", "arguments": dumps(fc.get("args") or {})},
                }
            )
        elif isinstance(p.get("text"), str):
            (reasoning if p.get("thought") else text).append(p["text"])
    return "".join(text), "".join(reasoning), calls


def _finish(reason: Any, has_calls: bool) -> str | None:
    if not reason:
        return None
    finish = FINISH_REASONS.get(str(reason), "stop")
    return "tool_calls" if finish == "stop" and has_calls else finish


def response_to_canonical(obj: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A ``GenerateContentResponse`` → canonical ``chat.completion`` (a prompt blocked by
    ``promptFeedback.blockReason`` → empty answer with ``content_filter``)."""
    choices: list[dict[str, Any]] = []
    for i, cand in enumerate(obj.get("candidates") or ()):
        text, reasoning, calls = _read_parts((cand.get("content") or {}).get("parts"), 0)
        message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
        if calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
        if reasoning:
            message["reasoning_content"] = reasoning
        choices.append(
            {
                "index": cand.get("index", i),
                "message": message,
                "logprobs": None,
                "finish_reason": _finish(cand.get("finishReason") or "STOP", bool(calls)),
            }
        )
    if not choices:
        blocked = (obj.get("promptFeedback") or {}).get("blockReason")
        choices.append(
            {
                "index": 0,
                "message": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": "content_filter" if blocked else "stop",
            }
        )
    out: dict[str, Any] = {
        "id": obj.get("responseId") or new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": now_s(),
        "model": obj.get("modelVersion") or model,
        "choices": choices,
    }
    if isinstance(obj.get("usageMetadata"), dict):
        out["usage"] = usage_from_gemini(obj["usageMetadata"])
    return out


class GeminiStreamParser:
    """Parses ``streamGenerateContent?alt=sse`` events (each a ``GenerateContentResponse``) into one
    canonical chunk per event: text → ``content``, thought parts → ``reasoning_content``, each whole
    ``functionCall`` → one ``tool_calls`` delta with ``index``, generated ``id``, ``type``, name and the
    complete arguments; ``finishReason`` → ``finish_reason``; ``usageMetadata`` → ``usage``. An
    ``{"error": …}`` event raises the classified error; malformed JSON raises MalformedEvent. Gemini
    streams have no terminator (``done`` stays False; the stream simply closes).
    """

    __slots__ = ("created", "done", "id", "model", "native", "ntools", "provider", "started")

    def __init__(self, provider: str, model: str, *, native: bool = False) -> None:
        self.done = False
        self.provider = provider
        self.model = model
        self.native = native
        self.id = new_id("chatcmpl-")
        self.created = now_s()
        self.ntools: dict[int, int] = {}
        self.started = False

    def feed(self, event: str, data: bytes) -> list[dict[str, Any]]:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise MalformedEvent(
                f"{self.provider}: malformed stream event (not JSON): {data[:80]!r}", provider=self.provider
            ) from None
        if isinstance(obj, list) and len(obj) == 1:
            obj = obj[0]
        if not isinstance(obj, dict):
            raise MalformedEvent(
                f"{self.provider}: malformed stream event (not an object)", provider=self.provider
            )
        if "error" in obj and not obj.get("candidates"):
            raise error_from_payload(obj, provider=self.provider, in_stream=True)
        out = self._handle(obj)
        if self.native:
            out = out if out is not None else chunk(self.id, self.model, self.created)
            out[NATIVE] = sse_frame(event, data)
        return [out] if out is not None else []

    def finish(self) -> list[dict[str, Any]]:
        return []

    def _handle(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        if obj.get("modelVersion"):
            self.model = obj["modelVersion"]
        choices: list[dict[str, Any]] = []
        for i, cand in enumerate(obj.get("candidates") or ()):
            if not isinstance(cand, dict):
                continue
            idx = int(cand.get("index", i) or 0)
            seen = self.ntools.get(idx, 0)
            text, reasoning, calls = _read_parts((cand.get("content") or {}).get("parts"), seen)
            self.ntools[idx] = seen + len(calls)
            delta: dict[str, Any] = {}
            if not self.started:
                delta["role"] = "assistant"
            if text:
                delta["content"] = text
            if reasoning:
                delta["reasoning_content"] = reasoning
            if calls:
                delta["tool_calls"] = calls
            finish = _finish(cand.get("finishReason"), bool(self.ntools[idx]))
            if delta or finish:
                choices.append({"index": idx, "delta": delta, "finish_reason": finish})
        usage = (
            usage_from_gemini(obj["usageMetadata"]) if isinstance(obj.get("usageMetadata"), dict) else None
        )
        if not choices and usage is None:
            return None
        if not choices and not self.started:
            choices.append({"index": 0, "delta": {"role": "assistant"}, "finish_reason": None})
        self.started = True
        out = chunk(self.id, self.model, self.created, usage=usage)
        out["choices"] = choices
        return out


def _native_part(part: Any) -> Any:
    sig = part.get("thoughtSignature") if isinstance(part, dict) else None
    if isinstance(sig, str) and sig.startswith(SEAL_PREFIX):
        return {**part, "thoughtSignature": GEMINI_SKIP_SIGNATURE}
    return part


def native_for_gemini(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Gemini client's own body as Gemini accepts it: a call signature the gateway sealed (another
    family's reasoning, :mod:`omniroute.wire.reasoning`) becomes Gemini's documented stand-in, which
    Gemini accepts for calls it did not make ("Corrupted thought signature" otherwise). A shallow
    copy; contents are copied only where a signature changed."""
    out = dict(body)
    contents = body.get("contents")
    if isinstance(contents, list):
        fixed = []
        for c in contents:
            parts = c.get("parts") if isinstance(c, dict) else None
            if isinstance(parts, list):
                new = [_native_part(p) for p in parts]
                if any(a is not b for a, b in zip(new, parts, strict=True)):
                    c = {**c, "parts": new}
            fixed.append(c)
        out["contents"] = fixed
    return out


class GeminiAdapter:
    """Adapter for the Gemini ``generateContent`` wire format."""

    def build_request(self, cand: Candidate, req: ChatRequest, *, stream: bool) -> UpstreamRequest:
        if req.client_format == "gemini" and req.native is not None:
            body: dict[str, Any] = native_for_gemini(req.native)
        else:
            body = to_gemini_request(req.body)
        cfg = body.get("generationConfig")
        if isinstance(cfg, dict) and isinstance(cfg.get("maxOutputTokens"), int):
            clamped = clamp_output_tokens(cfg["maxOutputTokens"], cand.model)
            if clamped != cfg["maxOutputTokens"]:
                body["generationConfig"] = {**cfg, "maxOutputTokens": clamped}
        headers = {"Content-Type": "application/json", **auth_headers(cand, "x-goog-api-key")}
        url = generate_url(base_url_for(cand), cand.model.id, stream=stream)
        return UpstreamRequest(url, headers, orjson.dumps(body))

    def parse_response(self, body: bytes, cand: Candidate) -> dict[str, Any]:
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise StreamBroken(
                f"{cand.provider.id}: response body is not JSON: {body[:80]!r}", provider=cand.provider.id
            ) from None
        if not isinstance(obj, dict):
            raise StreamBroken(
                f"{cand.provider.id}: response is not a Gemini response", provider=cand.provider.id
            )
        if "error" in obj and not obj.get("candidates"):
            raise error_from_payload(obj, provider=cand.provider.id, in_stream=False)
        return response_to_canonical(obj, cand.model.id)

    def stream_parser(self, cand: Candidate, req: ChatRequest) -> GeminiStreamParser:
        native = req.client_format == "gemini" and req.native is not None
        return GeminiStreamParser(cand.provider.id, cand.model.id, native=native)

    def classify_error(
        self, status: int, headers: Mapping[str, str], body: bytes, cand: Candidate, *, now: float
    ) -> UpstreamError:
        return classify_http(status, headers, body, provider=cand.provider.id, now=now)
