"""The attempt loop (SPEC §5, RESIL-6, RESIL-7, RESIL-9): ordered candidates → ladder → upstream.

``Engine.run`` takes a canonical request and an ordered candidate list (built by the plan's strategy),
filters it through the resilience ladder, and makes attempts until one succeeds, a non-retryable error
is returned to the client as is, or the budget (``max_attempts``, total deadline) is spent, in which
case one clean exhaustion error is raised (RESIL-7). Streams are committed to the client only once the
first content-bearing event has arrived (RESIL-9); before that any failure falls through invisibly.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from omniroute.clock import Clock
from omniroute.errors import (
    AttemptRecord,
    ConnectionFailed,
    ContextOverflow,
    Diagnostics,
    ExclusionRecord,
    ExhaustedError,
    MalformedEvent,
    RateLimited,
    ResponseTooLarge,
    ServerError,
    StreamBroken,
    Timeout,
    UpstreamError,
)
from omniroute.providers.upstream import AttemptTimeouts, UpstreamClient, UpstreamRequest, UpstreamResponse
from omniroute.resilience.attribution import FaultAttribution
from omniroute.resilience.ladder import LadderContext, Resilience
from omniroute.resilience.redact import redact_error
from omniroute.routing.decision import Decision
from omniroute.routing.rescue import attach_rescue
from omniroute.values import Candidate, ChatRequest, Usage
from omniroute.wire.base import ProviderAdapter, StreamParser


@dataclass(frozen=True, slots=True)
class RetrySettings:
    """RESIL-6 budgets: transient retries per target, attempts per request, total deadline (s), and
    the longest upstream wait hint (s) waited out in-request before retrying the same target
    (config ``resilience.retries.max_hint_wait_s``), and whether a stream that fails after commit is
    rescued by another attempt (config ``resilience.stream_rescue``, :mod:`omniroute.routing.rescue`)."""

    per_target: int = 1
    max_attempts: int = 10
    total_s: float = 600.0
    max_hint_wait_s: float = 3.0
    stream_rescue: bool = True


class UpstreamCall(Protocol):
    """A non-chat upstream call made through the same attempt loop as chat (embeddings): ``build`` the
    upstream request for one candidate, ``parse`` its 2xx body into the JSON object returned to the
    client (raising an :class:`UpstreamError` when it is not one). Never streamed; a 4xx/5xx answer
    is classified by the candidate's format adapter, as for chat."""

    def build(self, cand: Candidate, req: ChatRequest) -> UpstreamRequest: ...

    def parse(self, body: bytes, cand: Candidate) -> dict[str, Any]: ...


