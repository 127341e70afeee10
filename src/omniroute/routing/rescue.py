"""Stream rescue (RESIL-9): a stream that fails after commit is finished by another attempt.

Once the first content event of a stream has gone to the client, its routing headers are sent and
fallback can no longer be invisible. Without rescue a cut, a stall (idle timeout), an error event or
a truncated body ends the client's stream with the format's error event and a non-``stop`` finish.
With ``resilience.stream_rescue`` on (the default) the engine instead asks a target for the *rest* of
the answer and streams only that, so the client reads one answer with one ``finish_reason``:

1. **Eligible**: the failure is retryable (a content-filter or client error is not rescued), no
   finish was seen, and no tool call has sent any of its arguments (a half-sent JSON argument string
   cannot be joined to another attempt's; a tool call whose header alone was sent is re-requested).
2. **Who**: the same target first while its transient-retry budget (``retries.per_target``) allows,
   then the request's next candidates in order; each is re-checked against the ladder, and the
   request's attempt cap and total deadline bound the whole rescue.
3. **How**: the text already sent goes back as a trailing assistant message — a *prefill*, which
   Anthropic's Messages API continues (docs.anthropic.com, "Prefill Claude's response") and
   OpenAI-compatible servers accept — for targets of the ``anthropic`` and ``openai`` formats. Gemini
   targets, and any model that rejects the prefill with a 400 (remembered per provider/model for the
   gateway), get the partial answer as an assistant turn followed by a user instruction to continue
   it without repeating it.
4. **Joining**: the rescuing attempt's text is held back until it can be told apart from the text
   already sent (at most as many characters as were sent). A continuation that reproduces the
   whole sent text has that repeat removed; one whose first characters match the sent text's
   (:data:`RESTART_PREFIX_CHARS`) but that then diverges started a *different* answer and is not
   joined: that attempt fails (:class:`RestartedAnswer`) and the next candidate is asked, or the
   stream ends with the error event. Otherwise the longest suffix of the sent text that the
   continuation starts with is removed (a model that repeats the last words is not duplicated).
   Reasoning deltas are joined the same way while no answer text was sent, and dropped after (the
   client has moved on to the answer). Role, id, model and ``created`` of the continuation's chunks
   are those of the stream the client already reads.
5. **Accounting**: usage sums every attempt (an attempt cut before its usage is estimated); each
   rescue is listed in the decision (``stream_rescues``), the usage row says ``rescued`` and
   ``omniroute_stream_rescues_total`` counts rescued streams (once each) by provider and outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from omniroute.errors import ContextOverflow, StreamBroken, UpstreamError
from omniroute.resilience.ladder import LadderContext
from omniroute.routing.decision import Decision
from omniroute.values import Candidate, ChatRequest

if TYPE_CHECKING:
    from omniroute.routing.engine import Budget, Engine, StreamOutcome

CONTINUE_INSTRUCTION = (
    "Your previous reply was cut off: it is the assistant message just above. Continue it exactly "
    "where it stops. Do not repeat any of it and do not add any preamble or commentary."
)
"""The user turn that asks for the rest of a partial answer when it cannot be prefilled."""

PREFILL_FORMATS = frozenset({"anthropic", "openai"})
"""Upstream formats whose requests may end with an assistant message that the model continues."""


@dataclass(slots=True)
class Sent:
    """What the client has been sent of one stream: answer ``text``, ``reasoning`` text, tool calls
    by index (``tools``: index → name; ``tool_args``: indexes whose arguments began) and the
    stream's ``meta`` (``id``, ``model``, ``created`` of its first chunk)."""

    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    tools: dict[int, str] = field(default_factory=dict)
    tool_args: set[int] = field(default_factory=set)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)

    def observe(self, ch: dict[str, Any]) -> None:
        """Note one canonical chunk as sent."""
        if not self.meta and ch.get("id"):
            self.meta = {k: ch[k] for k in ("id", "model", "created") if ch.get(k) is not None}
        for c in ch.get("choices") or ():
            d = c.get("delta")
            if not d:
                continue
            if d.get("content"):
                self.text_parts.append(d["content"])
            r = d.get("reasoning_content") or d.get("reasoning")
            if isinstance(r, str) and r:
                self.reasoning_parts.append(r)
            for tc in d.get("tool_calls") or ():
                idx = int(tc.get("index") or 0)
                fn = tc.get("function") or {}
                if fn.get("name"):
                    self.tools[idx] = fn["name"]
                if fn.get("arguments"):
                    self.tool_args.add(idx)


def overlap(sent: str, cont: str) -> int:
    """Length of the longest suffix of ``sent`` that ``cont`` starts with (prefix function of
    ``cont + NUL + sent``, linear time)."""
    m = min(len(sent), len(cont))
    if m == 0:
        return 0
    s = cont[:m] + "\x00" + sent[-m:]
    pi = [0] * len(s)
    for i in range(1, len(s)):
        k = pi[i - 1]
        while k and s[i] != s[k]:
            k = pi[k - 1]
        if s[i] == s[k]:
            k += 1
        pi[i] = k
    return pi[-1]


