"""The simulated upstream: an :class:`~omniroute.providers.upstream.UpstreamClient` that answers from
the fleet model on the gateway's virtual clock instead of opening sockets.

The gateway's engine hands it the real upstream request its adapter built; the connection is read
back from the simulator's secret in the headers and the model from the body (or, for Gemini, the URL).
What the simulated provider does on that attempt is a pure function of the fleet, the run's virtual
time and counter-based random draws (:func:`uniform` of seed, request index, target and attempt),
so every strategy meets the same fleet and the oracle knows every draw in advance. Answers are
rendered in the provider's own wire format by the fake providers' renderers
(:mod:`omniroute.testing`), so the gateway parses them exactly as it would a real answer.
"""

from __future__ import annotations

import contextvars
import math
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from omniroute.clock import FakeClock
from omniroute.errors import ConnectionFailed, StreamBroken, Timeout
from omniroute.providers.upstream import AttemptTimeouts, UpstreamClient, UpstreamRequest, UpstreamResponse
from omniroute.simulate.fleet import SIM_KEY_PREFIX, Fleet, Target
from omniroute.simulate.workload import TraceRecord
from omniroute.testing._anthropic import AnthropicRenderer
from omniroute.testing._gemini import GeminiRenderer
from omniroute.testing._openai import OpenAIRenderer
from omniroute.testing.faults import Reply

_M64 = (1 << 64) - 1
_RENDERERS: dict[str, Any] = {
    "openai": OpenAIRenderer(),
    "anthropic": AnthropicRenderer(),
    "gemini": GeminiRenderer(),
}
_JSON = {"content-type": "application/json"}
_SSE = {"content-type": "text/event-stream"}


def _mix(x: int) -> int:
    """splitmix64's finaliser (Steele, Lea & Flood 2014): a well-spread 64-bit hash of ``x``."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def uniform(seed: int, request: int, target: int, attempt: int, k: int) -> float:
    """A uniform draw in (0, 1) fixed by its arguments (a counter-based generator): draw ``k`` of
    ``attempt`` on ``target`` for request ``request`` in a run seeded ``seed``."""
    h = _mix((seed & _M64) ^ _mix(((request * 1_000_003 + target) * 1_009 + attempt) * 31 + k))
    return ((h >> 11) + 0.5) / 9007199254740992.0


def target_id(connection: str, model: str) -> int:
    """A stable number for a connection/model pair (CRC-32 of ``connection/model``)."""
    return zlib.crc32(f"{connection}/{model}".encode())


Kind = Literal["ok", "rate_limit", "server_error", "timeout", "connection", "quota"]


@dataclass(frozen=True, slots=True)
class Draw:
    """What one attempt does: ``kind``; for ``ok`` the time to first token and the generation time
    (seconds) and whether a stream is cut after its first token; ``retry_after_s`` for a 429."""

    kind: Kind
    ttft_s: float = 0.0
    gen_s: float = 0.0
    cut: bool = False
    retry_after_s: float = 0.0


@dataclass(slots=True)
class TargetRuntime:
    """One connection/model of the fleet during a run: its :class:`Target` and its quota window."""

    target: Target
    tid: int
    provider: str
    connection: str
    model: str
    window: int = -1
    used_requests: int = 0
    used_tokens: int = 0

    def draw(self, seed: int, request: int, attempt: int, now_s: float, completion_tokens: int) -> Draw:
        """The attempt's behaviour at ``now_s`` (seconds from the start of the run), quota aside."""
        t = self.target
        for o in t.outages:
            if o.start_s <= now_s < o.start_s + o.duration_s:
                kind: Kind = o.kind
                return Draw(kind, ttft_s=0.02, retry_after_s=o.retry_after_s)
        factor, extra = 1.0, 0.0
        d = t.degradation
        if d is not None and now_s > d.start_s:
            x = min((now_s - d.start_s) / d.ramp_s, 1.0)
            factor, extra = 1.0 + (d.latency_factor - 1.0) * x, d.server_error * x
        e = t.errors
        u = uniform(seed, request, self.tid, attempt, 0)
        if u < e.rate_limit:
            return Draw("rate_limit", ttft_s=0.02, retry_after_s=e.retry_after_s)
        u -= e.rate_limit
        if u < e.server_error + extra:
            return Draw("server_error", ttft_s=0.05 * factor)
        u -= e.server_error + extra
        if u < e.timeout:
            return Draw("timeout")
        ttft = t.ttft_ms.draw(uniform(seed, request, self.tid, attempt, 1)) / 1000 * factor
        tps = t.tokens_per_s.draw(uniform(seed, request, self.tid, attempt, 2)) / factor
        cut = uniform(seed, request, self.tid, attempt, 3) < e.stream_cut
        return Draw("ok", ttft_s=ttft, gen_s=completion_tokens / tps, cut=cut)

    def quota_wait(self, now_s: float, tokens: int, *, take: bool) -> float | None:
        """Seconds until the quota window resets when this attempt is over quota, else ``None``
        (and, with ``take``, the attempt's request and tokens are counted)."""
        q = self.target.quota
        if q is None:
            return None
        w = math.floor(now_s / q.window_s)
        if w != self.window:
            self.window, self.used_requests, self.used_tokens = w, 0, 0
        if (q.requests is not None and self.used_requests >= q.requests) or (
            q.tokens is not None and self.used_tokens >= q.tokens
        ):
            return max((w + 1) * q.window_s - now_s, 0.001)
        if take:
            self.used_requests += 1
            self.used_tokens += tokens
        return None

    def quota_headers(self, now_s: float) -> dict[str, str]:
        """OpenAI-style ``x-ratelimit-*`` headers for the current window (empty without a quota)."""
        q = self.target.quota
        if q is None:
            return {}
        reset = f"{max((self.window + 1) * q.window_s - now_s, 0.0):.3f}s"
        h: dict[str, str] = {}
        if q.requests is not None:
            h["x-ratelimit-limit-requests"] = str(q.requests)
            h["x-ratelimit-remaining-requests"] = str(max(q.requests - self.used_requests, 0))
            h["x-ratelimit-reset-requests"] = reset
        if q.tokens is not None:
            h["x-ratelimit-limit-tokens"] = str(q.tokens)
            h["x-ratelimit-remaining-tokens"] = str(max(q.tokens - self.used_tokens, 0))
            h["x-ratelimit-reset-tokens"] = reset
        return h

    def price_at(
        self, now_s: float, input_price: float | None, output_price: float | None
    ) -> tuple[float, float]:
        """The billed prices (USD per 1M tokens) at ``now_s``: the last price change before it, else
        the catalog/config prices given (0 when unknown)."""
        pin, pout = input_price or 0.0, output_price or 0.0
        for c in self.target.price_changes:
            if c.at_s <= now_s:
                pin, pout = c.input_price, c.output_price
        return pin, pout


