"""Parts shared by the multi-call strategies (COMBO-5 fusion, COMBO-6 pipeline; seed 001 "Fusion
Strategy", "Agentic pipeline mode"): usage summed over several calls, the client-facing stream that
carries that sum (or replays a buffered answer), and the request-body rewrites for internal calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, cast

from omniroute.routing.engine import Outcome, StreamOutcome
from omniroute.values import ModelInfo, Usage
from omniroute.wire._common import text_of

if TYPE_CHECKING:
    from omniroute.providers.upstream import UpstreamResponse
    from omniroute.wire.base import StreamParser

TOOL_KEYS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")


# -- usage ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PricedUsage(Usage):
    """Usage summed over several calls whose cost was computed per call (models differ in price), so
    :meth:`cost_usd` returns that sum whatever model the row is attributed to."""

    cost: float = 0.0

    def cost_usd(self, model: ModelInfo) -> float:
        return self.cost


def add_usage(a: Usage, b: Usage | None) -> Usage:
    """Token-wise sum (plain :class:`Usage`; costs are tracked separately)."""
    return a + Usage() if b is None else a + b


def priced(usage: Usage, cost: float) -> PricedUsage:
    return PricedUsage(**{f.name: getattr(usage, f.name) for f in fields(Usage)}, cost=cost)


class _NoUpstream:
    """Stands in for the upstream response of a stream replayed from a buffered answer."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}

    def close(self) -> None:
        return None


async def _no_events() -> AsyncIterator[list[tuple[str, bytes]]]:
    return
    yield  # pragma: no cover


@dataclass
class SummedStream(StreamOutcome):
    """A client-facing stream whose usage also counts the member calls made before it (``extra``
    tokens, ``extra_cost`` USD): the final usage chunk and ``usage`` carry the request's total."""

    extra: Usage = field(default_factory=Usage)
    extra_cost: float = 0.0

    def __post_init__(self) -> None:
        if self.usage is None:
            self.usage = priced(self.extra, self.extra_cost)

    @classmethod
    def wrap(cls, so: StreamOutcome, extra: Usage, extra_cost: float) -> SummedStream:
        """Take over ``so`` (same upstream, hooks and in-flight release) adding ``extra`` usage."""
        if isinstance(so, SummedStream):
            extra, extra_cost = add_usage(extra, so.extra), extra_cost + so.extra_cost
        state = {f.name: getattr(so, f.name) for f in fields(StreamOutcome)}
        state["usage"] = None
        return cls(**state, extra=extra, extra_cost=extra_cost)

    @classmethod
    def replay(cls, out: Outcome, now: float) -> SummedStream:
        """A finished stream replaying a buffered answer (client asked to stream, the answer was made
        without streaming); ``out.usage`` is carried as the total; ``now`` (epoch s) stamps an answer
        the upstream did not stamp."""
        u = out.usage or Usage()
        cost = u.cost_usd(out.candidate.model)
        return cls(
            candidate=out.candidate,
            first=completion_chunks(out.response, now),
            resp=cast("UpstreamResponse", _NoUpstream()),
            parser=cast("StreamParser", None),
            events=_no_events(),
            upstream_ms=out.upstream_ms,
            ttft_ms=out.upstream_ms,
            finished=True,
            extra=u,
            extra_cost=cost,
        )

    def _observe(self, ch: dict[str, Any]) -> None:
        super()._observe(ch)
        u = ch.get("usage")
        if u and self.usage is not None:
            own = self.usage
            total = add_usage(own, self.extra)
            self.usage = priced(total, own.cost_usd(self.candidate.model) + self.extra_cost)
            ch["usage"] = {**u, **total.to_openai()}


def completion_chunks(response: dict[str, Any], now: float) -> list[dict[str, Any]]:
    """A canonical ``chat.completion`` as the canonical chunks a stream of it would have carried
    (text/reasoning, tool calls, finish; usage travels in ``StreamOutcome.usage``); ``created`` is
    ``now`` (epoch s) when the response has none."""
    base = {
        "id": response.get("id") or "chatcmpl-buffered",
        "object": "chat.completion.chunk",
        "created": response.get("created") or int(now),
        "model": response.get("model") or "",
    }
    choice = (response.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    delta: dict[str, Any] = {"role": "assistant"}
    if msg.get("reasoning_content"):
        delta["reasoning_content"] = msg["reasoning_content"]
    delta["content"] = text_of(msg.get("content"))
    out = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
    calls = msg.get("tool_calls") or []
    if calls:
        tc = [{"index": i, **c} for i, c in enumerate(calls)]
        out.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": tc}, "finish_reason": None}]})
    finish = choice.get("finish_reason") or ("tool_calls" if calls else "stop")
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return out


# -- bodies -----------------------------------------------------------------------------------------


def answer_text(response: dict[str, Any]) -> str:
    """The first choice's text of a canonical ``chat.completion`` (``""`` when there is none)."""
    choices = response.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    return text_of((choices[0].get("message") or {}).get("content")).strip()


def has_tools(body: dict[str, Any]) -> bool:
    """A non-empty ``tools`` array whose ``tool_choice`` is not ``"none"`` (COMBO-5 tool bypass)."""
    return bool(body.get("tools")) and body.get("tool_choice") != "none"


def flatten_tool_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with tool calls and tool results rewritten as plain text, for a call made without
    tools (upstreams reject tool turns in a request that declares no tools)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            text = f"[tool result {m.get('tool_call_id') or ''}]\n{text_of(m.get('content'))}"
            out.append({"role": "user", "content": text})
        elif role == "assistant" and m.get("tool_calls"):
            lines = [text_of(m.get("content"))] if m.get("content") else []
            for c in m["tool_calls"]:
                fn = c.get("function") or {}
                lines.append(f"[tool call {c.get('id') or ''}] {fn.get('name')}({fn.get('arguments') or ''})")
            out.append({"role": "assistant", "content": "\n".join(lines)})
        else:
            out.append(m)
    return out


def toolless(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` for an internal call: no tools, no streaming, tool turns flattened to text."""
    out = {k: v for k, v in body.items() if k not in (*TOOL_KEYS, "stream", "stream_options")}
    out["messages"] = flatten_tool_turns(list(body.get("messages") or []))
    return out


def tool_calls(response: dict[str, Any]) -> list[Any]:
    choices = response.get("choices") or [{}]
    return list(((choices[0] or {}).get("message") or {}).get("tool_calls") or [])