RESTART_PREFIX_CHARS = 8
"""A continuation whose first characters match the first ``min(8, len(sent))`` characters of the
text already sent, but that does not reproduce all of it, started a different answer (a rescue
target that ignored the prefill): it is not joined. Eight characters keep an ordinary continuation
that happens to begin with the answer's first word from being taken for a restart."""


class RestartedAnswer(StreamBroken):
    """A rescuing attempt started its answer over and diverged from the text the client already
    has: joining it would present two different answers as one, so the attempt counts as failed."""


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class _Join:
    """Joins one channel (answer text or reasoning) of a continuation to what was sent: the start
    of the continuation is held while it may still be a repeat of the sent text (at most
    ``len(sent)`` characters), then: a continuation that reproduces the sent text and goes on has
    the repeat cut off; one that starts like the sent text (:data:`RESTART_PREFIX_CHARS`) but
    diverges from it raises :class:`RestartedAnswer`; otherwise the overlap is cut off
    (:func:`overlap`)."""

    __slots__ = ("buf", "done", "provider", "sent")

    def __init__(self, sent: str, provider: str = "") -> None:
        self.sent = sent
        self.buf = ""
        self.done = not sent
        self.provider = provider

    def push(self, piece: str) -> str:
        if self.done:
            return piece
        self.buf += piece
        if len(self.buf) <= len(self.sent) and self.buf in self.sent:
            return ""  # could still be a repeat of the sent text: wait for more
        return self.flush()

    def flush(self) -> str:
        if self.done:
            return ""
        self.done = True
        buf, self.buf = self.buf, ""
        same = _common_prefix(self.sent, buf)
        if same < len(self.sent) and same >= min(RESTART_PREFIX_CHARS, len(self.sent)):
            raise RestartedAnswer(
                f"{self.provider or 'the rescue target'}: started a different answer instead of "
                f"continuing the {len(self.sent)} characters already sent",
                provider=self.provider,
            )
        return buf[overlap(self.sent, buf) :]