@dataclass(slots=True)
class SimCall:
    """The request an attempt belongs to (set in a context variable by the runner): its index in
    the workload, its record, and how many attempts each target has had."""

    index: int
    record: TraceRecord
    tries: dict[int, int] = field(default_factory=dict)


CURRENT: contextvars.ContextVar[SimCall] = contextvars.ContextVar("omniroute_sim_call")


class SimResponse(UpstreamResponse):
    """A simulated response: a whole ``body``, or stream events in two batches — up to the first
    content event at once, the rest after ``gen_s`` seconds on the clock (a ``cut`` stream raises
    :class:`StreamBroken` instead of sending them)."""

    __slots__ = ("_body", "_clock", "_cut", "_first", "_gen_s", "_rest")

    def __init__(
        self,
        status: int,
        headers: dict[str, str],
        provider: str,
        clock: FakeClock,
        *,
        body: bytes = b"",
        first: list[tuple[str, bytes]] | None = None,
        rest: list[tuple[str, bytes]] | None = None,
        gen_s: float = 0.0,
        cut: bool = False,
    ) -> None:
        self.status = status
        self.headers = headers
        self.provider = provider
        self._clock = clock
        self._body = body
        self._first = first or []
        self._rest = rest or []
        self._gen_s = gen_s
        self._cut = cut

    async def read(self) -> bytes:
        return self._body

    async def read_now(self, timer: Any = None, deadline: float = 0.0) -> bytes:
        return self._body

    async def event_batches(
        self, first_timeout_s: float | None = None
    ) -> AsyncIterator[list[tuple[str, bytes]]]:
        yield self._first
        await self._clock.sleep(self._gen_s)
        if self._cut:
            raise StreamBroken(f"{self.provider}: stream connection lost (simulated)", provider=self.provider)
        yield self._rest

    def close(self) -> None:
        return None


