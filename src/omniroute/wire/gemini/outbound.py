"""Canonical response/stream → Gemini ``GenerateContentResponse`` objects and SSE (PROV-1, API-6, RESIL-9).

Shapes (https://ai.google.dev/api/generate-content#generatecontentresponse): ``candidates[0].content``
(role ``model``; parts ``{text}``, ``{text, thought: true}``, ``{functionCall: {id, name, args}}``),
``finishReason`` (``STOP | MAX_TOKENS | SAFETY | OTHER``), ``usageMetadata`` (``promptTokenCount``,
``candidatesTokenCount``, ``thoughtsTokenCount``, ``cachedContentTokenCount``, ``totalTokenCount``),
``modelVersion``, ``responseId``. Streams are ``data: <GenerateContentResponse>`` events: text and
thoughts as they arrive, function calls whole (Gemini never splits arguments) in the final event
together with ``finishReason`` and ``usageMetadata``. Errors are ``{"error": {code, message, status}}``;
after commit the stream ends with such an error event and no ``finishReason``.
"""

from __future__ import annotations

from typing import Any

from omniroute.errors import GatewayError
from omniroute.values import ChatRequest, Usage
from omniroute.wire._common import (
    NATIVE,
    SIG_SEP,
    loads_object,
    new_id,
    reasoning_text,
    signature_of,
    sse,
    usage_numbers,
)
from omniroute.wire.reasoning import anthropic_blocks, encrypted_content, merge_thinking_delta

FINISH_REASONS: dict[str, str] = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "function_call": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}
"""Canonical ``finish_reason`` → Gemini ``finishReason`` (anything else → ``OTHER``)."""

STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    402: "FAILED_PRECONDITION",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
"""HTTP status → google.rpc status name."""


def error_body(err: GatewayError) -> dict[str, Any]:
    """``{"error": {"code", "message", "status"}}`` (+ top-level extras such as RESIL-7 diagnostics)."""
    status = STATUS_NAMES.get(err.status, "INTERNAL" if err.status >= 500 else "INVALID_ARGUMENT")
    return {"error": {"code": err.status, "message": err.message, "status": status}, **err.extra}


def usage_metadata(prompt: int, completion: int, cached: int, reasoning: int = 0) -> dict[str, int]:
    """Canonical counts → ``usageMetadata`` (``candidatesTokenCount`` excludes thoughts)."""
    out = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": max(completion - reasoning, 0),
        "totalTokenCount": prompt + completion,
    }
    if reasoning:
        out["thoughtsTokenCount"] = reasoning
    if cached:
        out["cachedContentTokenCount"] = cached
    return out


def call_part(tool_call_id: str, name: str, arguments: Any, *, with_id: bool = True) -> dict[str, Any]:
    """A canonical tool call → a ``functionCall`` part (``args`` parsed from the JSON ``arguments``);
    a thought signature carried in the id goes back to ``thoughtSignature``. ``with_id``: the call
    carries its id (responses to Gemini clients; requests to Gemini upstreams leave it out)."""
    call: dict[str, Any] = {"id": tool_call_id.partition(SIG_SEP)[0]} if with_id else {}
    call["name"] = name
    call["args"] = loads_object(arguments)
    part: dict[str, Any] = {"functionCall": call}
    sig = signature_of(tool_call_id)
    if sig:
        part["thoughtSignature"] = sig
    return part


def seal_thinking(parts: list[dict[str, Any]], blocks: Any) -> list[dict[str, Any]]:
    """``parts`` with another family's replayable thinking ``blocks`` sealed into the first
    ``functionCall`` part's ``thoughtSignature`` (Gemini clients send call signatures back unchanged;
    the gateway unseals it on the next turn: :mod:`omniroute.wire.reasoning`). A part that already
    carries a Gemini signature keeps it."""
    sealed = encrypted_content(anthropic_blocks(blocks or ()))
    first = next((p for p in parts if "functionCall" in p), None)
    if sealed is not None and first is not None and "thoughtSignature" not in first:
        first["thoughtSignature"] = sealed
    return parts


def finish_reason(finish: Any) -> str:
    return FINISH_REASONS.get(str(finish), "OTHER") if finish else "STOP"


