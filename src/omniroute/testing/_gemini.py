"""Google Gemini ``generateContent`` shapes for the fake provider (pure: no I/O).

Shapes follow the Gemini API reference: ``GenerateContentResponse`` with ``candidates[0].content.parts``
(``text``, ``thought: true`` reasoning parts, whole ``functionCall`` parts — Gemini never splits call
arguments), ``finishReason`` ``STOP`` / ``MAX_TOKENS`` and ``usageMetadata``; streaming
(``:streamGenerateContent?alt=sse``) sends one such object per ``data:`` line and simply closes; errors
are ``{"error": {code, message, status}}`` with the google.rpc status names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from omniroute.testing.faults import (
    Event,
    Finish,
    Prompt,
    Reply,
    count_words,
    positive_int,
    signature_for,
    strings_of,
    text_of,
    tool_result_after,
    turn_texts,
)

_FINISH: dict[Finish, str] = {"stop": "STOP", "length": "MAX_TOKENS", "tool": "STOP"}
_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class GeminiRenderer:
    """Reads and writes the Gemini ``generateContent`` wire format."""

    def read(self, body: Mapping[str, Any], model: str, stream: bool) -> Prompt:
        contents = body.get("contents")
        contents = contents if isinstance(contents, list) else []
        texts = [text_of(_parts(body.get("systemInstruction")))]
        texts += [text_of(_parts(content)) for content in contents]
        last_user = next(
            (
                text_of(_parts(content))
                for content in reversed(contents)
                if isinstance(content, dict) and content.get("role", "user") == "user"
            ),
            "",
        )
        tools = body.get("tools")
        names = tuple(
            declaration["name"]
            for tool in (tools if isinstance(tools, list) else [])
            if isinstance(tool, dict) and isinstance(tool.get("functionDeclarations"), list)
            for declaration in tool["functionDeclarations"]
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str)
        )
        config = body.get("generationConfig")
        return Prompt(
            model=model,
            words=max(1, sum(count_words(text) for text in texts)),
            last_user_text=last_user,
            tool_names=names,
            stream=stream,
            max_tokens=positive_int(config.get("maxOutputTokens")) if isinstance(config, dict) else None,
            tool_result=tool_result_after(contents, "model", _function_responses),
            prefill=_turns(contents)[0],
            cut_text=_turns(contents)[1],
        )

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        name = _STATUSES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
        return {"error": {"code": status, "message": message, "status": name}}

    def context_error(self, limit: int, tokens: int) -> dict[str, Any]:
        return self.error_body(
            400,
            f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit}).",
        )

    def error_event(self, message: str) -> Event:
        return Event(self.error_body(503, message))

    def completion(self, reply: Reply) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if reply.reasoning:
            parts.append({"text": reply.reasoning, "thought": True})
        if reply.text:
            parts.append({"text": reply.text})
        parts += _calls(reply)
        return _response(reply, parts, finish=_FINISH[reply.finish], usage=reply.usage != "missing")

    def stream(self, reply: Reply) -> list[Event]:
        chunks: list[list[dict[str, Any]]] = []
        if reply.reasoning:
            chunks.append([{"text": reply.reasoning, "thought": True}])
        chunks += [[{"text": piece}] for piece in reply.text_chunks()]
        if calls := _calls(reply):
            if reply.text:  # text-and-tool: the calls ride in the last text chunk
                chunks[-1] += calls
            else:
                chunks.append(calls)
        events = [
            Event(_response(reply, parts, usage=number == 0 and reply.usage == "early"), content=True)
            for number, parts in enumerate(chunks)
        ]
        final = _response(reply, [{"text": ""}], finish=_FINISH[reply.finish], usage=reply.usage == "late")
        events.append(Event(final))
        return events


def _parts(content: object) -> object:
    return content.get("parts") if isinstance(content, dict) else None


def _function_responses(content: object) -> str | None:
    """The text of a content's ``functionResponse`` parts, ``None`` when it has none."""
    parts = _parts(content)
    found = [
        strings_of(part["functionResponse"].get("response"))
        for part in (parts if isinstance(parts, list) else [])
        if isinstance(part, dict) and isinstance(part.get("functionResponse"), dict)
    ]
    return " ".join(found) if found else None


def _calls(reply: Reply) -> list[dict[str, Any]]:
    """The ``functionCall`` parts; with ``signed_calls`` the first carries a ``thoughtSignature``, as
    Gemini 3 returns it (signed over the call, see :func:`call_signature`)."""
    parts: list[dict[str, Any]] = [
        {"functionCall": {"name": call.name, "args": json.loads(call.arguments)}} for call in reply.tool_calls
    ]
    if parts and reply.signed_calls:
        parts[0]["thoughtSignature"] = call_signature(parts[0]["functionCall"])
    return parts


def call_signature(call: Mapping[str, Any]) -> str:
    """The ``thoughtSignature`` the fake issues for a ``functionCall`` (name and args, key order and
    spacing ignored), so a strict fake can check that a replayed signature belongs to its call."""
    args = json.dumps(call.get("args"), sort_keys=True, separators=(",", ":"))
    return signature_for(f"{call.get('name')}:{args}")


def _response(
    reply: Reply, parts: list[dict[str, Any]], *, finish: str | None = None, usage: bool = False
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate]}
    if usage:
        # Gemini counts thoughts apart from candidates; the total includes both.
        thoughts = count_words(reply.reasoning)
        body["usageMetadata"] = {
            "promptTokenCount": reply.prompt_tokens,
            "candidatesTokenCount": reply.completion_tokens - thoughts,
            "totalTokenCount": reply.total_tokens,
        }
        if thoughts:
            body["usageMetadata"]["thoughtsTokenCount"] = thoughts
        if reply.cache_read:
            body["usageMetadata"]["cachedContentTokenCount"] = reply.cache_read
    body["modelVersion"] = reply.model
    body["responseId"] = reply.id
    return body


def _turns(contents: list[Any]) -> tuple[str | None, str | None]:
    """``prefill`` and ``cut_text`` of the conversation (`omniroute.testing.faults.turn_texts`);
    Gemini's ``model`` role is the assistant's."""
    return turn_texts(
        contents,
        lambda c: ("assistant" if c.get("role") == "model" else "user") if isinstance(c, dict) else None,
        lambda c: text_of(_parts(c)),
    )