class SimulatedUpstreamClient(UpstreamClient):
    """Answers every attempt from ``fleet`` on ``clock`` (a :class:`FakeClock` the runner drives);
    ``origin`` is the clock's monotonic reading at the start of the run, ``seed`` fixes the draws."""

    def __init__(
        self, fleet: Fleet, clock: FakeClock, *, seed: int, origin: float, timeouts: AttemptTimeouts
    ) -> None:
        super().__init__(timeouts)
        self.fleet = fleet
        self.clock = clock
        self.seed = seed
        self.origin = origin
        self.targets: dict[tuple[str, str], TargetRuntime] = {}

    def runtime(self, provider: str, connection: str, model: str) -> TargetRuntime | None:
        """The run's state of one connection/model (``None`` when the fleet does not model it)."""
        key = (connection, model)
        rt = self.targets.get(key)
        if rt is None:
            t = self.fleet.target_for(provider, connection, model)
            if t is None:
                return None
            rt = self.targets[key] = TargetRuntime(
                t, target_id(connection, model), provider, connection, model
            )
        return rt

    async def send(
        self, req: UpstreamRequest, *, provider: str, timeouts: AttemptTimeouts | None = None
    ) -> UpstreamResponse:
        return await self._answer(req, provider, timeouts or self.timeouts, stream=True)

    async def fetch(
        self, req: UpstreamRequest, *, provider: str, timeouts: AttemptTimeouts | None = None
    ) -> tuple[UpstreamResponse, bytes]:
        resp = await self._answer(req, provider, timeouts or self.timeouts, stream=False)
        return resp, resp._body

    async def get(self, url: str, headers: dict[str, str], *, timeout_s: float = 5.0) -> tuple[int, bytes]:
        raise ConnectionFailed(f"GET {url}: the simulator has no network")

    async def close(self) -> None:
        return None

    async def _answer(
        self, req: UpstreamRequest, provider: str, t: AttemptTimeouts, *, stream: bool
    ) -> SimResponse:
        call = CURRENT.get()
        connection, model = _identify(req)
        fmt = self.fleet.formats.get(provider, "openai")
        renderer = _RENDERERS.get(fmt, _RENDERERS["openai"])
        rt = self.runtime(provider, connection, model)
        if rt is None:
            return self._error(renderer, provider, 404, f"model {model} is not in the simulated fleet", {})
        attempt = call.tries.get(rt.tid, 0)
        call.tries[rt.tid] = attempt + 1
        now = self.clock.monotonic() - self.origin
        rec = call.record
        d = rt.draw(self.seed, call.index, attempt, now, rec.completion_tokens)
        if d.kind == "ok":
            wait = rt.quota_wait(now, rec.prompt_tokens + rec.completion_tokens, take=True)
            if wait is not None:
                d = Draw("quota", ttft_s=0.02, retry_after_s=wait)
        if d.kind in ("timeout", "connection") or d.ttft_s > t.ttft_s:
            return await self._fail(d, provider, t)
        # a whole answer arrives after first token and generation: one wait on the clock, not two
        await self.clock.sleep(d.ttft_s if stream or d.kind != "ok" else d.ttft_s + d.gen_s)
        if d.kind != "ok":
            status = 503 if d.kind == "server_error" else 429
            headers = {"retry-after": f"{math.ceil(d.retry_after_s)}"} if status == 429 else {}
            if d.kind == "quota":
                headers.update(rt.quota_headers(now))
            return self._error(renderer, provider, status, f"simulated {d.kind}", headers)
        headers = rt.quota_headers(now)
        if not stream:
            if d.cut:
                raise StreamBroken(
                    f"{provider}: connection lost while reading the body (simulated)", provider=provider
                )
            body = _answer_body(fmt, renderer, call.index, model, int(self.clock.time()), rec)
            return SimResponse(200, {**_JSON, **headers}, provider, self.clock, body=body)
        first, rest = _answer_events(fmt, renderer, call.index, model, int(self.clock.time()), rec)
        return SimResponse(
            200, {**_SSE, **headers}, provider, self.clock, first=first, rest=rest, gen_s=d.gen_s, cut=d.cut
        )

    async def _fail(self, d: Draw, provider: str, t: AttemptTimeouts) -> SimResponse:
        if d.kind == "connection":
            await self.clock.sleep(0.01)
            raise ConnectionFailed(f"{provider}: connection refused (simulated outage)", provider=provider)
        await self.clock.sleep(t.ttft_s)
        raise Timeout(
            f"{provider}: no response headers within {t.ttft_s:g}s (TTFT timeout)", provider=provider
        )

    def _error(
        self, renderer: Any, provider: str, status: int, message: str, headers: dict[str, str]
    ) -> SimResponse:
        body = orjson.dumps(renderer.error_body(status, message))
        return SimResponse(status, {**_JSON, **headers}, provider, self.clock, body=body)


