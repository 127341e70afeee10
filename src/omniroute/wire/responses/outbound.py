"""Canonical response/stream → OpenAI Responses API objects and events (API-4, RESIL-9).

Response object (https://platform.openai.com/docs/api-reference/responses/object): ``output`` items
in order — ``reasoning`` (``content: [{type: reasoning_text}]``), ``message`` (one ``output_text``
part) and one ``function_call`` item per tool call (``call_id`` = the canonical tool-call id; a
call of a custom tool is a ``custom_tool_call`` item whose ``input`` is the call's ``{"input": ...}``
argument) —
``status`` ``completed`` or ``incomplete`` (``max_output_tokens`` / ``content_filter``) and ``usage``
``{input_tokens, input_tokens_details.cached_tokens, output_tokens, output_tokens_details, total}``.

Stream (…/responses-streaming): ``response.created``, ``response.in_progress``; per item
``response.output_item.added`` → (``response.content_part.added`` → ``response.output_text.delta``… →
``response.output_text.done`` → ``response.content_part.done`` | ``response.function_call_arguments.delta``…
→ ``response.function_call_arguments.done`` | one ``response.custom_tool_call_input.delta`` →
``response.custom_tool_call_input.done`` | ``response.reasoning_text.delta``… →
``response.reasoning_text.done``) → ``response.output_item.done``; finally ``response.completed`` (or
``response.incomplete``) with the full response and usage. Every event has ``sequence_number``. A
failure after commit sends ``error`` and ``response.failed`` instead of ``response.completed``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from omniroute.errors import GatewayError, InvalidRequest
from omniroute.values import ChatRequest, Usage
from omniroute.wire._common import SSE_COMMENT, new_id, reasoning_text, sse, text_of
from omniroute.wire.base import ResponseStore
from omniroute.wire.openai.outbound import openai_error
from omniroute.wire.reasoning import encrypted_content, merge_thinking_delta

log = logging.getLogger("omniroute.api")

RESPONSE_TTL_S = 30 * 24 * 3600.0
"""How long a stored response stays readable by ``previous_response_id`` (OpenAI keeps 30 days)."""

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _tool_list(tools: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(tools, list):
        raise InvalidRequest(f"'{where}' must be an array.", param=where)
    for i, t in enumerate(tools):
        here = f"{where}[{i}]"
        if not isinstance(t, dict):
            raise InvalidRequest(f"'{here}' must be an object.", param=here)
        if t.get("type") == "namespace":
            yield from _tool_list(t.get("tools") or [], f"{here}.tools")
        elif t.get("type") in ("function", "custom"):
            yield here, t
        # hosted tools (web_search, file_search …) are not served by chat upstreams


def declared_tools(body: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every ``function`` and ``custom`` tool a Responses body declares, as ``(field path, tool)``:
    those of ``tools`` and of ``additional_tools`` input items (how Codex CLI delivers its tools),
    namespaces (``{type: namespace, name, tools}``) flattened; raises :class:`InvalidRequest` when a
    tool list is not an array of objects."""
    if body.get("tools") is not None:
        yield from _tool_list(body["tools"], "tools")
    items = body.get("input")
    for i, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            yield from _tool_list(item.get("tools"), f"input[{i}].tools")


def custom_tool_names(body: Mapping[str, Any]) -> frozenset[str]:
    """Names of the custom tools a (validated) Responses body declares: their calls go back to the
    client as ``custom_tool_call`` items."""
    return frozenset(t["name"] for _, t in declared_tools(body) if t["type"] == "custom")


def custom_input(arguments: str) -> str:
    """A custom tool's free-form input from the arguments ``{"input": ...}`` of the function it was
    declared as upstream (the raw arguments when a model sent something else)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    value = parsed.get("input") if isinstance(parsed, dict) else None
    if isinstance(value, str):
        return value
    return arguments


def responses_usage(u: Usage) -> dict[str, Any]:
    """Canonical usage → a Responses ``usage`` object: ``input_tokens`` includes cache reads
    (``input_tokens_details.cached_tokens``) and writes (``cache_write_tokens``, of which
    ``cache_write_1h_tokens`` for one hour, as OpenRouter reports them), ``output_tokens`` includes
    ``output_tokens_details.reasoning_tokens``."""
    details: dict[str, int] = {"cached_tokens": u.cached_tokens, "cache_write_tokens": u.cache_write_tokens}
    if u.cache_write_1h_tokens:
        details["cache_write_1h_tokens"] = u.cache_write_1h_tokens
    return {
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": details,
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.total_tokens,
    }


def base_response(resp_id: str, created_at: int, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The response envelope echoing the request's settings (status ``in_progress``, no output)."""
    return {
        "id": resp_id,
        "object": "response",
        "created_at": created_at,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": [],
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": (body.get("reasoning") or {}).get("effort"), "summary": None},
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None,
        "user": body.get("user"),
        "metadata": body.get("metadata") or {},
    }


