"""The Anthropic Messages adapter (PROV-1, DESIGN house style 3): ``POST {base_url}/v1/messages``.

Pure: no I/O, no globals, no retries. Builds the upstream request from the canonical (OpenAI chat)
body — or, for an Anthropic client, sends the client's own body unchanged except ``model`` and
``stream`` (same-format pass-through) — parses ``message`` responses and the Messages stream into
canonical ``chat.completion`` / ``chat.completion.chunk`` objects, and classifies errors with
:func:`~omniroute.resilience.classify.classify_http` (``rate_limit_error`` → RateLimited,
``overloaded_error``/529 → Overloaded, …).

Shapes follow Anthropic's Messages API reference (https://docs.anthropic.com/en/api/messages and
…/messages-streaming): ``system`` is top-level; tool calls are ``tool_use`` blocks in assistant turns
and tool results are ``tool_result`` blocks in the next user turn; ``max_tokens`` is required;
``stop_reason`` is ``end_turn | stop_sequence | max_tokens | tool_use | refusal | pause_turn``;
``usage.input_tokens`` excludes cache reads and writes (``cache_read_input_tokens``,
``cache_creation_input_tokens``), whereas the canonical ``prompt_tokens`` includes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import orjson

from omniroute.errors import InvalidRequest, MalformedEvent, StreamBroken, UpstreamError
from omniroute.providers.upstream import UpstreamRequest
from omniroute.resilience.classify import classify_http, error_from_payload
from omniroute.values import Candidate, ChatRequest, Usage
from omniroute.wire._common import (
    CACHE_CONTROL,
    DEFAULT_MAX_TOKENS,
    EFFORT_BUDGETS,
    NATIVE,
    auth_headers,
    base_url_for,
    chunk,
    clamp_output_tokens,
    dumps,
    mid_conversation_system,
    new_id,
    now_s,
    parse_data_url,
    sse_frame,
    usage_dict,
    with_cache_marker,
)
from omniroute.wire.anthropic.blocks import assistant_message, tool_use_block
from omniroute.wire.anthropic.replay import native_for_upstream, unsigned_tool_turn
from omniroute.wire.reasoning import ANTHROPIC, anthropic_blocks
from omniroute.wire.tool_ids import upstream_tool_id

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent upstream unless an Anthropic client sent its own."""

MIN_THINKING_BUDGET = 1024
"""Anthropic's smallest ``thinking.budget_tokens``."""

FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
"""Anthropic ``stop_reason`` → canonical ``finish_reason``."""

_TOOL_CHOICES: dict[str, dict[str, Any]] = {
    "auto": {"type": "auto"},
    "none": {"type": "none"},
    "required": {"type": "any"},
}


def messages_url(base_url: str) -> str:
    """``{base}/v1/messages``, without doubling ``/v1`` when the base already ends with it."""
    base = base_url.rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


# -- canonical → Anthropic request ------------------------------------------------------------------


def _text_block(part: Mapping[str, Any], text: str) -> dict[str, Any]:
    return with_cache_marker({"type": "text", "text": text}, part)


