"""Scripted fake LLM providers: real HTTP servers on 127.0.0.1 that pick their behaviour from the model name.

`FakeProvider` speaks the OpenAI, Anthropic and Gemini wire formats on one random free port (DESIGN 4
and 14: tests point the gateway's upstream client at real sockets, never at patched code).
`FakeProviderThread` runs one in a daemon thread for sync tests and the CLI's simulated mode.

Routes (``{base_url}`` is ``http://127.0.0.1:PORT``):

| format | routes |
|---|---|
| OpenAI | ``POST /v1/chat/completions``, ``POST /v1/embeddings``, ``GET /v1/models`` |
| Anthropic | ``POST /v1/messages``; ``GET /v1/models`` in Anthropic's shape when sent ``anthropic-version`` |
| Gemini | ``POST /v1beta/models/{model}:generateContent``, ``…:streamGenerateContent?alt=sse`` (also under ``/v1/models/``) |

Streaming is chosen by ``"stream": true`` (OpenAI, Anthropic) or the ``:streamGenerateContent`` path
(Gemini; always SSE). Every streamed event is written and flushed on its own.

Fault grammar. The model name is split on ``+`` into directives that combine
(``gpt-4o+chunks-3+latency-50``); pieces that are not directives — the base model name, typos — are
ignored, so ``gpt-4o`` just answers. `FakeProvider.set_behaviour` can map a model name (or ``*``) to a
spec instead. A "content chunk" is a content-bearing event: text, reasoning, a tool-call start or an
argument fragment (the SPEC RESIL-9 commit point); the "preamble" is what comes before the first one
(OpenAI role chunk; Anthropic ``message_start``, ``content_block_start``, ``ping``).

| directive | effect |
|---|---|
| *(none)* | answer ``Hello from {name} ({model}).`` (or the constructor's ``answer``); a last user message containing ``echo:`` is answered with the text after it |
| ``chunks-N`` | stream the answer text in N content chunks (default 5) |
| ``latency-MS`` | wait MS before the response headers (every route, errors too) |
| ``slow-ttft-MS`` | streaming: headers and preamble at once, then wait MS before the first content chunk; non-streaming: wait MS before the headers |
| ``heartbeat-MS`` | streaming: while ``slow-ttft`` waits, an SSE comment line (``: keep-alive``) every MS, as slow real servers send |
| ``fail-STATUS`` | reply STATUS with the format's error body (see below) |
| ``fail-STATUS-retry-S`` | … with ``Retry-After: S`` |
| ``fail-STATUS-times-K`` | fail only the first K calls for this exact model name, then behave normally (per-provider counter, cleared by `reset`); combines with ``-retry-S`` |
| ``retry-S``, ``retry-ms-MS`` | add ``Retry-After: S`` / ``retry-after-ms: MS`` to ``fail-*`` replies |
| ``answer-TEXT`` | answer TEXT instead of the default text (wins over ``echo:`` and the constructor's ``answer``); ``_`` is a space, ``%XX`` is decoded, so any text fits (``urllib.parse.quote(text, safe="")`` with ``_`` written ``%5F``) |
| ``msg-TEXT`` | the message of ``fail-*`` replies and error events; ``_`` is a space, ``%XX`` is decoded (``msg-context_length_exceeded`` → "context length exceeded") |
| ``ctx-N`` | a prompt over N tokens gets 400 in the format's context-window wording (see below) |
| ``error-event`` | streaming: HTTP 200, then an error event first of all, then the stream ends |
| ``error-after-K`` | streaming: the error event right after the K-th content chunk (K=0: after the preamble), then the stream ends |
| ``cut-after-K`` | streaming: K content chunks, then the server aborts the TCP connection (no ``[DONE]``, no final chunk: the client sees an incomplete body); non-streaming: headers and half the body, then the abort |
| ``stall`` | accept the request and never send headers (until the client disconnects) |
| ``stall-after-K`` | streaming: K content chunks, then hang until the client disconnects; non-streaming: headers and half the body, then hang |
| ``malformed-at-K`` | the K-th event (1-based, any kind) is ``data: {not json``, the rest normal; non-streaming K=1: the body is not JSON |
| ``no-done`` | streams end at the HTTP level without ``data: [DONE]`` (OpenAI) / ``message_stop`` (Anthropic); Gemini streams always just close |
| ``tool-call`` | answer with a call to the request's first tool (``get_weather`` without tools), arguments ``{"city": "Paris", "unit": "celsius"}``, streamed as each provider does (see below) |
| ``tools-N`` | N parallel calls; call i uses tool i modulo the number of tools |
| ``text-and-tool`` | answer text and a tool call; the last text chunk carries the start of the call in the same event (OpenAI delta with ``content`` and ``tool_calls``; Gemini text and ``functionCall`` parts; Anthropic cannot, so a text block then a tool_use block) |
| ``usage-late`` | default: usage at the end (OpenAI: a ``choices: []`` chunk before ``[DONE]``, only when ``stream_options.include_usage`` is set; Anthropic: ``message_start`` has ``input_tokens``, ``message_delta`` the ``output_tokens``; Gemini: ``usageMetadata`` on the last chunk) |
| ``usage-early`` | the full usage on the first streamed event (OpenAI: the role chunk, whatever ``include_usage`` says) |
| ``usage-missing`` | no usage anywhere, streaming or not |
| ``stamp`` | every streamed JSON event carries ``x_stamp_ns``: the server's ``time.time_ns()`` when it was written |
| ``huge-body-MB`` | non-streaming: the answer's JSON padded with an ``x_pad`` string field to MB megabytes (written in 64 KB pieces) |
| ``gzip-bomb-MB`` | non-streaming: the same padded body sent ``Content-Encoding: gzip``, compressed as it is written (a few KB on the wire inflate to MB megabytes) |
| ``huge-event-MB`` | streaming: before the answer, one event ``data: {"x_pad": "aaa…"}`` of MB megabytes with no line break, written in 64 KB pieces |
| ``echo-key`` | the message of ``fail-*`` replies and error events ends with ``: KEY``, the API key the request carried (``Authorization: Bearer``, ``x-api-key``, ``x-goog-api-key`` or ``?key=``), as some OpenAI-compatible servers do |
| ``prompt-N`` | report N prompt tokens whatever the prompt's length (long-context prices) |
| ``cache-read-N`` | N of the prompt tokens are reported as cache reads (OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``, Gemini ``cachedContentTokenCount``) |
| ``cache-write-N``, ``cache-write-1h-N`` | N prompt tokens are reported as written to the cache for 5 minutes / 1 hour (Anthropic ``cache_creation_input_tokens`` with ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``; OpenAI ``prompt_tokens_details.cache_write_tokens``, as OpenRouter reports them; Gemini has no cache writes) |
| ``reasoning`` | a reasoning delta before the answer (OpenAI ``delta.reasoning_content``, Anthropic thinking block with ``thinking_delta`` + ``signature_delta``, Gemini part with ``thought: true``); the signature is derived from the thinking text (``faults.signature_for``), and Gemini function calls then carry a ``thoughtSignature`` |
| ``call-NAME`` | an agent's tool turn: while no tool result follows the last assistant turn, answer with one call to tool NAME (whether or not the request declares it); once results are there, answer ``Tool result: {their text}`` (first 200 characters, whitespace collapsed; ``answer-TEXT`` wins); NAME is ``%XX``-decoded |
| ``args-JSON`` | the arguments of the ``call-NAME`` call, ``%XX``-decoded JSON text (``urllib.parse.quote(json, safe="")``; ``_`` stays ``_``); default ``{}`` |
| ``faults-times-K`` | the stream faults (``error-event``, ``error-after-K``, ``cut-after-K``, ``stall-after-K``, ``malformed-at-K``) act only on the first K calls for this exact model name, later calls answer whole (per-provider counter, cleared by `reset`) |
| ``no-prefill`` | refuse a conversation that ends with an assistant turn (a prefill) with 400 "This model does not support assistant message prefill. …", as models without prefill support do |
| ``continue`` | a request that carries part of the answer is answered with the rest: after a final assistant turn (prefill) that begins the answer, the text after it (as Anthropic continues a prefill); after such an assistant turn and a user turn asking to go on, the text from the start of its last word on (repeating that word, as models asked in words often do) |
| ``strict`` | refuse what strict real providers refuse in replayed conversations with a 400 in the format's shape: unknown OpenAI message keys, tool-call ids over 40 characters, Anthropic ids off ``^[a-zA-Z0-9_-]+$``, thinking blocks whose signature is not the one issued for their text or missing before a final ``tool_use`` with thinking on, Gemini calls of the current turn without their ``thoughtSignature`` (rules and wording: `omniroute.testing.strict`). As real models do, it also answers an Anthropic request with thinking on with a signed thinking block first, and Gemini function calls carry a ``thoughtSignature`` |

Shapes. Error bodies: OpenAI ``{"error": {message, type, param, code}}`` (401 ``invalid_api_key``,
404 ``model_not_found``, 429 ``rate_limit_exceeded``, 5xx type ``server_error``); Anthropic
``{"type": "error", "error": {type, message}}`` (400 invalid_request_error, 401 authentication_error,
403 permission_error, 404 not_found_error, 429 rate_limit_error, 529 overloaded_error, other 5xx
api_error); Gemini ``{"error": {code, message, status}}`` (400 INVALID_ARGUMENT, 401 UNAUTHENTICATED,
403 PERMISSION_DENIED, 404 NOT_FOUND, 429 RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE). Error
events: OpenAI ``data: {"error": {…, "type": "server_error"}}``, Anthropic ``event: error`` with
``overloaded_error``, Gemini ``data: {"error": {"code": 503, …, "status": "UNAVAILABLE"}}``.
Context window (``ctx-N``): OpenAI code ``context_length_exceeded`` "This model's maximum context
length is N tokens. However, your messages resulted in X tokens. …"; Anthropic invalid_request_error
"prompt is too long: X tokens > N maximum"; Gemini INVALID_ARGUMENT "The input token count (X) exceeds
the maximum number of tokens allowed (N).". Streamed tool calls: OpenAI first delta with ``index``,
``id``, ``type``, ``function.name`` and ``arguments: ""``, then ≥3 deltas of ``index`` + argument
fragment, finish ``tool_calls``; Anthropic ``content_block_start`` tool_use with ``input: {}``, ≥3
``input_json_delta`` pieces, ``content_block_stop``, stop_reason ``tool_use``; Gemini one whole
``functionCall`` part.

Tokens are whitespace-separated words: prompt = words over system text and every message (min 1),
completion = words of the answer, reasoning and tool arguments (reasoning words are also reported as
OpenAI ``completion_tokens_details.reasoning_tokens`` and Gemini ``thoughtsTokenCount``, which Gemini
keeps out of ``candidatesTokenCount``). A request's ``max_tokens`` /
``max_completion_tokens`` / ``generationConfig.maxOutputTokens`` below the answer's length truncates
it to that many words with finish ``length`` / ``max_tokens`` / ``MAX_TOKENS``. ``POST /v1/embeddings``
returns deterministic unit vectors of length 8 (``dimensions`` honoured, base64 when asked).
Every response carries ``x-fake-provider: {name}``.
"""  # noqa: E501