def render_response(resp: dict[str, Any]) -> dict[str, Any]:
    """Canonical ``chat.completion`` → ``GenerateContentResponse`` (one candidate per choice)."""
    candidates = []
    for i, choice in enumerate(resp.get("choices") or ()):
        msg = choice.get("message") or {}
        parts: list[dict[str, Any]] = []
        reasoning = reasoning_text(msg)
        if reasoning:
            parts.append({"text": reasoning, "thought": True})
        content = msg.get("content")
        if isinstance(content, str) and content:
            parts.append({"text": content})
        elif isinstance(content, list):
            parts += [
                {"text": p.get("text") or ""}
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            ]
        for tc in msg.get("tool_calls") or ():
            fn = tc.get("function") or {}
            parts.append(
                call_part(str(tc.get("id") or new_id("call_")), fn.get("name") or "", fn.get("arguments"))
            )
        seal_thinking(parts, msg.get("thinking_blocks"))
        candidates.append(
            {
                "content": {"role": "model", "parts": parts or [{"text": ""}]},
                "finishReason": finish_reason(choice.get("finish_reason")),
                "index": choice.get("index", i),
            }
        )
    usage = resp.get("usage") or {}
    reasoning_tokens = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    return {
        "candidates": candidates,
        "usageMetadata": usage_metadata(*usage_numbers(usage), reasoning_tokens),
        "modelVersion": resp.get("model") or "",
        "responseId": str(resp.get("id") or new_id("")),
    }


GEMINI_KEEPALIVE = b"\n"


class GeminiStreamEncoder:
    """Canonical chunks → Gemini SSE events. Text and thoughts stream as they come; tool-call deltas are
    assembled and sent whole with the finish reason and usage in the final event (from :meth:`end`).
    Pass-through chunks (:data:`NATIVE`) are forwarded unchanged."""

    __slots__ = ("blocks", "calls", "finish", "id", "model", "native")

    def __init__(self, model: str = "") -> None:
        self.blocks: list[dict[str, Any]] = []
        self.model = model
        self.id = ""
        self.native = False
        self.calls: dict[int, dict[str, str]] = {}
        self.finish: str | None = None

    def keepalive(self) -> bytes:
        """Bytes that keep a stream alive before its first content: a blank line, which SSE parsers
        ignore. Not an SSE comment: the google-genai JS SDK (Gemini CLI) matches ``^\\s*data: `` at the
        start of its buffer, so any other line stalls it and the stream ends in "Incomplete JSON
        segment at the end"; leading whitespace it skips."""
        return GEMINI_KEEPALIVE

    def start(self) -> bytes:
        return b""

    def _event(
        self,
        parts: list[dict[str, Any]] | None,
        finish: str | None = None,
        usage: dict[str, int] | None = None,
    ) -> bytes:
        cand: dict[str, Any] = {"index": 0}
        if parts:
            cand["content"] = {"role": "model", "parts": parts}
        if finish is not None:
            cand["finishReason"] = finish
        obj: dict[str, Any] = {"candidates": [cand], "modelVersion": self.model, "responseId": self.id}
        if usage is not None:
            obj["usageMetadata"] = usage
        return sse(None, obj)

    def chunk(self, ch: dict[str, Any]) -> bytes:
        native = ch.get(NATIVE)
        if native is not None:
            self.native = True
            return bytes(native)
        self.id = self.id or str(ch.get("id") or new_id(""))
        self.model = ch.get("model") or self.model
        parts: list[dict[str, Any]] = []
        for c in ch.get("choices") or ():
            if c.get("index", 0) != 0:
                continue
            d = c.get("delta") or {}
            reasoning = reasoning_text(d)
            if reasoning:
                parts.append({"text": reasoning, "thought": True})
            if d.get("content"):
                parts.append({"text": d["content"]})
            merge_thinking_delta(self.blocks, d)
            for pos, tc in enumerate(d.get("tool_calls") or ()):
                call = self.calls.setdefault(tc.get("index", pos), {"id": "", "name": "", "arguments": ""})
                fn = tc.get("function") or {}
                call["id"] = call["id"] or str(tc.get("id") or "")
                call["name"] = call["name"] or str(fn.get("name") or "")
                call["arguments"] += str(fn.get("arguments") or "")
            if c.get("finish_reason"):
                self.finish = c["finish_reason"]
        return self._event(parts) if parts else b""

    def end(self, usage: Usage | None) -> bytes:
        if self.native:
            return b""
        parts = [
            call_part(c["id"] or new_id("call_"), c["name"], c["arguments"])
            for _, c in sorted(self.calls.items())
        ]
        seal_thinking(parts, self.blocks)
        u = usage or Usage()
        return self._event(
            parts,
            finish_reason(self.finish),
            usage_metadata(u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.reasoning_tokens),
        )

    def error(self, err: GatewayError) -> bytes:
        return sse(None, error_body(err))


class GeminiSurface:
    """The Gemini ``generateContent`` wire format as a client surface."""

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return error_body(err)

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]:
        return render_response(response)

    def encoder(self, req: ChatRequest) -> GeminiStreamEncoder:
        return GeminiStreamEncoder(req.model)


SURFACE = GeminiSurface()