@dataclass
class Outcome:
    """A successful non-streaming result: canonical ``chat.completion`` and who served it."""

    response: dict[str, Any]
    candidate: Candidate
    usage: Usage | None
    upstream_ms: float
    ttft_ms: float | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamOutcome:
    """A committed stream: ``first`` chunks already read (incl. the first content chunk) and the
    live remainder: ``rest``, the events that came in the same read after the commit point, then
    ``events``, the upstream's SSE events, one list per socket read. Iterate
    :meth:`batches` (or :meth:`chunks`); call :meth:`close` when done (idempotent).

    ``skipped`` counts the malformed events dropped after commit. ``finished`` is True once nothing
    more will be read from the upstream (the done marker or the end of the body was seen): a writer
    may then send what it holds together with the end of the stream instead of flushing first
    (PERF-4 allows it: nothing is waiting on the network).

    Stream rescue (RESIL-9, :mod:`omniroute.routing.rescue`): with ``rescue`` set, a failure after
    commit asks it for a continuation attempt; it returns a new committed :class:`StreamOutcome`
    (whose upstream, parser and candidate replace this one's, its chunks passed through ``filter``)
    or ``None`` to end with the error. ``sent`` records what the client was sent; ``prior_usage``
    sums the usage of the attempts before the current one; ``settled`` is True while the current
    attempt's failure is already recorded in the ladder and the decision."""

    candidate: Candidate
    first: list[dict[str, Any]]
    resp: UpstreamResponse
    parser: StreamParser
    events: AsyncIterator[list[tuple[str, bytes]]]
    upstream_ms: float
    ttft_ms: float
    finished: bool = False
    saw_finish: bool = False
    usage: Usage | None = None
    on_done: list[Callable[[StreamOutcome, UpstreamError | None], Any]] = field(default_factory=list)
    release: Callable[[], Awaitable[Any]] | None = None
    completion_chars: int = 0
    rest: list[tuple[str, bytes]] = field(default_factory=list)
    skipped: int = 0
    rescue: Callable[[StreamOutcome, UpstreamError], Awaitable[StreamOutcome | None]] | None = None
    sent: Any = None  # rescue.Sent: what the client received (text, reasoning, tool calls)
    filter: Any = None  # rescue.Continuation: overlap removal on a rescuing attempt's chunks
    prior_usage: Usage | None = None
    settled: bool = False

    async def finalize(self, err: UpstreamError | None, *, abandoned: bool = False) -> None:
        """Close the upstream, free the in-flight slot and, unless the client abandoned the stream,
        record its success or failure in the ladder (RESIL-9). Idempotent."""
        self.close()
        release, self.release = self.release, None
        if release is not None:
            await release()
        if abandoned:
            self.on_done.clear()
            return
        callbacks, self.on_done = self.on_done, []
        for cb in callbacks:
            await cb(self, err)

    async def batches(self) -> AsyncIterator[list[dict[str, Any]]]:
        """Yield canonical chunks, one list per upstream read (``first`` and the rest of its read are
        the first list). After commit an upstream failure is raised once the chunks before it are
        yielded: :class:`StreamBroken`/:class:`Timeout`/the classified error (RESIL-9: the caller ends
        the client stream with an error, never as complete) — unless ``rescue`` continues the answer
        with another attempt, whose chunks then follow seamlessly."""
        out: list[dict[str, Any]] = []
        self._take(self.first, out)
        events = self.rest
        while True:
            err: UpstreamError | None = None
            if not self.finished:
                try:
                    self._feed(events, out)
                except UpstreamError as exc:
                    err = redact_error(exc, self.candidate.connection.secret)
                if err is None and self.parser.done:
                    self.finished = True
                    try:
                        out.extend(self._finish())
                    except UpstreamError as exc:  # a rescue that restarted the answer
                        err = exc
            if self.finished and err is None and not self.saw_finish:
                err = StreamBroken(
                    f"{self.candidate.provider.id}: stream ended before a finish reason (truncated answer)",
                    provider=self.candidate.provider.id,
                )
            if out:
                yield out
                out = []
            if err is not None:
                events = await self._recover(err, out)
                continue
            if self.finished:
                break
            try:
                events = await anext(self.events)
            except StopAsyncIteration:
                self.finished = True
                events = []
                try:
                    out.extend(self._finish())
                except UpstreamError as exc:  # a rescue that restarted the answer
                    events = await self._recover(exc, out)
            except UpstreamError as exc:
                events = await self._recover(redact_error(exc, self.candidate.connection.secret), out)

    async def _recover(self, err: UpstreamError, out: list[dict[str, Any]]) -> list[tuple[str, bytes]]:
        """Continue after ``err`` with a rescuing attempt: its first chunks go to ``out`` and the
        rest of its first read is returned; raises ``err`` when there is no rescue."""
        while True:
            if self.rescue is None or self.saw_finish:
                raise err
            new = await self.rescue(self, err)
            if new is None:
                raise err
            self.resp, self.parser, self.events = new.resp, new.parser, new.events
            self.candidate, self.release, self.upstream_ms = new.candidate, new.release, new.upstream_ms
            self.finished, self.settled = new.finished, False
            try:
                self._take(new.first, out)
            except UpstreamError as exc:  # the rescue restarted the answer: it failed too
                err = exc
                continue
            return new.rest

    def _take(self, chunks: list[dict[str, Any]], out: list[dict[str, Any]]) -> None:
        if self.filter is not None:
            chunks = self.filter.apply(chunks)
        for ch in chunks:
            self._observe(ch)
            out.append(ch)

    def _feed(self, events: list[tuple[str, bytes]], out: list[dict[str, Any]]) -> None:
        """Parse ``events`` into ``out``; a malformed event is skipped and counted in ``skipped``
        (RESIL-9: data that is not a JSON object carries no content the client could miss)."""
        parser, observe, filter_ = self.parser, self._observe, self.filter
        for ev, data in events:
            try:
                chunks = parser.feed(ev, data)
            except MalformedEvent:
                self.skipped += 1
                continue
            if filter_ is not None:
                chunks = filter_.apply(chunks)
            for ch in chunks:
                observe(ch)
                out.append(ch)
            if parser.done:
                return

    async def chunks(self) -> AsyncIterator[dict[str, Any]]:
        """:meth:`batches`, one chunk at a time."""
        async for batch in self.batches():
            for ch in batch:
                yield ch

    def _finish(self) -> list[dict[str, Any]]:
        out = self.parser.finish()
        if self.filter is not None:
            out = self.filter.apply(out)
        for ch in out:
            self._observe(ch)
        return out

    def _observe(self, ch: dict[str, Any]) -> None:
        u = ch.get("usage")
        if u:
            got = Usage.from_openai(u)
            self.usage = got if self.prior_usage is None or got is None else self.prior_usage + got
        if self.sent is not None:
            self.sent.observe(ch)
        for c in ch.get("choices") or ():
            if c.get("finish_reason"):
                self.saw_finish = True
            d = c.get("delta")
            if d:
                self.completion_chars += len(d.get("content") or "") + len(d.get("reasoning_content") or "")
                for tc in d.get("tool_calls") or ():
                    self.completion_chars += len((tc.get("function") or {}).get("arguments") or "")

    def final_usage(self, prompt_tokens_estimate: int) -> Usage:
        """The upstream's usage, or an estimate (prompt estimate, completion ≈ chars / 4) when the
        upstream sent none, so spend is recorded either way (RESIL-9); after a rescue, the sum over
        every attempt."""
        if self.usage is not None:
            return self.usage
        est = Usage(prompt_tokens=prompt_tokens_estimate, completion_tokens=(self.completion_chars + 3) // 4)
        return est if self.prior_usage is None else self.prior_usage + est

    def close(self) -> None:
        self.resp.close()


def is_content_chunk(ch: Mapping[str, Any]) -> bool:
    """True for a chunk that carries text, a tool call, reasoning or a finish (RESIL-9 commit point)."""
    for c in ch.get("choices") or ():
        if c.get("finish_reason"):
            return True
        d = c.get("delta") or {}
        if d.get("content") or d.get("tool_calls") or d.get("reasoning_content") or d.get("reasoning"):
            return True
    return False


_TRANSIENT = (ServerError, ConnectionFailed, StreamBroken)
# An upstream 401/403/407 is about the gateway's own connection credentials, not the client's key:
# passing it on would make SDKs raise an authentication error at the client (RESIL-7: else 503).
_GATEWAY_CREDS = frozenset({401, 403, 407})


@dataclass(slots=True)
class Budget:
    """RESIL-6 budgets of one request: attempt cap, transient retries per target, total deadline
    (``clock.monotonic()`` seconds), longest hint waited out in-request (seconds)."""

    limit: int
    per_target: int
    deadline: float
    clock: Clock
    max_hint_wait_s: float
    faults: FaultAttribution = field(default_factory=FaultAttribution)

    def spent(self, attempts: int) -> bool:
        return attempts >= self.limit or self.clock.monotonic() >= self.deadline

    def retry_wait(self, err: UpstreamError, tries: int, attempts: int) -> float | None:
        """Seconds to wait before retrying the same target, or ``None`` to move on.

        Transient failures without a hint retry after a short backoff. A retryable error whose wait
        hint is at most ``max_hint_wait_s`` and fits the remaining deadline (with a second to spare
        for the retry) is waited out on any candidate, so an operator's preferred target is kept
        through a short rate limit; a longer hint moves to the next target at once (its connection
        is cooling down anyway)."""
        if tries > self.per_target or self.spent(attempts):
            return None
        hint = err.retry_after_s
        if hint is None:
            return min(0.05 * tries, 0.5) if isinstance(err, _TRANSIENT) else None
        remaining = self.deadline - self.clock.monotonic()
        return hint if hint <= min(self.max_hint_wait_s, remaining - 1.0) else None


class Engine:
    """Runs attempts for one request over an ordered candidate list (RESIL-6).

    ``adapters`` maps a wire format (``openai``, ``anthropic``, ``gemini``) to its adapter; ``clock``
    (the gateway's, shared with the ladder) times the budget, the retry waits and the latencies. The
    upstream client's socket timeouts, and the TTFT timer around the first stream events, run on the
    event loop's real time: they guard a real socket. ``rejects_prefill`` remembers the targets that
    refused a stream rescue's assistant prefill (:mod:`omniroute.routing.rescue`).
    """

    def __init__(
        self,
        *,
        clock: Clock,
        client: UpstreamClient,
        resilience: Resilience,
        adapters: Mapping[str, ProviderAdapter],
        retries: RetrySettings,
        timeouts: AttemptTimeouts,
    ) -> None:
        self.clock = clock
        self.client = client
        self.resilience = resilience
        self.adapters = adapters
        self.retries = retries
        self.timeouts = timeouts
        self.rejects_prefill: set[str] = set()  # candidate keys that refused a rescue's prefill

    async def run(
        self,
        req: ChatRequest,
        candidates: Sequence[Candidate],
        decision: Decision,
        *,
        max_attempts: int | None = None,
        per_target: int | None = None,
        on_success: Callable[[Candidate], Any] | None = None,
        prepare: Callable[[Candidate, ChatRequest], ChatRequest] | None = None,
        call: UpstreamCall | None = None,
    ) -> Outcome | StreamOutcome:
        """Try ``candidates`` in order; return the first success. ``prepare(cand, req)`` may return an
        adapted request for one candidate (the original is kept for the others). ``call`` makes each
        attempt a non-chat call (an :class:`Outcome` holding its parsed JSON) instead of a chat
        completion; budgets, ladder, in-flight counts and probe slots are the same.

        Raises the upstream error itself when it must not fall back (ordinary 400, content filter),
        ``asyncio.CancelledError`` when the client went away (the attempt is recorded as 499), else
        :class:`ExhaustedError` (RESIL-7).
        """
        clock = self.clock
        ctx = LadderContext.for_request(req.body, now=clock.time())
        resilience = self.resilience
        result = await resilience.filter(candidates, ctx)
        survivors = result.survivors  # a fresh list, only read here
        if result.exclusions:
            decision.exclusions.extend(result.exclusions)
        retries = self.retries
        budget = Budget(
            retries.max_attempts if max_attempts is None else max_attempts,
            retries.per_target if per_target is None else per_target,
            clock.monotonic() + retries.total_s,
            clock,
            retries.max_hint_wait_s,
        )
        errors: list[UpstreamError] = []
        try:
            out = await self._run_survivors(
                survivors, req, decision, ctx, budget, errors, on_success, prepare, call
            )
        finally:
            await self._count_held(budget)
        if out is not None:
            return out
        raise await self.exhausted(candidates, errors, decision)

    async def _count_held(self, budget: Budget) -> None:
        """Count the request's held 500s against their breakers unless the request was shown at fault
        (:mod:`omniroute.resilience.attribution`)."""
        for cand, err in budget.faults.release():
            await self.resilience.count_held(cand, err)

    async def _run_survivors(
        self,
        survivors: list[Candidate],
        req: ChatRequest,
        decision: Decision,
        ctx: LadderContext,
        budget: Budget,
        errors: list[UpstreamError],
        on_success: Callable[[Candidate], Any] | None,
        prepare: Callable[[Candidate, ChatRequest], ChatRequest] | None,
        call: UpstreamCall | None,
    ) -> Outcome | StreamOutcome | None:
        """The attempt loop of :meth:`run` over the ladder's survivors; ``None`` when none served."""
        resilience = self.resilience
        lastidx = len(survivors) - 1
        for idx, cand in enumerate(survivors):
            if budget.spent(len(decision.attempts)):
                await self._release(survivors[idx:])
                break
            if errors or ctx.min_context:  # otherwise _precheck has nothing to check
                skip = await self._precheck(cand, ctx, bool(errors))
                if skip is not None:
                    decision.exclusions.append(skip)
                    continue
            try:
                cand_req = prepare(cand, req) if prepare is not None else req
                out = await self.try_candidate(cand, cand_req, decision, ctx, budget, errors, call)
            except BaseException:
                await self._release(survivors[idx + 1 :])
                raise
            if out is None:
                continue
            if idx < lastidx:
                await self._release(survivors[idx + 1 :])
            decision.served = cand.key
            if isinstance(out, Outcome):
                await resilience.record_success(cand, out.upstream_ms, None, out.headers)
                if on_success is not None:
                    await _call_hook(on_success, cand)
            else:
                out.on_done.append(self._stream_done_hook(on_success, decision))
                if self.retries.stream_rescue:
                    attach_rescue(self, out, req, survivors[idx:], decision, ctx, budget, errors, prepare)
            return out
        return None

    async def _precheck(
        self, cand: Candidate, ctx: LadderContext, failed_before: bool
    ) -> ExclusionRecord | None:
        """Skip a survivor whose window is known too small after an overflow, or whose state changed
        during this request (e.g. its connection just cooled down)."""
        window = cand.model.context_window
        if ctx.min_context and window and window < ctx.min_context:
            await self.resilience.release_probe(cand)
            return ExclusionRecord(
                cand.provider.id,
                cand.model.id,
                f"context window {window} too small: an earlier target overflowed "
                f"(need > {ctx.min_context - 1} tokens)",
                cand.connection.id,
            )
        if failed_before:
            return await self.resilience.recheck(cand, self.clock.time())
        return None

    async def try_candidate(
        self,
        cand: Candidate,
        req: ChatRequest,
        decision: Decision,
        ctx: LadderContext,
        budget: Budget,
        errors: list[UpstreamError],
        call: UpstreamCall | None = None,
    ) -> Outcome | StreamOutcome | None:
        """Attempts on one candidate with its transient retries; ``None`` moves to the next one."""
        state = self.resilience.state
        clock = self.clock
        tries = 0
        while True:
            tries += 1
            t0 = clock.monotonic()
            await state.incr_inflight(cand.connection.id)
            try:
                out = await self._attempt(cand, req, budget.deadline, call)
            except UpstreamError as err:
                redact_error(err, cand.connection.secret)  # before any sink sees the upstream's text
                await state.decr_inflight(cand.connection.id)
                ms = (clock.monotonic() - t0) * 1000
                decision.attempts.append(
                    AttemptRecord(
                        cand.provider.id,
                        cand.model.id,
                        cand.connection.id,
                        err.upstream_status or err.status,
                        err.message,
                        ms,
                        t0,
                    )
                )
                held = budget.faults.hold(cand, err)
                if not held:
                    await self._count_held(budget)
                await self.resilience.record_failure(cand, err, ms, count_breaker=not held)
                errors.append(err)
                if not err.retryable:
                    raise
                if isinstance(err, ContextOverflow):
                    ctx.note_context_overflow(cand.model.context_window or ctx.estimated_prompt_tokens)
                    return None
                wait = budget.retry_wait(err, tries, len(decision.attempts))
                if wait is None:
                    return None
                await clock.sleep(wait)
                if await self.resilience.recheck(cand, clock.time()) is not None:
                    return None
                continue
            except asyncio.CancelledError:
                await state.decr_inflight(cand.connection.id)
                decision.attempts.append(
                    AttemptRecord(
                        cand.provider.id,
                        cand.model.id,
                        cand.connection.id,
                        499,
                        "client disconnected",
                        (clock.monotonic() - t0) * 1000,
                        t0,
                    )
                )
                await self.resilience.release_probe(cand)
                raise
            ms = (clock.monotonic() - t0) * 1000
            decision.attempts.append(
                AttemptRecord(cand.provider.id, cand.model.id, cand.connection.id, 200, "ok", ms, t0)
            )
            if isinstance(out, Outcome):
                await state.decr_inflight(cand.connection.id)
            else:
                out.release = lambda: state.decr_inflight(cand.connection.id)
            return out

    def _stream_done_hook(
        self, on_success: Callable[[Candidate], Any] | None, decision: Decision
    ) -> Callable[[StreamOutcome, UpstreamError | None], Any]:
        async def done(so: StreamOutcome, err: UpstreamError | None) -> None:
            if so.skipped:
                decision.extra["malformed_events_skipped"] = so.skipped
            if err is None:
                await self.resilience.record_success(
                    so.candidate, so.upstream_ms, so.ttft_ms, so.resp.headers
                )
                await _call_hook(on_success, so.candidate)
            elif not so.settled:
                await self.stream_failed(so.candidate, err, decision)

        return done

    async def stream_failed(self, cand: Candidate, err: UpstreamError, decision: Decision) -> None:
        """Record a committed stream's failure: the last attempt of ``decision`` says so (OBS-2,
        RESIL-9) and the ladder counts it against ``cand``."""
        if decision.attempts:
            a = decision.attempts[-1]
            decision.attempts[-1] = AttemptRecord(
                a.provider,
                a.model,
                a.connection,
                err.upstream_status or err.status,
                f"stream failed after commit: {err.message}",
                a.latency_ms,
                a.started_s,
            )
        decision.extra["stream_error"] = err.message
        await self.resilience.record_failure(cand, err)

    async def _release(self, rest: Sequence[Candidate]) -> None:
        """Give back probe slots claimed for candidates that will not be attempted."""
        if not self.resilience.holds_probes:  # nothing claimed: nothing to give back
            return
        for c in rest:
            await self.resilience.release_probe(c)

    async def _attempt(
        self, cand: Candidate, req: ChatRequest, deadline: float, call: UpstreamCall | None = None
    ) -> Outcome | StreamOutcome:
        adapter = self.adapters.get(cand.provider.format)
        if adapter is None:
            raise ServerError(
                f"{cand.provider.id}: no adapter for wire format '{cand.provider.format}'",
                provider=cand.provider.id,
            )
        t = self.timeouts
        clock = self.clock
        remaining = deadline - clock.monotonic()
        if cand.timeout_s is not None or remaining < t.total_s:
            total = min(remaining, cand.timeout_s or t.total_s)
            t = AttemptTimeouts(t.connect_s, min(t.ttft_s, total), t.idle_s, total)
        stream = req.stream and call is None
        up = adapter.build_request(cand, req, stream=stream) if call is None else call.build(cand, req)
        t0 = clock.monotonic()
        if not stream:  # headers and body under one timer (RESIL-6 ttft, then total)
            resp, body = await self.client.fetch(up, provider=cand.provider.id, timeouts=t)
            if resp.status >= 400:
                raise adapter.classify_error(resp.status, resp.headers, body, cand, now=clock.time())
            data = adapter.parse_response(body, cand) if call is None else call.parse(body, cand)
            upstream_ms = (clock.monotonic() - t0) * 1000
            usage = Usage.from_openai(data.get("usage"))
            return Outcome(data, cand, usage, upstream_ms, headers=resp.headers)
        resp = await self.client.send(up, provider=cand.provider.id, timeouts=t)
        try:
            if resp.status >= 400:
                body = await resp.read()
                raise adapter.classify_error(resp.status, resp.headers, body, cand, now=clock.time())
            return await self._open_stream(cand, req, resp, adapter, t0, t)
        except BaseException:
            resp.close()
            raise

    async def _open_stream(
        self,
        cand: Candidate,
        req: ChatRequest,
        resp: UpstreamResponse,
        adapter: ProviderAdapter,
        t0: float,
        t: AttemptTimeouts,
    ) -> StreamOutcome:
        parser = adapter.stream_parser(cand, req)
        clock = self.clock
        remaining_ttft = max(0.001, t.ttft_s - (clock.monotonic() - t0))
        events = resp.event_batches(first_timeout_s=remaining_ttft).__aiter__()
        first: list[dict[str, Any]] = []
        try:
            # TTFT is the time to the first *content* event: upstream keep-alives (SSE comments,
            # Anthropic pings, message_start) show the upstream is alive but do not reset it.
            async with asyncio.timeout(remaining_ttft):
                async for batch in events:
                    for i, (ev, data) in enumerate(batch):
                        chunks = parser.feed(ev, data)
                        first.extend(chunks)
                        if any(is_content_chunk(ch) for ch in chunks):  # the commit point (RESIL-9)
                            ttft = (clock.monotonic() - t0) * 1000
                            return StreamOutcome(
                                cand, first, resp, parser, events, ttft, ttft, rest=batch[i + 1 :]
                            )
                        if parser.done:
                            break
                    if parser.done:
                        break
        except TimeoutError:
            raise Timeout(
                f"{cand.provider.id}: no content within {t.ttft_s:g}s (TTFT timeout)",
                provider=cand.provider.id,
            ) from None
        first.extend(parser.finish())
        if any(is_content_chunk(ch) for ch in first):
            ttft = (clock.monotonic() - t0) * 1000
            so = StreamOutcome(cand, first, resp, parser, events, ttft, ttft)
            so.finished = True
            return so
        raise StreamBroken(f"{cand.provider.id}: stream ended before any content", provider=cand.provider.id)

    async def exhausted(
        self, candidates: Sequence[Candidate], errors: list[UpstreamError], decision: Decision
    ) -> ExhaustedError:
        """RESIL-7: one clean error for a request nothing could serve."""
        pool_size = len(candidates)
        diag = Diagnostics(
            pool_size=pool_size, attempted=list(decision.attempts), excluded=list(decision.exclusions)
        )
        headers: dict[str, str] = {}
        if not errors:
            status, code = 503, "all_candidates_unavailable"
            msg = (
                f"No candidate could be attempted for '{decision.requested_model}': all "
                f"{pool_size} were filtered ({'; '.join(e.reason for e in decision.exclusions[:5])})."
            )
            if decision.exclusions and all(
                e.reason.startswith(("rate limited", "overloaded")) for e in decision.exclusions
            ):
                status = 429
                records = await self.resilience.state.get_cooldowns({c.connection.id for c in candidates})
                now = self.clock.time()
                waits = [r.until - now for r in records.values() if r.until > now]
                if waits:
                    headers["Retry-After"] = str(max(1, math.ceil(min(waits))))
            else:  # the earliest moment a candidate is available again, when the filters know it
                now = self.clock.time()
                untils = [e.until - now for e in decision.exclusions if e.until is not None and e.until > now]
                if untils:
                    headers["Retry-After"] = str(max(1, math.ceil(min(untils))))
        else:
            code = "fallback_exhausted"
            statuses = {e.upstream_status or e.status for e in errors}
            if all(isinstance(e, RateLimited) for e in errors):
                status = 429
                hints = [e.retry_after_s for e in errors if e.retry_after_s is not None]
                if hints:
                    headers["Retry-After"] = str(max(1, math.ceil(min(hints))))
            elif all(isinstance(e, Timeout) for e in errors):
                status = 504
            elif all(isinstance(e, (ConnectionFailed, ResponseTooLarge)) for e in errors):
                status = 502
            elif len(statuses) == 1 and 400 <= next(iter(statuses)) < 500 and not statuses & _GATEWAY_CREDS:
                status = next(iter(statuses))  # one meaningful client-side status, e.g. 404 or 402
            else:
                status = 503
            last = errors[-1]
            msg = (
                f"All {len(decision.attempts)} attempt(s) for '{decision.requested_model}' failed; "
                f"last: {last.message}"
            )
        err_type = (
            "rate_limit_error"
            if status == 429
            else ("invalid_request_error" if 400 <= status < 500 else "server_error")
        )
        exhausted = ExhaustedError(
            msg, code=code, status=status, headers=headers, extra={"diagnostics": diag.to_dict()}
        )
        exhausted.type = err_type
        return exhausted


async def _call_hook(hook: Callable[[Candidate], Any] | None, cand: Candidate) -> None:
    if hook is not None:
        res = hook(cand)
        if inspect.isawaitable(res):
            await res


__all__ = ["Engine", "Outcome", "RetrySettings", "StreamOutcome", "UpstreamCall", "is_content_chunk"]