from __future__ import annotations

import asyncio
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, NoReturn, Protocol, TypeVar

import orjson
from aiohttp import web

from omniroute.testing._anthropic import AnthropicRenderer
from omniroute.testing._gemini import GeminiRenderer
from omniroute.testing._openai import OpenAIRenderer
from omniroute.testing.faults import (
    DEFAULT_TOOL_NAME,
    MALFORMED_DATA,
    PREFILL_REFUSED,
    Behaviour,
    Event,
    Prompt,
    Reply,
    ToolCall,
    continued,
    count_words,
    default_message,
    padding,
    parse_behaviour,
    stream_script,
    text_of,
    without_stream_faults,
)
from omniroute.testing.strict import violation

Format = Literal["openai", "anthropic", "gemini"]
ALL_FORMATS: tuple[Format, ...] = ("openai", "anthropic", "gemini")
DEFAULT_MODELS = ("fake-model",)
ERROR_EVENT_MESSAGE = "Overloaded"
CUT_FLUSH_WAIT_S = 0.2  # let already-written chunks leave the socket before the abort
THREAD_TIMEOUT_S = 10.0
TOOL_RESULT_ECHO_CHARS = 200  # ``call-NAME``: how much of the tool result the follow-up answer repeats
_T = TypeVar("_T")