def _reply(index: int, model: str, created: int, rec: TraceRecord) -> Reply:
    return Reply(
        id=f"sim{index}",
        model=model,
        created=created,
        text="ok",
        reasoning="",
        tool_calls=(),
        finish="stop",
        prompt_tokens=rec.prompt_tokens,
        completion_tokens=rec.completion_tokens,
        usage="late",
        include_usage=True,
        chunks=1,
    )


def _usage_json(rec: TraceRecord) -> str:
    p, c = rec.prompt_tokens, rec.completion_tokens
    return f'{{"prompt_tokens":{p},"completion_tokens":{c},"total_tokens":{p + c}}}'


def _answer_body(fmt: str, renderer: Any, index: int, model: str, created: int, rec: TraceRecord) -> bytes:
    """A whole answer ("ok") carrying the record's token counts as usage. OpenAI's shape is written
    directly (the simulator's hot path); the other formats go through the fake providers' renderers."""
    if fmt != "openai":
        return orjson.dumps(renderer.completion(_reply(index, model, created, rec)))
    head = (
        f'{{"id":"chatcmpl-sim{index}","object":"chat.completion","created":{created},"model":{_js(model)},'
    )
    return (
        head + '"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],'
        f'"usage":{_usage_json(rec)}}}'
    ).encode()


def _answer_events(
    fmt: str, renderer: Any, index: int, model: str, created: int, rec: TraceRecord
) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
    """A streamed answer as SSE ``(event, data)`` pairs: those up to the first content event, and the
    rest (the finish, the usage, the end marker)."""
    if fmt != "openai":
        rendered = renderer.stream(_reply(index, model, created, rec))
        events = [
            (ev.name or "", ev.data.encode() if isinstance(ev.data, str) else orjson.dumps(ev.data))
            for ev in rendered
        ]
        cut = next((i for i, ev in enumerate(rendered) if ev.content), len(rendered) - 1) + 1
        return events[:cut], events[cut:]
    head = (
        f'{{"id":"chatcmpl-sim{index}","object":"chat.completion.chunk",'
        f'"created":{created},"model":{_js(model)},'
    )
    return [
        (
            "",
            (
                head
                + '"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}'
            ).encode(),
        )
    ], [
        ("", (head + '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}').encode()),
        ("", (head + f'"choices":[],"usage":{_usage_json(rec)}}}').encode()),
        ("", b"[DONE]"),
    ]


def _js(text: str) -> str:
    return orjson.dumps(text).decode()


def _identify(req: UpstreamRequest) -> tuple[str, str]:
    """The connection (from the simulator's secret in any header) and model (body ``model``, else
    the Gemini URL's ``models/<id>:``) of an upstream request."""
    connection = ""
    for v in req.headers.values():
        i = v.find(SIM_KEY_PREFIX)
        if i >= 0:
            connection = v[i + len(SIM_KEY_PREFIX) :]
            break
    if not connection and SIM_KEY_PREFIX in req.url:
        connection = req.url.split(SIM_KEY_PREFIX, 1)[1].split("&", 1)[0]
    model = ""
    body = req.body
    i = body.find(b'"model":"')
    if i >= 0:  # the adapters' compact JSON; fall back to parsing anything else
        j = body.find(b'"', i + 9)
        model = body[i + 9 : j].decode()
        if "\\" in model:
            model = str(orjson.loads(body).get("model") or "")
    elif b'"model"' in body:
        model = str(orjson.loads(body).get("model") or "")
    if not model and "/models/" in req.url:
        model = req.url.split("/models/", 1)[1].split(":", 1)[0]
    return connection, model


__all__ = [
    "CURRENT",
    "Draw",
    "SimCall",
    "SimResponse",
    "SimulatedUpstreamClient",
    "TargetRuntime",
    "target_id",
    "uniform",
]