class Continuation:
    """Rewrites a rescuing attempt's canonical chunks so they continue the stream the client reads
    (module docstring, step 4). ``apply(chunks)`` returns the chunks to send (possibly fewer)."""

    def __init__(self, sent: Sent, provider: str = "") -> None:
        self.meta = dict(sent.meta)
        self.text = _Join(sent.text, provider)
        self.drop_reasoning = bool(sent.text_parts or sent.tools)
        self.reasoning = _Join("" if self.drop_reasoning else sent.reasoning, provider)
        self.tools = dict(sent.tools)

    def apply(self, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for ch in chunks:
            new = self._one(ch)
            if new is not None:
                out.append(new)
        return out

    def _one(self, ch: dict[str, Any]) -> dict[str, Any] | None:
        ch = {**ch, **self.meta} if self.meta else dict(ch)
        choices = ch.get("choices")
        if not choices:
            return ch
        c = dict(choices[0])
        d = dict(c.get("delta") or {})
        d.pop("role", None)
        finishing = bool(c.get("finish_reason"))
        for key in ("reasoning_content", "reasoning"):
            r = d.pop(key, None)
            if isinstance(r, str) and not self.drop_reasoning:
                r = self.reasoning.push(r) + (self.reasoning.flush() if finishing else "")
                if r:
                    d[key] = r
        text = d.pop("content", None)
        text = self.text.push(text) if isinstance(text, str) else ""
        if finishing or d.get("tool_calls"):
            text += self.text.flush()
        if text:
            d["content"] = text
        if d.get("tool_calls"):
            d["tool_calls"] = [self._tool(tc) for tc in d["tool_calls"]]
        if not d and not finishing and not ch.get("usage"):
            return None
        c["delta"] = d
        ch["choices"] = [c, *choices[1:]]
        return ch

    def _tool(self, tc: dict[str, Any]) -> dict[str, Any]:
        """A tool call whose header the client already has continues with its arguments only."""
        idx = int(tc.get("index") or 0)
        fn = tc.get("function") or {}
        if idx in self.tools and fn.get("name") == self.tools[idx]:
            del self.tools[idx]
            return {"index": idx, "function": {"arguments": fn.get("arguments") or ""}}
        return tc


def continuation_request(req: ChatRequest, sent: str, prefill: bool) -> ChatRequest:
    """The request that asks for the rest of ``sent``: ``req`` with the partial answer appended as
    an assistant message (``prefill``), or as an assistant turn and :data:`CONTINUE_INSTRUCTION`;
    unchanged when nothing was sent. Always re-translated (``native`` dropped)."""
    if not sent:
        return replace(req, native=None, raw_body=None)
    body = dict(req.body)
    messages = list(body.get("messages") or [])
    partial = sent.rstrip()  # Anthropic refuses a final assistant turn ending in whitespace
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "assistant" and isinstance(last.get("content"), str):
        messages[-1] = {**last, "content": last["content"] + partial}  # the client's own prefill
    else:
        messages.append({"role": "assistant", "content": partial})
    if not prefill:
        messages.append({"role": "user", "content": CONTINUE_INSTRUCTION})
    body["messages"] = messages
    return replace(req, body=body, native=None, raw_body=None)


@dataclass(slots=True)
class StreamRescuer:
    """The rescue of one streaming request (module docstring): called by
    :meth:`StreamOutcome.batches` with the failed stream and its error; returns the committed
    rescuing :class:`StreamOutcome`, or ``None`` when nothing could continue the answer."""

    engine: Engine
    req: ChatRequest
    candidates: Sequence[Candidate]
    decision: Decision
    ctx: LadderContext
    budget: Budget
    errors: list[UpstreamError]
    prepare: Callable[[Candidate, ChatRequest], ChatRequest] | None

    async def __call__(self, so: StreamOutcome, err: UpstreamError) -> StreamOutcome | None:
        sent: Sent = so.sent
        failed = so.candidate
        self.decision.extra.pop("rescued", None)  # only a stream that ends whole was rescued
        if not err.retryable or sent.tool_args:
            return None
        await self.engine.stream_failed(failed, err, self.decision)
        so.settled = True
        so.close()
        release, so.release = so.release, None
        if release is not None:
            await release()
        so.prior_usage = so.final_usage(self.req.prompt_estimate)
        so.usage, so.completion_chars = None, 0
        record: dict[str, Any] = {
            "failed": failed.key,
            "error": err.message,
            "sent_chars": len(sent.text) + len(sent.reasoning),
            "by": None,
        }
        self.decision.extra.setdefault("stream_rescues", []).append(record)
        new = await self._continue(failed, sent, record, isinstance(err, RestartedAnswer))
        if new is None:
            return None
        record["by"] = new.candidate.key
        self.decision.extra["rescued"] = True
        self.decision.served = new.candidate.key
        new.sent, new.filter = sent, Continuation(sent, new.candidate.provider.id)
        so.filter = new.filter
        return new

    def _order(self, failed: Candidate, restarted: bool) -> list[Candidate]:
        """The same target first while its retry budget allows (not after it restarted the answer:
        it ignored the prefill once), then the other candidates in order."""
        tries = sum(
            1
            for a in self.decision.attempts
            if a.connection == failed.connection.id and a.model == failed.model.id
        )
        later = [c for c in self.candidates if c.key != failed.key]
        return ([failed] if tries <= self.budget.per_target and not restarted else []) + later

    async def _continue(
        self, failed: Candidate, sent: Sent, record: dict[str, Any], restarted: bool
    ) -> StreamOutcome | None:
        text = sent.text
        for cand in self._order(failed, restarted):
            if self.budget.spent(len(self.decision.attempts)):
                return None
            if await self.engine.resilience.recheck(cand, self.engine.clock.time()) is not None:
                continue
            prefill = (
                bool(text)
                and cand.provider.format in PREFILL_FORMATS
                and cand.key not in self.engine.rejects_prefill
            )
            while True:
                req = continuation_request(self.req, text, prefill)
                if self.prepare is not None:
                    req = self.prepare(cand, req)
                try:
                    out = await self.engine.try_candidate(
                        cand, req, self.decision, self.ctx, self.budget, self.errors
                    )
                except asyncio.CancelledError:
                    raise
                except UpstreamError as exc:
                    if prefill and exc.status == 400 and not isinstance(exc, ContextOverflow):
                        self.engine.rejects_prefill.add(cand.key)  # this model refuses prefill: ask in words
                        prefill = False
                        if not self.budget.spent(len(self.decision.attempts)):
                            continue
                    break
                if out is not None:  # a streaming request's success is a committed stream
                    record["prefill"] = prefill
                    return cast("StreamOutcome", out)
                break
        return None


def attach_rescue(
    engine: Engine,
    so: StreamOutcome,
    req: ChatRequest,
    candidates: Sequence[Candidate],
    decision: Decision,
    ctx: LadderContext,
    budget: Budget,
    errors: list[UpstreamError],
    prepare: Callable[[Candidate, ChatRequest], ChatRequest] | None,
) -> None:
    """Make the committed stream ``so`` rescuable: ``candidates`` are the request's survivors from
    the committed one on, ``budget`` its attempt cap and deadline. A request for several choices
    (``n`` > 1) is not: one continuation cannot be joined to several answers."""
    if req.body.get("n") not in (None, 1):
        return
    so.sent = Sent()
    so.rescue = StreamRescuer(engine, req, candidates, decision, ctx, budget, errors, prepare)


__all__ = [
    "CONTINUE_INSTRUCTION",
    "RESTART_PREFIX_CHARS",
    "Continuation",
    "RestartedAnswer",
    "Sent",
    "StreamRescuer",
    "attach_rescue",
    "continuation_request",
    "overlap",
]