def _image_block(url: str) -> dict[str, Any]:
    data = parse_data_url(url)
    if data is not None:
        return {"type": "image", "source": {"type": "base64", "media_type": data[0], "data": data[1]}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _content_blocks(content: Any) -> list[dict[str, Any]]:
    """OpenAI content (string or parts: text, image_url, file) → Anthropic content blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            blocks.append(_text_block(part, str(part["text"])))
        elif kind == "image_url":
            img = part.get("image_url")
            url = img.get("url") if isinstance(img, dict) else img
            if isinstance(url, str) and url:
                blocks.append(with_cache_marker(_image_block(url), part))
        elif kind == "file":
            f = part.get("file") or {}
            data = parse_data_url(str(f.get("file_data") or ""))
            if data is not None:
                doc = {
                    "type": "document",
                    "source": {"type": "base64", "media_type": data[0], "data": data[1]},
                }
                blocks.append(with_cache_marker(doc, part))
    return blocks


def _assistant_blocks(msg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An assistant message → blocks: the thinking Anthropic can verify (reasoning of other families
    is dropped, never sent unsigned), text, then ``tool_use`` with ids mapped to Anthropic's rules."""
    blocks = anthropic_blocks(msg.get("thinking_blocks") or ())
    blocks += _content_blocks(msg.get("content"))
    for tc in msg.get("tool_calls") or ():
        block = tool_use_block(tc)
        block["id"] = upstream_tool_id(block["id"], ANTHROPIC)
        blocks.append(block)
    return blocks


def _tool_result(msg: Mapping[str, Any]) -> dict[str, Any]:
    content = msg.get("content")
    result: Any = content if isinstance(content, str) else _content_blocks(content)
    tool_use_id = upstream_tool_id(str(msg.get("tool_call_id") or ""), ANTHROPIC)
    return with_cache_marker({"type": "tool_result", "tool_use_id": tool_use_id, "content": result}, msg)


def _append(out: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add a turn, merging into the previous one of the same role (Anthropic requires alternation)."""
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        out[-1]["content"].extend(blocks)
    else:
        out.append({"role": role, "content": blocks})


def to_anthropic_messages(messages: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Canonical messages → ``(system blocks, messages)``.

    system/developer messages before the first turn go to ``system``; later ones (a mid-conversation
    instruction) become a text block of a user turn at their place, so the conversation keeps its
    order and its cached prefix; assistant ``tool_calls`` become ``tool_use`` blocks; tool messages
    become ``tool_result`` blocks of one user turn (consecutive ones merged, and placed before any text
    of that turn, as Anthropic requires)."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for m in messages if isinstance(messages, list) else ():
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role in ("system", "developer"):
            if out:
                _append(out, "user", [{"type": "text", "text": mid_conversation_system(m.get("content"))}])
            else:
                system += _content_blocks(m.get("content"))
        elif role == "user":
            _append(out, "user", _content_blocks(m.get("content")))
        elif role == "assistant":
            _append(out, "assistant", _assistant_blocks(m))
        elif role in ("tool", "function"):
            _append(out, "user", [_tool_result(m)])
    for turn in out:
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b.get("type") != "tool_result")
    return system, out


def _tools(tools: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in tools if isinstance(tools, list) else ():
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not fn.get("name"):
            continue
        tool: dict[str, Any] = {
            "name": fn["name"],
            "input_schema": fn.get("parameters") or {"type": "object", "properties": {}},
        }
        if fn.get("description"):
            tool["description"] = fn["description"]
        out.append(with_cache_marker(tool, fn if CACHE_CONTROL in fn else t))
    return out


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    tc: dict[str, Any] | None = None
    if isinstance(choice, str):
        tc = dict(_TOOL_CHOICES.get(choice, {"type": "auto"}))
    elif isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        tc = {"type": "tool", "name": name} if name else {"type": "auto"}
    if parallel is False:
        tc = tc or {"type": "auto"}
        if tc["type"] != "none":
            tc["disable_parallel_tool_use"] = True
    return tc


def to_anthropic_request(body: Mapping[str, Any], cand: Candidate) -> dict[str, Any]:
    """Canonical chat body → Anthropic Messages body (without ``model``/``stream``; the caller sets them).

    ``max_tokens`` = ``max_completion_tokens`` / ``max_tokens`` / the catalog's ``max_output_tokens`` /
    4096; ``stop`` → ``stop_sequences``; ``temperature`` is clamped to Anthropic's [0, 1];
    ``reasoning_effort`` → ``thinking`` with a budget from :data:`EFFORT_BUDGETS` (omitted when the
    budget would not fit under ``max_tokens``, when a tool is forced, or when the last assistant turn
    called a tool without a signed thinking block Anthropic can verify — a conversation that comes
    from another family — all of which Anthropic rejects with thinking on: that turn goes without
    thinking rather than failing)."""
    system, messages = to_anthropic_messages(body.get("messages"))
    out: dict[str, Any] = {"messages": messages}
    if system:
        plain = all(set(b) == {"type", "text"} for b in system)
        out["system"] = "\n\n".join(b["text"] for b in system) if plain else system
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or cand.model.max_output_tokens
    out["max_tokens"] = clamp_output_tokens(int(max_tokens or DEFAULT_MAX_TOKENS), cand.model)
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if isinstance(body.get("temperature"), int | float):
        out["temperature"] = min(float(body["temperature"]), 1.0)
    if isinstance(body.get("top_p"), int | float):
        out["top_p"] = body["top_p"]
    tools = _tools(body.get("tools"))
    if tools:
        out["tools"] = tools
        tc = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
        if tc is not None:
            out["tool_choice"] = tc
    effort = body.get("reasoning_effort")
    if isinstance(effort, str) and effort in EFFORT_BUDGETS:
        budget = min(EFFORT_BUDGETS[effort], out["max_tokens"] - 1)
        forced = out.get("tool_choice", {}).get("type") in ("any", "tool")
        if budget >= MIN_THINKING_BUDGET and not forced and not unsigned_tool_turn(messages):
            out["thinking"] = {"type": "enabled", "budget_tokens": budget}
            out.pop("temperature", None)
            out.pop("top_p", None)
    if isinstance(body.get("user"), str) and body["user"]:
        out["metadata"] = {"user_id": body["user"]}
    return out


# -- Anthropic response → canonical ------------------------------------------------------------------


def usage_from_anthropic(u: Mapping[str, Any]) -> dict[str, Any]:
    """Anthropic ``usage`` → canonical: prompt = input + cache reads + cache writes; cached = cache
    reads; cache writes from ``cache_creation_input_tokens``, their 1-hour part from
    ``cache_creation.ephemeral_1h_input_tokens`` (Anthropic prompt-caching docs)."""
    cached = int(u.get("cache_read_input_tokens") or 0)
    write = int(u.get("cache_creation_input_tokens") or 0)
    ttl = u.get("cache_creation")
    write_1h = int(ttl.get("ephemeral_1h_input_tokens") or 0) if isinstance(ttl, dict) else 0
    prompt = int(u.get("input_tokens") or 0) + cached + write
    return usage_dict(prompt, int(u.get("output_tokens") or 0), cached, 0, write, write_1h)


def message_to_canonical(obj: Mapping[str, Any], model: str) -> dict[str, Any]:
    """An Anthropic ``message`` → canonical ``chat.completion``.

    text blocks → ``content``; ``tool_use`` → ``tool_calls`` (arguments as JSON text); ``thinking`` →
    ``reasoning_content`` plus ``thinking_blocks`` (kept with signatures for replay)."""
    message = assistant_message(obj.get("content") or ())
    calls = message.get("tool_calls")
    stop = obj.get("stop_reason")
    finish = FINISH_REASONS.get(str(stop), "stop") if stop else ("tool_calls" if calls else "stop")
    out: dict[str, Any] = {
        "id": obj.get("id") or new_id("msg_"),
        "object": "chat.completion",
        "created": now_s(),
        "model": obj.get("model") or model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
    }
    if isinstance(obj.get("usage"), dict):
        out["usage"] = usage_from_anthropic(obj["usage"])
    return out


class AnthropicStreamParser:
    """Parses one Messages SSE stream into canonical chunks (one chunk per event at most).

    ``message_start`` → role chunk; ``content_block_start`` tool_use → a ``tool_calls`` delta with
    ``index`` (per call, from 0), ``id``, ``type``, ``function.name`` and ``arguments: ""``;
    ``input_json_delta`` → argument fragments on the same index; ``text_delta`` → ``content``;
    ``thinking_delta`` → ``reasoning_content``; ``message_delta`` → ``finish_reason`` and the
    cumulative usage; ``message_stop`` ends the stream; ``error`` raises the classified error
    (RESIL-9); malformed JSON raises :class:`MalformedEvent`. With ``native`` every event also yields
    a chunk carrying its raw frame under :data:`NATIVE` (same-format pass-through).
    """

    __slots__ = (
        "created",
        "done",
        "got_args",
        "id",
        "model",
        "native",
        "ntools",
        "output",
        "pending",
        "prompt",
        "provider",
        "saw_usage",
        "thinking",
        "tools",
    )

    def __init__(self, provider: str, model: str, *, native: bool = False) -> None:
        self.done = False
        self.provider = provider
        self.model = model
        self.native = native
        self.id = ""
        self.created = now_s()
        self.prompt = Usage()
        self.output = 0
        self.saw_usage = False
        self.tools: dict[int, int] = {}
        self.ntools = 0
        self.pending: dict[int, str] = {}
        self.got_args: set[int] = set()
        self.thinking: dict[int, list[str]] = {}

    def feed(self, event: str, data: bytes) -> list[dict[str, Any]]:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise MalformedEvent(
                f"{self.provider}: malformed stream event (not JSON): {data[:80]!r}", provider=self.provider
            ) from None
        if not isinstance(obj, dict):
            raise MalformedEvent(
                f"{self.provider}: malformed stream event (not an object)", provider=self.provider
            )
        kind = str(obj.get("type") or event)
        if kind == "error":
            raise error_from_payload(obj, provider=self.provider, in_stream=True)
        out = self._handle(kind, obj)
        if self.native:
            out = out if out is not None else chunk(self.id, self.model, self.created)
            out[NATIVE] = sse_frame(event or kind, data)
        return [out] if out is not None else []

    def finish(self) -> list[dict[str, Any]]:
        return []

    def _chunk(
        self, delta: dict[str, Any] | None, finish: str | None = None, usage: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        return chunk(self.id, self.model, self.created, delta, finish, usage=usage)

    def _usage(self, u: Any) -> None:
        if not isinstance(u, dict):
            return
        self.saw_usage = True
        if u.get("input_tokens") is not None or u.get("cache_read_input_tokens") is not None:
            self.prompt = Usage.from_openai(usage_from_anthropic(u)) or Usage()
        if u.get("output_tokens") is not None:
            self.output = int(u["output_tokens"])

    def _handle(self, kind: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        if kind == "content_block_delta":
            return self._delta(int(obj.get("index") or 0), obj.get("delta") or {})
        if kind == "content_block_start":
            return self._block_start(int(obj.get("index") or 0), obj.get("content_block") or {})
        if kind == "content_block_stop":
            idx = int(obj.get("index") or 0)
            if idx in self.thinking:
                return self._thinking_done(idx)
            args = self.pending.pop(idx, None)
            if args is not None and idx not in self.got_args:
                return self._chunk(
                    {"tool_calls": [{"index": self.tools[idx], "function": {"arguments": args}}]}
                )
            return None
        if kind == "message_start":
            msg = obj.get("message") or {}
            self.id = msg.get("id") or self.id or new_id("msg_")
            self.model = msg.get("model") or self.model
            self._usage(msg.get("usage"))
            if isinstance(msg.get("usage"), dict):
                self.output = 0  # message_start's output count is a placeholder; message_delta has the total
            return self._chunk({"role": "assistant", "content": ""})
        if kind == "message_delta":
            self._usage(obj.get("usage"))
            stop = (obj.get("delta") or {}).get("stop_reason")
            finish = None
            if stop:
                finish = FINISH_REASONS.get(str(stop), "stop")
                if finish == "stop" and self.ntools:
                    finish = "tool_calls"
            usage = None
            if self.saw_usage:
                usage = replace(self.prompt, completion_tokens=self.output).to_openai()
            if finish is None and usage is None:
                return None
            return self._chunk({} if finish else None, finish, usage)
        if kind == "message_stop":
            self.done = True
        return None

    def _block_start(self, idx: int, block: dict[str, Any]) -> dict[str, Any] | None:
        kind = block.get("type")
        if kind == "tool_use":
            t = self.tools[idx] = self.ntools
            self.ntools += 1
            if block.get("input"):
                self.pending[idx] = dumps(block["input"])
            return self._chunk(
                {
                    "tool_calls": [
                        {
                            "index": t,
                            "id": block.get("id") or new_id("toolu_"),
                            "type": "function",
                            "function": {"name": block.get("name") or "", "arguments": ""},
                        }
                    ]
                }
            )
        if kind == "text" and block.get("text"):
            return self._chunk({"content": block["text"]})
        if kind == "thinking":
            self.thinking[idx] = [str(block.get("thinking") or ""), str(block.get("signature") or "")]
            return self._chunk({"reasoning_content": block["thinking"]}) if block.get("thinking") else None
        if kind == "redacted_thinking":
            return self._chunk(
                {"thinking_blocks": [{"type": "redacted_thinking", "data": block.get("data")}]}
            )
        return None

    def _thinking_done(self, idx: int) -> dict[str, Any] | None:
        """A thinking block is complete: one delta carrying it whole (text and signature) as
        ``thinking_blocks``, so the next turn can replay it (extended-thinking streaming guide)."""
        text, signature = self.thinking.pop(idx)
        if not signature:
            return None
        block = {"type": "thinking", "thinking": text, "signature": signature}
        return self._chunk({"thinking_blocks": [block]})

    def _delta(self, idx: int, delta: dict[str, Any]) -> dict[str, Any] | None:
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return self._chunk({"content": delta["text"]})
        if kind == "input_json_delta" and delta.get("partial_json") and idx in self.tools:
            self.got_args.add(idx)
            return self._chunk(
                {"tool_calls": [{"index": self.tools[idx], "function": {"arguments": delta["partial_json"]}}]}
            )
        if kind == "thinking_delta" and delta.get("thinking"):
            if idx in self.thinking:
                self.thinking[idx][0] += str(delta["thinking"])
            return self._chunk({"reasoning_content": delta["thinking"]})
        if kind == "signature_delta" and idx in self.thinking:
            self.thinking[idx][1] += str(delta.get("signature") or "")
        return None


def _clamp_native(body: dict[str, Any], cand: Candidate) -> None:
    """Clamp a pass-through body's ``max_tokens`` to the served model's ``max_output_tokens``, and
    keep an enabled thinking budget below it (Anthropic requires ``budget_tokens < max_tokens``)."""
    mt = body.get("max_tokens")
    if not isinstance(mt, int):
        return
    clamped = clamp_output_tokens(mt, cand.model)
    if clamped == mt:
        return
    body["max_tokens"] = clamped
    thinking = body.get("thinking")
    budget = thinking.get("budget_tokens") if isinstance(thinking, dict) else None
    if isinstance(thinking, dict) and isinstance(budget, int) and budget >= clamped:
        body["thinking"] = {**thinking, "budget_tokens": max(clamped - 1, 1)}


def _check_single_choice(body: dict[str, Any], cand: Candidate) -> None:
    """The Messages API returns one answer per request (it has no ``n``), so a request for several
    choices is a 400 naming ``n`` rather than a silent single choice."""
    n = body.get("n")
    if isinstance(n, int) and n > 1:
        raise InvalidRequest(
            f"'n' = {n} asks for several choices, but {cand.provider.id}/{cand.model.id} speaks the "
            "Anthropic Messages API, which returns one; send n = 1 or route to an OpenAI- or "
            "Gemini-format model.",
            param="n",
        )


class AnthropicAdapter:
    """Adapter for the Anthropic Messages wire format (``POST {base_url}/v1/messages``)."""

    def build_request(self, cand: Candidate, req: ChatRequest, *, stream: bool) -> UpstreamRequest:
        passthrough = req.client_format == "anthropic" and req.native is not None
        if passthrough and req.native is not None:
            body = native_for_upstream(req.native)
            _clamp_native(body, cand)
        else:
            _check_single_choice(req.body, cand)
            body = to_anthropic_request(req.body, cand)
        body["model"] = cand.model.id
        if stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if passthrough and req.headers.get("anthropic-version"):
            headers["anthropic-version"] = req.headers["anthropic-version"]
        if req.headers.get("anthropic-beta"):  # betas go to this family only, whatever the client's format
            headers["anthropic-beta"] = req.headers["anthropic-beta"]
        headers.update(auth_headers(cand, "x-api-key"))
        return UpstreamRequest(messages_url(base_url_for(cand)), headers, orjson.dumps(body))

    def parse_response(self, body: bytes, cand: Candidate) -> dict[str, Any]:
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise StreamBroken(
                f"{cand.provider.id}: response body is not JSON: {body[:80]!r}", provider=cand.provider.id
            ) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("content"), list):
            if isinstance(obj, dict) and obj.get("type") == "error":
                raise error_from_payload(obj, provider=cand.provider.id, in_stream=False)
            raise StreamBroken(
                f"{cand.provider.id}: response is not an Anthropic message", provider=cand.provider.id
            )
        return message_to_canonical(obj, cand.model.id)

    def stream_parser(self, cand: Candidate, req: ChatRequest) -> AnthropicStreamParser:
        native = req.client_format == "anthropic" and req.native is not None
        return AnthropicStreamParser(cand.provider.id, cand.model.id, native=native)

    def classify_error(
        self, status: int, headers: Mapping[str, str], body: bytes, cand: Candidate, *, now: float
    ) -> UpstreamError:
        return classify_http(status, headers, body, provider=cand.provider.id, now=now)