class _Renderer(Protocol):
    def read(self, body: Mapping[str, Any], model: str, stream: bool) -> Prompt: ...
    def error_body(self, status: int, message: str) -> dict[str, Any]: ...
    def context_error(self, limit: int, tokens: int) -> dict[str, Any]: ...
    def error_event(self, message: str) -> Event: ...
    def completion(self, reply: Reply) -> dict[str, Any]: ...
    def stream(self, reply: Reply) -> list[Event]: ...


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the fake received, recorded before any behaviour runs.

    ``headers`` has lower-cased names; ``body`` is the parsed JSON (``None`` for an empty or non-JSON
    body); ``model`` comes from the body, or the path for Gemini (``None`` for ``GET /v1/models``);
    ``received_at`` is ``time.monotonic()``; ``query`` is the URL query string as a dict.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    model: str | None
    format: Format
    received_at: float
    query: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class _Live:
    resp: web.StreamResponse | None = None
    cut: bool = False


class FakeProvider:
    """A fake LLM provider on a real socket; behaviour comes from the model name (module docstring).

    Use as ``async with FakeProvider(name="p1") as fp:`` or ``await fp.start()`` / ``await fp.stop()``.
    ``requests`` lists every request received; ``cancelled`` counts requests whose client went away
    before the response finished (times in ``cancel_times``, monotonic seconds); ``serving`` counts
    requests being answered. ``models`` are the ids ``GET /v1/models`` lists besides the names given
    to `set_behaviour`; `wait_until` waits for any of these to reach a state.
    """

    def __init__(
        self,
        *,
        name: str = "fake",
        formats: Sequence[Format] = ALL_FORMATS,
        answer: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Sequence[str] = DEFAULT_MODELS,
    ) -> None:
        unknown = set(formats) - set(ALL_FORMATS)
        if unknown:
            raise ValueError(f"unknown formats {sorted(unknown)}; expected some of {ALL_FORMATS}")
        self.name = name
        self.formats: tuple[Format, ...] = tuple(formats)
        self.answer = answer
        self.host = host
        self.models = tuple(models)
        self.requests: list[RecordedRequest] = []
        self.cancelled = 0
        self.cancel_times: list[float] = []
        self._requested_port = port
        self._port: int | None = None
        self._overrides: dict[str, str] = {}
        self._fail_counts: dict[str, int] = {}
        self._fault_counts: dict[str, int] = {}
        self._sequence = 0
        self._runner: web.AppRunner | None = None
        self._handlers: set[asyncio.Task[Any]] = set()
        self._waiters: list[asyncio.Future[None]] = []
        self._stopping = False
        self._openai = OpenAIRenderer()
        self._anthropic = AnthropicRenderer()
        self._gemini = GeminiRenderer()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeProvider is not started")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` with no trailing slash; raises RuntimeError before `start`."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        """Bind the port and serve; idempotent."""
        if self._runner is not None:
            return
        self._stopping = False
        # handler_cancellation: a client disconnect cancels the handler, which is how we count it.
        runner = web.AppRunner(self._app(), handler_cancellation=True, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._requested_port)
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Cancel in-flight responses (stalls included; not counted as client disconnects) and close."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._stopping = True
        for task in list(self._handlers):
            task.cancel()
        await runner.cleanup()

    async def __aenter__(self) -> FakeProvider:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def serving(self) -> int:
        """Requests being answered right now (received, response not finished)."""
        return len(self._handlers)

    async def wait_until(self, predicate: Callable[[FakeProvider], bool], timeout_s: float = 10.0) -> None:
        """Return once ``predicate(self)`` holds, checked whenever a request arrives, is cancelled by its
        client or finishes; raises :class:`TimeoutError` after ``timeout_s`` seconds. How a test waits
        for what the server sees of a real socket (a disconnect, a request in flight), which takes
        real time."""
        async with asyncio.timeout(timeout_s):
            while not predicate(self):
                waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                await waiter

    def _changed(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def calls(self, model: str | None = None) -> int:
        """Model calls received (chat, messages, generateContent, embeddings), all or for one model name."""
        return sum(
            1 for request in self.requests if request.model is not None and model in (None, request.model)
        )

    def reset(self) -> None:
        """Forget recorded requests, cancellations and ``fail-N-times-K`` counters (keeps overrides)."""
        self.requests.clear()
        self.cancelled = 0
        self.cancel_times.clear()
        self._fail_counts.clear()
        self._fault_counts.clear()

    def set_behaviour(self, model: str, spec: str) -> None:
        """Make requests for ``model`` (``*``: every model) behave as the grammar ``spec``; ``""`` answers."""
        self._overrides[model] = spec

    def behaviour_for(self, model: str) -> Behaviour:
        """The `Behaviour` a request for ``model`` gets (override, else ``*`` override, else the name)."""
        return parse_behaviour(self._overrides.get(model, self._overrides.get("*", model)))

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        routes: list[web.RouteDef] = []
        if "openai" in self.formats:
            routes += [
                web.post("/v1/chat/completions", self._openai_chat),
                web.post("/v1/embeddings", self._openai_embeddings),
            ]
        if "anthropic" in self.formats:
            routes.append(web.post("/v1/messages", self._anthropic_messages))
        if "gemini" in self.formats:
            # Gemini serves both API versions; the google-genai SDK defaults to /v1.
            routes += [
                web.post("/v1beta/models/{tail:.+}", self._gemini_generate),
                web.post("/v1/models/{tail:.+}", self._gemini_generate),
            ]
        if "openai" in self.formats or "anthropic" in self.formats:
            routes.append(web.get("/v1/models", self._list_models))
        app.add_routes(routes)
        return app

    async def _openai_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "openai", self._openai)

    async def _openai_embeddings(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "openai", self._openai, embeddings=True)

    async def _anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, "anthropic", self._anthropic)

    async def _gemini_generate(self, request: web.Request) -> web.StreamResponse:
        model, _, method = request.match_info["tail"].rpartition(":")
        if method not in ("generateContent", "streamGenerateContent") or not model:
            return web.json_response(self._gemini.error_body(404, f"unknown method {method!r}"), status=404)
        return await self._serve(
            request, "gemini", self._gemini, model=model, stream=method == "streamGenerateContent"
        )

    async def _list_models(self, request: web.Request) -> web.StreamResponse:
        anthropic = "anthropic" in self.formats and (
            "anthropic-version" in request.headers or "openai" not in self.formats
        )
        self._record(request, None, "anthropic" if anthropic else "openai", None, time.monotonic())
        ids = list(dict.fromkeys([*self.models, *(name for name in self._overrides if name != "*")]))
        data: list[dict[str, Any]]
        if anthropic:
            data = [
                {"type": "model", "id": id_, "display_name": id_, "created_at": "2025-01-01T00:00:00Z"}
                for id_ in ids
            ]
            body: dict[str, Any] = {
                "data": data,
                "has_more": False,
                "first_id": ids[0] if ids else None,
                "last_id": ids[-1] if ids else None,
            }
        else:
            data = [{"id": id_, "object": "model", "created": 0, "owned_by": self.name} for id_ in ids]
            body = {"object": "list", "data": data}
        return web.json_response(body, headers=self._headers())

    def _record(
        self, request: web.Request, body: Any, fmt: Format, model: str | None, received: float
    ) -> None:
        self.requests.append(
            RecordedRequest(
                method=request.method,
                path=request.path,
                headers={key.lower(): value for key, value in request.headers.items()},
                body=body,
                model=model,
                format=fmt,
                received_at=received,
                query=dict(request.query),
            )
        )
        self._changed()

    async def _serve(
        self,
        request: web.Request,
        fmt: Format,
        renderer: _Renderer,
        *,
        model: str | None = None,
        stream: bool = False,
        embeddings: bool = False,
    ) -> web.StreamResponse:
        received = time.monotonic()
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        live = _Live()
        try:
            raw = await request.read()
            try:
                body = orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                body = None
            if model is None and isinstance(body, dict) and isinstance(body.get("model"), str):
                model = body["model"]
            self._record(request, body, fmt, model, received)
            if not isinstance(body, dict):
                return self._error(renderer, 400, "request body must be a JSON object")
            if model is None:
                return self._error(renderer, 400, "model: field required")
            return await self._respond(request, live, fmt, renderer, body, model, stream, embeddings)
        except asyncio.CancelledError:
            if not live.cut and not self._stopping:
                self._note_cancel()
            raise
        except ConnectionResetError:
            if not live.cut:
                self._note_cancel()
            return live.resp or web.Response(status=499)
        finally:
            if task is not None:
                self._handlers.discard(task)
            self._changed()

    async def _respond(
        self,
        request: web.Request,
        live: _Live,
        fmt: Format,
        renderer: _Renderer,
        body: dict[str, Any],
        model: str,
        stream: bool,
        embeddings: bool,
    ) -> web.StreamResponse:
        behaviour = self.behaviour_for(model)
        if behaviour.echo_key:
            message = behaviour.message or "Incorrect API key provided"
            behaviour = replace(behaviour, message=f"{message}: {_sent_key(request)}")
        prompt = self._embedding_prompt(body, model) if embeddings else renderer.read(body, model, stream)
        delay_ms = behaviour.latency_ms + (0 if prompt.stream else behaviour.slow_ttft_ms)
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        if behaviour.stall:
            await _forever()
        if behaviour.fail_status is not None:
            count = self._fail_counts[model] = self._fail_counts.get(model, 0) + 1
            if behaviour.fail_times is None or count <= behaviour.fail_times:
                message = behaviour.message or default_message(behaviour.fail_status, self.name)
                return self._error(renderer, behaviour.fail_status, message, behaviour)
        if behaviour.context_limit is not None and prompt.words > behaviour.context_limit:
            payload = renderer.context_error(behaviour.context_limit, prompt.words)
            return web.json_response(payload, status=400, headers=self._headers(), dumps=_dumps)
        if behaviour.strict and not embeddings and (refused := violation(fmt, body)) is not None:
            return self._error(renderer, 400, refused)
        if behaviour.no_prefill and prompt.prefill is not None:
            return self._error(renderer, 400, PREFILL_REFUSED)
        if behaviour.fault_times is not None:
            count = self._fault_counts[model] = self._fault_counts.get(model, 0) + 1
            behaviour = behaviour if count <= behaviour.fault_times else without_stream_faults(behaviour)
        if embeddings:
            return await self._complete(request, live, self._openai.embeddings(body, model), behaviour)
        reply = self._reply(prompt, behaviour)
        if not prompt.stream:
            return await self._complete(request, live, renderer.completion(reply), behaviour)
        return await self._stream(request, live, renderer, reply, behaviour)

    async def _complete(
        self, request: web.Request, live: _Live, payload: dict[str, Any], behaviour: Behaviour
    ) -> web.StreamResponse:
        data = MALFORMED_DATA.encode() if behaviour.malformed_at == 1 else orjson.dumps(payload)
        if behaviour.huge_body_mb is not None or behaviour.gzip_bomb_mb is not None:
            return await self._huge_body(request, live, data, behaviour)
        if behaviour.cut_after is None and behaviour.stall_after is None:
            return web.Response(body=data, content_type="application/json", headers=self._headers())
        resp = live.resp = web.StreamResponse(headers=self._headers())
        resp.content_type = "application/json"
        resp.content_length = len(data)
        await resp.prepare(request)
        await resp.write(data[: len(data) // 2])
        if behaviour.cut_after is not None:
            await self._cut(request, live)
            return resp
        await _forever()

    async def _huge_body(
        self, request: web.Request, live: _Live, data: bytes, behaviour: Behaviour
    ) -> web.StreamResponse:
        gzip = behaviour.gzip_bomb_mb is not None
        size = (behaviour.gzip_bomb_mb if gzip else behaviour.huge_body_mb) or 0
        headers = self._headers() | ({"Content-Encoding": "gzip"} if gzip else {})
        resp = live.resp = web.StreamResponse(headers=headers)
        resp.content_type = "application/json"
        await resp.prepare(request)
        squeeze = zlib.compressobj(wbits=31) if gzip else None  # 31: the gzip container
        pieces = [b'{"x_pad": "', *padding(size * 1024 * 1024), b'", ' + data[1:]]
        for piece in pieces:
            out = squeeze.compress(piece) if squeeze else piece
            if out:
                await resp.write(out)
        if squeeze:
            await resp.write(squeeze.flush())
        await resp.write_eof()
        return resp

    async def _stream(
        self, request: web.Request, live: _Live, renderer: _Renderer, reply: Reply, behaviour: Behaviour
    ) -> web.StreamResponse:
        headers = self._headers()
        headers.update({"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        resp = live.resp = web.StreamResponse(headers=headers)
        await resp.prepare(request)
        if behaviour.huge_event_mb is not None:
            for piece in [b'data: {"x_pad": "', *padding(behaviour.huge_event_mb * 1024 * 1024), b'"}\n\n']:
                await resp.write(piece)
        for step in stream_script(renderer.stream(reply), behaviour):
            if step.kind == "send" and step.event is not None:
                await resp.write(_frame(step.event, behaviour.stamp))
            elif step.kind == "sleep":
                await _sleep_with_heartbeats(resp, step.ms, behaviour.heartbeat_ms)
            elif step.kind == "error":
                event = renderer.error_event(behaviour.message or ERROR_EVENT_MESSAGE)
                await resp.write(_frame(event, behaviour.stamp))
                break
            elif step.kind == "cut":
                await self._cut(request, live)
                return resp
            elif step.kind == "stall":
                await _forever()
        await resp.write_eof()
        return resp

    async def _cut(self, request: web.Request, live: _Live) -> None:
        live.cut = True
        transport = request.transport
        if transport is None:
            return
        deadline = time.monotonic() + CUT_FLUSH_WAIT_S
        while transport.get_write_buffer_size() and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        transport.abort()

    def _reply(self, prompt: Prompt, behaviour: Behaviour) -> Reply:
        self._sequence += 1
        reply_id = f"fake{self._sequence:08d}"
        text = self.answer if self.answer is not None else f"Hello from {self.name} ({prompt.model})."
        if "echo:" in prompt.last_user_text:
            text = prompt.last_user_text.split("echo:", 1)[1].strip()
        if behaviour.answer is not None:
            text = behaviour.answer
        if behaviour.continue_answer:
            text = continued(text, prompt)
        calls: tuple[ToolCall, ...] = ()
        if behaviour.call_name is not None:
            if prompt.tool_result is None:
                calls = (ToolCall(f"{reply_id}_0", behaviour.call_name, behaviour.call_arguments),)
                text = ""
            elif behaviour.answer is None:
                text = f"Tool result: {' '.join(prompt.tool_result.split())[:TOOL_RESULT_ECHO_CHARS]}"
        elif behaviour.tool_calls:
            names = prompt.tool_names or (DEFAULT_TOOL_NAME,)
            calls = tuple(
                ToolCall(id=f"{reply_id}_{index}", name=names[index % len(names)])
                for index in range(behaviour.tool_calls)
            )
            if not behaviour.text_and_tool:
                text = ""
        # A real model with thinking on always thinks (and signs it) before it answers or calls.
        thinks = behaviour.reasoning or (behaviour.strict and prompt.thinking)
        reasoning = f"The user wants an answer from {prompt.model}." if thinks else ""
        finish: Literal["stop", "length", "tool"] = "tool" if calls else "stop"
        if not calls and prompt.max_tokens is not None and count_words(text) > prompt.max_tokens:
            text = " ".join(text.split()[: prompt.max_tokens])
            finish = "length"
        completion_words = count_words(text) + count_words(reasoning)
        completion_words += sum(count_words(call.arguments) for call in calls)
        return Reply(
            id=reply_id,
            model=prompt.model,
            created=int(time.time()),
            text=text,
            reasoning=reasoning,
            tool_calls=calls,
            finish=finish,
            prompt_tokens=max(
                prompt.words if behaviour.prompt_tokens is None else behaviour.prompt_tokens,
                behaviour.cache_read + behaviour.cache_write + behaviour.cache_write_1h,
            ),
            completion_tokens=completion_words,
            usage=behaviour.usage,
            include_usage=prompt.include_usage,
            chunks=behaviour.chunks,
            cache_read=behaviour.cache_read,
            cache_write=behaviour.cache_write,
            cache_write_1h=behaviour.cache_write_1h,
            signed_calls=behaviour.reasoning or behaviour.strict,
        )

    def _embedding_prompt(self, body: Mapping[str, Any], model: str) -> Prompt:
        words = count_words(text_of(body.get("input"))) if isinstance(body.get("input"), (str, list)) else 0
        return Prompt(model=model, words=max(1, words), last_user_text="", tool_names=(), stream=False)

    def _error(
        self, renderer: _Renderer, status: int, message: str, behaviour: Behaviour | None = None
    ) -> web.Response:
        headers = self._headers()
        if behaviour is not None and behaviour.retry_after_s is not None:
            headers["Retry-After"] = str(behaviour.retry_after_s)
        if behaviour is not None and behaviour.retry_after_ms is not None:
            headers["retry-after-ms"] = str(behaviour.retry_after_ms)
        return web.json_response(
            renderer.error_body(status, message), status=status, headers=headers, dumps=_dumps
        )

    def _headers(self) -> dict[str, str]:
        return {"x-fake-provider": self.name}

    def _note_cancel(self) -> None:
        self.cancelled += 1
        self.cancel_times.append(time.monotonic())
        self._changed()


class FakeProviderThread:
    """A `FakeProvider` on its own event loop in a daemon thread, for sync tests and the CLI.

    ``start()`` blocks until the port is bound (raising what the server raised); ``stop()`` blocks until
    it is closed. Reads and `reset` / `set_behaviour` run on the server's loop, so they are thread-safe.
    """

    def __init__(
        self,
        *,
        name: str = "fake",
        formats: Sequence[Format] = ALL_FORMATS,
        answer: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Sequence[str] = DEFAULT_MODELS,
    ) -> None:
        self.provider = FakeProvider(
            name=name, formats=formats, answer=answer, host=host, port=port, models=models
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return self.provider.base_url

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far."""
        return self._on_loop(lambda: list(self.provider.requests))

    @property
    def cancelled(self) -> int:
        return self._on_loop(lambda: self.provider.cancelled)

    @property
    def cancel_times(self) -> list[float]:
        return self._on_loop(lambda: list(self.provider.cancel_times))

    def calls(self, model: str | None = None) -> int:
        return self._on_loop(lambda: self.provider.calls(model))

    def reset(self) -> None:
        self._on_loop(self.provider.reset)

    def set_behaviour(self, model: str, spec: str) -> None:
        self._on_loop(lambda: self.provider.set_behaviour(model, spec))

    def wait_until(self, predicate: Callable[[FakeProvider], bool], timeout_s: float = 10.0) -> None:
        """`FakeProvider.wait_until` from another thread: blocks until ``predicate(provider)`` holds
        (evaluated on the server's loop); raises :class:`TimeoutError` after ``timeout_s`` seconds."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("FakeProviderThread is not started")
        fut = asyncio.run_coroutine_threadsafe(self.provider.wait_until(predicate, timeout_s), loop)
        fut.result(timeout_s + THREAD_TIMEOUT_S)

    def start(self) -> FakeProviderThread:
        """Start serving and return ``self`` (so ``FakeProviderThread(...).start()`` chains)."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failures: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.provider.start())
            except BaseException as exc:
                failures.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        thread = threading.Thread(target=serve, name=f"fake-provider-{self.provider.name}", daemon=True)
        thread.start()
        if not ready.wait(THREAD_TIMEOUT_S):
            raise TimeoutError(f"fake provider {self.provider.name!r} did not start")
        if failures:
            thread.join(THREAD_TIMEOUT_S)
            raise failures[0]
        self._loop, self._thread = loop, thread
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.provider.stop(), loop).result(THREAD_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(THREAD_TIMEOUT_S)
        self._loop = self._thread = None

    def __enter__(self) -> FakeProviderThread:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _on_loop(self, call: Callable[[], _T]) -> _T:
        loop = self._loop
        if loop is None:
            return call()

        async def run() -> _T:
            return call()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(THREAD_TIMEOUT_S)


async def _sleep_with_heartbeats(resp: web.StreamResponse, ms: int, heartbeat_ms: int) -> None:
    """Sleep ``ms``; with ``heartbeat_ms`` write an SSE comment every ``heartbeat_ms`` meanwhile (what
    llama.cpp, vLLM and proxies send while a slow model prepares its first token)."""
    if not heartbeat_ms:
        await asyncio.sleep(ms / 1000)
        return
    left = ms
    while left > 0:
        step = min(heartbeat_ms, left)
        await asyncio.sleep(step / 1000)
        left -= step
        if left > 0:
            await resp.write(b": keep-alive\n\n")


def _frame(event: Event, stamp: bool) -> bytes:
    if isinstance(event.data, str):
        payload = event.data.encode()
    else:
        data = dict(event.data)
        if stamp:
            data["x_stamp_ns"] = time.time_ns()
        payload = orjson.dumps(data)
    head = f"event: {event.name}\n".encode() if event.name else b""
    return head + b"data: " + payload + b"\n\n"


def _sent_key(request: web.Request) -> str:
    """The API key a request carried, in any of the three formats' places ("" when none)."""
    bearer = request.headers.get("Authorization", "")
    if bearer.lower().startswith("bearer "):
        return bearer[7:].strip()
    return (
        request.headers.get("x-api-key")
        or request.headers.get("x-goog-api-key")
        or request.query.get("key", "")
    )


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


async def _forever() -> NoReturn:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")