def _finish_status(resp: dict[str, Any], finish: Any) -> None:
    reason = _INCOMPLETE.get(str(finish))
    resp["status"] = "incomplete" if reason else "completed"
    resp["incomplete_details"] = {"reason": reason} if reason else None


def _message_item(text: str, status: str = "completed", item_id: str | None = None) -> dict[str, Any]:
    return {
        "id": item_id or new_id("msg_"),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _call_item(
    call_id: str,
    name: str,
    arguments: str,
    status: str = "completed",
    item_id: str | None = None,
    custom: bool = False,
) -> dict[str, Any]:
    if custom:
        return {
            "id": item_id or new_id("ctc_"),
            "type": "custom_tool_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "input": custom_input(arguments),
        }
    return {
        "id": item_id or new_id("fc_"),
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


ENCRYPTED_REASONING = "reasoning.encrypted_content"
"""The ``include`` value asking for reasoning items' ``encrypted_content`` (Responses API reference)."""


def wants_encrypted(body: Mapping[str, Any]) -> bool:
    """Whether the request's ``include`` asks for ``reasoning.encrypted_content``."""
    include = body.get("include")
    return isinstance(include, list) and ENCRYPTED_REASONING in include


def _reasoning_item(
    text: str, item_id: str | None = None, blocks: Any = None, encrypted: bool = False
) -> dict[str, Any]:
    """A ``reasoning`` output item; with ``encrypted`` and replayable ``blocks`` its
    ``encrypted_content`` carries them (:func:`~omniroute.wire.reasoning.encrypted_content`)."""
    item: dict[str, Any] = {
        "id": item_id or new_id("rs_"),
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": "completed",
    }
    sealed = encrypted_content(blocks) if encrypted else None
    if sealed is not None:
        item["encrypted_content"] = sealed
    return item


def render_response(
    resp: dict[str, Any], resp_id: str, created_at: int, body: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Canonical ``chat.completion`` → ``(Responses object, assistant message for the stored history)``."""
    out = base_response(resp_id, created_at, resp.get("model") or "", body)
    choice = (resp.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    reasoning = reasoning_text(msg)
    blocks = msg.get("thinking_blocks") or None
    if reasoning or blocks:
        out["output"].append(_reasoning_item(str(reasoning or ""), None, blocks, wants_encrypted(body)))
    text = text_of(msg.get("content"))
    if text:
        out["output"].append(_message_item(text))
    custom = custom_tool_names(body)
    for tc in msg.get("tool_calls") or []:
        fn = tc.get("function") or {}
        name = fn.get("name") or ""
        call_id = tc.get("id") or new_id("call_")
        out["output"].append(_call_item(call_id, name, fn.get("arguments") or "", custom=name in custom))
    _finish_status(out, choice.get("finish_reason"))
    out["usage"] = responses_usage(Usage.from_openai(resp.get("usage")) or Usage())
    return out, stored_assistant(out["output"], blocks)


def stored_assistant(output: list[dict[str, Any]], thinking_blocks: Any = None) -> dict[str, Any]:
    """This turn's canonical assistant message as kept for ``previous_response_id``, from the
    response's ``output`` items: the text of its message items, the reasoning text of its reasoning
    items, one tool call per ``function_call`` / ``custom_tool_call`` item (with the call id the
    client saw) and the turn's replayable ``thinking_blocks`` (whatever ``include`` asked: the stored
    conversation is the gateway's own)."""
    text = "".join(i["content"][0]["text"] for i in output if i["type"] == "message")
    reasoning = "".join(i["content"][0]["text"] for i in output if i["type"] == "reasoning")
    calls = [
        {
            "id": i["call_id"],
            "type": "function",
            "function": {
                "name": i["name"],
                "arguments": json.dumps({"input": i["input"]}) if "input" in i else i["arguments"],
            },
        }
        for i in output
        if i["type"] in ("function_call", "custom_tool_call")
    ]
    msg: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        msg["tool_calls"] = calls
    if reasoning:
        msg["reasoning_content"] = reasoning
    if thinking_blocks:
        msg["thinking_blocks"] = list(thinking_blocks)
    return msg


class ResponsesStreamEncoder:
    """Canonical chunks → Responses streaming events (stateful; one per response).

    ``on_done(assistant_message)`` is called from :meth:`end` with the canonical assistant message of
    this turn (for ``previous_response_id`` storage)."""

    def __init__(
        self,
        resp_id: str,
        created_at: int,
        body: Mapping[str, Any],
        model: str,
        on_done: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.resp_id = resp_id
        self.created_at = created_at
        self.body = body
        self.model = model
        self.on_done = on_done
        self.seq = 0
        self.started = False
        self.output: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None
        self.text = ""
        self.calls: dict[int, dict[str, Any]] = {}
        self.custom = custom_tool_names(body)
        self.custom_args: dict[str, str] = {}  # item id → the arguments ``{"input": ...}`` so far
        self.finish: str | None = None
        self.encrypted = wants_encrypted(body)
        self.blocks: list[dict[str, Any]] = []  # the turn's replayable thinking blocks
        self.item_blocks: list[dict[str, Any]] = []  # … of the open reasoning item

    def _ev(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, **fields, "sequence_number": self.seq}
        self.seq += 1
        return sse(kind, data)

    def _snapshot(self, status: str = "in_progress") -> dict[str, Any]:
        r = base_response(self.resp_id, self.created_at, self.model, self.body)
        r["status"] = status
        return r

    def keepalive(self) -> bytes:
        """Bytes that keep a stream alive before its first content: an SSE comment line."""
        return SSE_COMMENT

    def start(self) -> bytes:
        return b""

    def _start(self, ch: Mapping[str, Any]) -> bytes:
        self.started = True
        self.model = ch.get("model") or self.model
        return self._ev("response.created", response=self._snapshot()) + self._ev(
            "response.in_progress", response=self._snapshot()
        )

    def _close(self) -> bytes:
        item, self.open = self.open, None
        if item is None:
            return b""
        idx = self.output.index(item)
        out = b""
        if item["type"] == "message":
            part = {"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}
            item["content"] = [part]
            out += self._ev(
                "response.output_text.done",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                text=self.text,
                logprobs=[],
            )
            out += self._ev(
                "response.content_part.done", item_id=item["id"], output_index=idx, content_index=0, part=part
            )
        elif item["type"] == "reasoning":
            text = item["content"][0]["text"]
            sealed = encrypted_content(self.item_blocks) if self.encrypted else None
            if sealed is not None:
                item["encrypted_content"] = sealed
            out += self._ev(
                "response.reasoning_text.done",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                text=text,
            )
            out += self._ev(
                "response.content_part.done",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                part={"type": "reasoning_text", "text": text},
            )
        elif item["type"] == "custom_tool_call":
            # The input arrives as JSON fragments of {"input": ...}; it is sent whole once complete.
            item["input"] = custom_input(self.custom_args.pop(item["id"], ""))
            for kind, field in (("delta", "delta"), ("done", "input")):
                out += self._ev(
                    f"response.custom_tool_call_input.{kind}",
                    item_id=item["id"],
                    output_index=idx,
                    **{field: item["input"]},
                )
        else:
            out += self._ev(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=idx,
                arguments=item["arguments"],
                name=item["name"],
            )
        item["status"] = "completed"
        return out + self._ev("response.output_item.done", output_index=idx, item=item)

    def _open(self, item: dict[str, Any]) -> bytes:
        out = self._close()
        self.output.append(item)
        self.open = item
        idx = len(self.output) - 1
        out += self._ev(
            "response.output_item.added", output_index=idx, item={**item, "status": "in_progress"}
        )
        if item["type"] == "message":
            self.text = ""
            out += self._ev(
                "response.content_part.added",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
            )
        elif item["type"] == "reasoning":
            out += self._ev(
                "response.content_part.added",
                item_id=item["id"],
                output_index=idx,
                content_index=0,
                part={"type": "reasoning_text", "text": ""},
            )
        return out

    def chunk(self, ch: dict[str, Any]) -> bytes:
        out = b"" if self.started else self._start(ch)
        for c in ch.get("choices") or ():
            if c.get("index", 0) == 0:
                out += self._choice(c)
        return out

    def _open_reasoning(self) -> bytes:
        if self.open is not None and self.open["type"] == "reasoning":
            return b""
        out = self._open(
            {
                "id": new_id("rs_"),
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": ""}],
            }
        )
        self.item_blocks = []
        return out

    def _choice(self, c: dict[str, Any]) -> bytes:
        out = b""
        d = c.get("delta") or {}
        reasoning = reasoning_text(d)
        if reasoning or d.get("thinking_blocks"):
            out += self._open_reasoning()
            merge_thinking_delta(self.item_blocks, d)
            merge_thinking_delta(self.blocks, d)
        if reasoning:
            assert self.open is not None
            self.open["content"][0]["text"] += reasoning
            out += self._ev(
                "response.reasoning_text.delta",
                item_id=self.open["id"],
                output_index=len(self.output) - 1,
                content_index=0,
                delta=reasoning,
            )
        if d.get("content"):
            if self.open is None or self.open["type"] != "message":
                out += self._open(
                    {"id": new_id("msg_"), "type": "message", "role": "assistant", "content": []}
                )
            assert self.open is not None
            self.text += d["content"]
            out += self._ev(
                "response.output_text.delta",
                item_id=self.open["id"],
                output_index=len(self.output) - 1,
                content_index=0,
                delta=d["content"],
                logprobs=[],
            )
        for pos, tc in enumerate(d.get("tool_calls") or ()):
            ti = tc.get("index", pos)
            fn = tc.get("function") or {}
            if ti not in self.calls:
                name = fn.get("name") or ""
                item = _call_item(
                    tc.get("id") or new_id("call_"), name, "", "in_progress", custom=name in self.custom
                )
                out += self._open(item)
                self.calls[ti] = item
            item = self.calls[ti]
            if fn.get("arguments") and item["type"] == "custom_tool_call":
                self.custom_args[item["id"]] = self.custom_args.get(item["id"], "") + fn["arguments"]
            elif fn.get("arguments"):
                item["arguments"] += fn["arguments"]
                out += self._ev(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=self.output.index(item),
                    delta=fn["arguments"],
                )
        if c.get("finish_reason"):
            self.finish = c["finish_reason"]
        return out

    def end(self, usage: Usage | None) -> bytes:
        out = b"" if self.started else self._start({})
        out += self._close()
        final = self._snapshot()
        final["output"] = self.output
        _finish_status(final, self.finish)
        final["usage"] = responses_usage(usage or Usage())
        if self.on_done is not None:
            self.on_done(stored_assistant(self.output, self.blocks))
        kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
        return out + self._ev(kind, response=final)

    def error(self, err: GatewayError) -> bytes:
        out = b"" if self.started else self._start({})
        failed = self._snapshot("failed")
        failed["output"] = self.output
        failed["error"] = {"code": err.code, "message": err.message}
        return (
            out
            + self._ev("error", code=err.code, message=err.message, param=err.param)
            + self._ev("response.failed", response=failed)
        )


class ResponsesSurface:
    """The Responses wire format for one request: knows its response id and what to store.

    Unless ``store`` is false, the conversation of a successful response (input history + this
    turn's assistant message, without ``instructions``) is saved under its ``resp_…`` id for
    :data:`RESPONSE_TTL_S` seconds, readable only by the same API key, by :meth:`flush`, which the
    gateway awaits before the last byte reaches the client, so an immediate follow-up finds it.
    Errors use the OpenAI shape (API-6)."""

    def __init__(
        self,
        store: ResponseStore | None,
        body: dict[str, Any],
        conversation: list[dict[str, Any]],
        api_key_id: str | None,
        created_at: int,
    ) -> None:
        self.store = store
        self.body = body
        self.conversation = conversation
        self.api_key_id = api_key_id
        self.id = "resp_" + uuid.uuid4().hex
        self.created_at = created_at
        self.pending: dict[str, Any] | None = None

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return openai_error(err)

    def render(self, response: dict[str, Any], req: ChatRequest) -> dict[str, Any]:
        obj, assistant = render_response(response, self.id, self.created_at, self.body)
        self._remember(assistant, obj["model"])
        return obj

    def encoder(self, req: ChatRequest) -> ResponsesStreamEncoder:
        enc = ResponsesStreamEncoder(self.id, self.created_at, self.body, req.model)
        enc.on_done = lambda assistant: self._remember(assistant, enc.model)
        return enc

    def _remember(self, assistant: dict[str, Any], model: str) -> None:
        if self.body.get("store", True) is not False:
            self.pending = {"messages": [*self.conversation, assistant], "model": model}

    async def flush(self) -> None:
        """Save the pending conversation (once); a store failure is logged, never sent to the client."""
        data, self.pending = self.pending, None
        if data is None or self.store is None:
            return
        try:
            await self.store.save_response(self.id, self.api_key_id, data, RESPONSE_TTL_S)
        except Exception:
            log.exception("could not store response %s", self.id)
