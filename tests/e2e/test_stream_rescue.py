"""Stream rescue through the HTTP API against fake providers (RESIL-9).

A stream that fails after its first content went to the client (cut, stall, error event) is finished
by another attempt: the client of every surface reads one answer, in order, without repeated text,
with one ordinary finish. Fake ``a`` serves provider ``pa`` (the preferred target), fake ``b``
serves ``pb`` (its fallback); model ``m`` routes ``m: [pa, pb]``. The answer is 60 tokens
``w01 … w60`` streamed in 60 content chunks, one token each, so ``cut-after-40`` cuts after 40 tokens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from omniroute.config import config_from_dict
from omniroute.routing.rescue import CONTINUE_INSTRUCTION
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

WORDS = [f"w{i:02d}" for i in range(1, 61)]
ANSWER = " ".join(WORDS)
SPEC = f"answer-{'_'.join(WORDS)}+chunks-60"
BASE_PATHS = {"openai": "/v1", "anthropic": "", "gemini": "/v1beta"}
SURFACES = ["chat", "messages", "responses", "gemini"]


class Rig:
    """Two fakes and a gateway factory for one test."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.a = FakeProviderThread(name="a").start()
        self.b = FakeProviderThread(name="b").start()
        self.gateways: list[GatewayThread] = []

    def gateway(
        self, fmt_a: str = "openai", fmt_b: str = "openai", resilience: dict[str, Any] | None = None
    ) -> GatewayThread:
        res: dict[str, Any] = {"timeouts": {"connect_s": 5, "ttft_s": 10, "idle_s": 5, "total_s": 30}}
        for k, v in (resilience or {}).items():
            res[k] = {**res.get(k, {}), **v} if isinstance(v, dict) else v
        model = {"id": "m", "max_output_tokens": 1000, "input_price": 1.0, "output_price": 1.0}
        config = {
            "database_url": f"sqlite:///{self.tmp}/gw.db",
            "providers": [
                {"id": pid, "format": fmt, "base_url": fake.base_url + BASE_PATHS[fmt], "models": [model]}
                for pid, fmt, fake in (("pa", fmt_a, self.a), ("pb", fmt_b, self.b))
            ],
            "connections": [
                {"id": "a1", "provider": "pa", "api_key": "ka"},
                {"id": "b1", "provider": "pb", "api_key": "kb"},
            ],
            "fallback_chains": {"m": [{"provider": "pa"}, {"provider": "pb"}]},
            "resilience": res,
        }
        gt = GatewayThread(config_from_dict(config, env={})).start()
        self.gateways.append(gt)
        return gt

    def close(self) -> None:
        for g in self.gateways:
            g.stop()
        self.a.stop()
        self.b.stop()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def _sse(text: str) -> list[tuple[str | None, Any]]:
    """``(event name, data)`` pairs of an SSE body; data is JSON unless it is ``[DONE]``."""
    out: list[tuple[str | None, Any]] = []
    name: str | None = None
    for line in text.splitlines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
            out.append((name, data if data == "[DONE]" else json.loads(data)))
            name = None
    return out


def read_stream(gw: GatewayThread, surface: str, content: str = "hello there") -> tuple[str, list[str], bool]:
    """Stream one request through ``surface``: ``(text, finish reasons, ended cleanly)``, where a
    clean end is the surface's own terminator with no error event."""
    msgs = [{"role": "user", "content": content}]
    if surface == "chat":
        r = httpx.post(
            f"{gw.base_url}/chat/completions",
            json={"model": "m", "messages": msgs, "stream": True},
            timeout=30,
        )
        events = [d for _, d in _sse(r.text)]
        chunks = [e for e in events if isinstance(e, dict) and e.get("choices")]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"][0].get("finish_reason")]
        clean = events[-1] == "[DONE]" and not any(isinstance(e, dict) and "error" in e for e in events)
        return text, finishes, clean
    if surface == "messages":
        body = {"model": "m", "max_tokens": 500, "messages": msgs, "stream": True}
        r = httpx.post(f"{gw.url}/v1/messages", json=body, headers={"x-api-key": "x"}, timeout=30)
        pairs = _sse(r.text)
        text = "".join(
            d["delta"].get("text", "")
            for n, d in pairs
            if n == "content_block_delta" and d["delta"]["type"] == "text_delta"
        )
        finishes = [
            d["delta"]["stop_reason"]
            for n, d in pairs
            if n == "message_delta" and d["delta"].get("stop_reason")
        ]
        clean = pairs[-1][0] == "message_stop" and not any(n == "error" for n, _ in pairs)
        return text, finishes, clean
    if surface == "responses":
        r = httpx.post(
            f"{gw.base_url}/responses", json={"model": "m", "input": content, "stream": True}, timeout=30
        )
        pairs = _sse(r.text)
        text = "".join(d["delta"] for _, d in pairs if d.get("type") == "response.output_text.delta")
        finishes = [
            d["response"]["status"]
            for _, d in pairs
            if d.get("type") in ("response.completed", "response.failed", "response.incomplete")
        ]
        clean = pairs[-1][1].get("type") == "response.completed" and not any(
            d.get("type") == "error" for _, d in pairs
        )
        return text, finishes, clean
    body = {"contents": [{"role": "user", "parts": [{"text": content}]}]}
    r = httpx.post(
        f"{gw.url}/v1beta/models/m:streamGenerateContent?alt=sse",
        json=body,
        headers={"x-goog-api-key": "x"},
        timeout=30,
    )
    events = [d for _, d in _sse(r.text)]
    cands = [c for e in events if isinstance(e, dict) for c in e.get("candidates") or ()]
    text = "".join(
        p.get("text", "")
        for c in cands
        for p in (c.get("content") or {}).get("parts") or ()
        if not p.get("thought")
    )
    finishes = [c["finishReason"] for c in cands if c.get("finishReason")]
    clean = bool(events) and not any(isinstance(e, dict) and "error" in e for e in events)
    return text, finishes, clean


ORDINARY_FINISH = {"chat": "stop", "messages": "end_turn", "responses": "completed", "gemini": "STOP"}


def usage_rows(gw: GatewayThread) -> list[dict[str, Any]]:
    async def rows(g: Any) -> list[dict[str, Any]]:
        await g.usage.flush()
        out: list[dict[str, Any]] = await g.store.recent_usage(limit=20)
        return out

    return gw.call(rows)


def last_decision(gw: GatewayThread) -> dict[str, Any]:
    rid = usage_rows(gw)[0]["request_id"]
    d: dict[str, Any] = httpx.get(f"{gw.url}/api/routing/decisions/{rid}", timeout=5).json()
    return d


def last_message(request: Any) -> tuple[str, str]:
    """Role and text of the last turn of a request the fake received (OpenAI shape)."""
    m = request.body["messages"][-1]
    content = m["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return m["role"], text


@pytest.mark.parametrize("surface", SURFACES)
def test_a_stream_cut_after_40_of_60_tokens_is_finished_by_the_same_target(rig: Rig, surface: str) -> None:
    """The preferred target cuts its stream after 40 of 60 tokens once; the gateway asks it again
    with the 40 tokens as an assistant prefill and streams only the rest: every surface's client
    reads all 60 tokens in order, once, with one ordinary finish and its normal terminator."""
    gw = rig.gateway()
    rig.a.set_behaviour("m", f"{SPEC}+cut-after-40+faults-times-1+continue")
    text, finishes, clean = read_stream(gw, surface)
    assert text == ANSWER
    assert finishes == [ORDINARY_FINISH[surface]] and clean
    assert rig.a.calls("m") == 2 and rig.b.calls() == 0
    assert last_message(rig.a.requests[-1]) == ("assistant", " ".join(WORDS[:40]))
    row = usage_rows(gw)[0]
    assert row["status"] == 200 and row["rescued"] is True and row["attempts"] == 2
    rescues = last_decision(gw)["stream_rescues"]
    assert [(r["failed"], r["by"], r["prefill"]) for r in rescues] == [("pa/m@a1", "pa/m@a1", True)]


@pytest.mark.parametrize("surface", SURFACES)
def test_a_fallback_that_rejects_prefill_is_asked_in_words(rig: Rig, surface: str) -> None:
    """The preferred target cuts every stream (its rescue too); the fallback refuses an assistant
    prefill with a 400, so it is asked again with the partial answer and an instruction to continue,
    and repeats the last word — the client still reads the 60 tokens once, with one finish."""
    gw = rig.gateway()
    rig.a.set_behaviour("m", f"{SPEC}+cut-after-40+continue")
    rig.b.set_behaviour("m", f"{SPEC}+no-prefill+continue")
    text, finishes, clean = read_stream(gw, surface)
    assert text == ANSWER
    assert finishes == [ORDINARY_FINISH[surface]] and clean
    refused, asked = rig.b.requests[-2:]
    assert last_message(refused)[0] == "assistant"
    assert last_message(asked) == ("user", CONTINUE_INSTRUCTION)
    assert asked.body["messages"][-2]["role"] == "assistant"
    row = usage_rows(gw)[0]
    assert row["rescued"] is True and row["provider"] == "pb"
    metrics = httpx.get(f"{gw.url}/metrics", timeout=5).text
    assert 'omniroute_stream_rescues_total{outcome="failed",provider="pa"}' not in metrics
    # one stream, counted once, though its rescue took two attempts
    assert 'omniroute_stream_rescues_total{outcome="rescued",provider="pa"} 1.0' in metrics


@pytest.mark.parametrize(
    ("fmt_a", "fmt_b"), [("anthropic", "anthropic"), ("gemini", "openai"), ("openai", "gemini")]
)
def test_rescue_works_across_upstream_formats(rig: Rig, fmt_a: str, fmt_b: str) -> None:
    """The rescue speaks each upstream's format: Anthropic continues a prefill, Gemini is asked in
    words; a fallback of another format joins seamlessly."""
    gw = rig.gateway(fmt_a, fmt_b, resilience={"retries": {"per_target": 0}})
    rig.a.set_behaviour("m", f"{SPEC}+cut-after-40")
    rig.b.set_behaviour("m", f"{SPEC}+continue")
    text, finishes, clean = read_stream(gw, "chat")
    assert text == ANSWER and finishes == ["stop"] and clean
    assert rig.a.calls("m") == 1 and rig.b.calls("m") == 1


def test_a_stalled_stream_is_rescued_after_the_idle_timeout(rig: Rig) -> None:
    """The preferred target stalls after 20 tokens; after the idle timeout (0.5 s) its stream is
    given up and the rest of the answer is asked for: one whole answer reaches the client."""
    gw = rig.gateway(resilience={"timeouts": {"idle_s": 0.5}})
    rig.a.set_behaviour("m", f"{SPEC}+stall-after-20+faults-times-1+continue")
    t0 = time.monotonic()
    text, finishes, clean = read_stream(gw, "chat")
    assert time.monotonic() - t0 < 5
    assert text == ANSWER and finishes == ["stop"] and clean
    assert "idle" in last_decision(gw)["stream_rescues"][0]["error"]


def test_an_error_event_mid_stream_is_rescued(rig: Rig) -> None:
    """An error event after 40 tokens is rescued like a cut (the fallback here)."""
    gw = rig.gateway(resilience={"retries": {"per_target": 0}})
    rig.a.set_behaviour("m", f"{SPEC}+error-after-40")
    rig.b.set_behaviour("m", SPEC)  # answers the whole text again: the repeat is removed
    text, finishes, clean = read_stream(gw, "messages")
    assert text == ANSWER and finishes == ["end_turn"] and clean


def test_the_openai_sdk_reads_a_rescued_stream_as_one_completion(rig: Rig) -> None:
    """The official openai SDK sees one ordinary completion: text, finish ``stop``, one id, and the
    usage of both attempts summed (40 estimated tokens of the cut attempt + 20 of the rescue)."""
    gw = rig.gateway()
    rig.a.set_behaviour("m", f"{SPEC}+cut-after-40+faults-times-1+continue")
    c = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)
    chunks = list(
        c.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert text == ANSWER and finishes == ["stop"]
    assert len({ch.id for ch in chunks}) == 1
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == 60


def test_the_anthropic_sdk_reads_a_rescued_stream_as_one_message(rig: Rig) -> None:
    """The official anthropic SDK's accumulated message is the whole answer, ``end_turn``."""
    gw = rig.gateway()
    rig.a.set_behaviour("m", f"{SPEC}+cut-after-40+faults-times-1+continue")
    c = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0)
    with c.messages.stream(model="m", max_tokens=500, messages=[{"role": "user", "content": "hi"}]) as s:
        m = s.get_final_message()
    assert [b.type for b in m.content] == ["text"]
    assert "".join(b.text for b in m.content if b.type == "text") == ANSWER
    assert m.stop_reason == "end_turn"


def test_with_rescue_off_a_cut_stream_ends_with_the_error_event(rig: Rig) -> None:
    """``resilience.stream_rescue: false``: a cut after commit ends with the error event and a
    non-stop finish, as before; no second call is made."""
    gw = rig.gateway(resilience={"stream_rescue": False})
    rig.a.set_behaviour("m", f"{SPEC}+cut-after-40+faults-times-1")
    text, finishes, clean = read_stream(gw, "chat")
    assert text == " ".join(WORDS[:40]) + " " and finishes == ["error"] and not clean
    assert rig.a.calls("m") == 1 and rig.b.calls() == 0
    assert usage_rows(gw)[0]["rescued"] is False


def test_a_cut_inside_tool_arguments_ends_with_the_error_event(rig: Rig) -> None:
    """Part of a tool call's arguments was sent: no other attempt can finish that JSON, so the
    stream ends with the error event, never a made-up call."""
    gw = rig.gateway()
    rig.a.set_behaviour("m", "tool-call+cut-after-2+faults-times-1")
    r = httpx.post(
        f"{gw.base_url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "weather?"}], "stream": True},
        timeout=30,
    )
    events = [d for _, d in _sse(r.text)]
    assert isinstance(events[-1], dict) and "error" in events[-1]
    finishes = [e["choices"][0]["finish_reason"] for e in events if isinstance(e, dict) and e.get("choices")]
    assert "error" in finishes and "tool_calls" not in finishes
    assert rig.a.calls("m") == 1 and rig.b.calls() == 0


def test_a_cut_after_a_tool_call_header_re_requests_the_call(rig: Rig) -> None:
    """Only the tool call's name went out: the call is asked for again and its arguments follow
    under the same index, so the client reads one whole call."""
    gw = rig.gateway()
    rig.a.set_behaviour("m", "tool-call+cut-after-1+faults-times-1")
    c = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)
    stream = c.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "weather?"}], stream=True
    )
    calls: dict[int, list[str]] = {}
    finishes = []
    for ch in stream:
        for choice in ch.choices:
            for t in choice.delta.tool_calls or []:
                part = calls.setdefault(t.index, ["", ""])
                part[0] += (t.function.name or "") if t.function else ""
                part[1] += (t.function.arguments or "") if t.function else ""
            if choice.finish_reason:
                finishes.append(choice.finish_reason)
    assert calls == {0: ["get_weather", '{"city": "Paris", "unit": "celsius"}']}
    assert finishes == ["tool_calls"] and rig.a.calls("m") == 2


def test_reasoning_sent_before_a_cut_is_not_repeated(rig: Rig) -> None:
    """The stream is cut right after its reasoning delta: the rescue thinks again, and the client
    reads the reasoning once, then the whole answer."""
    gw = rig.gateway()
    rig.a.set_behaviour("m", "reasoning+cut-after-1+faults-times-1")
    r = httpx.post(
        f"{gw.base_url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        timeout=30,
    )
    chunks = [d for _, d in _sse(r.text) if isinstance(d, dict) and d.get("choices")]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "The user wants an answer from m."
    assert "".join(d.get("content") or "" for d in deltas) == "Hello from a (m)."
    assert rig.a.calls("m") == 2 and usage_rows(gw)[0]["rescued"] is True


def test_rescue_stops_at_the_request_attempt_cap(rig: Rig) -> None:
    """With ``max_attempts: 2`` the cut stream and one rescue (also cut) spend the budget: the stream
    ends with the error event and the fallback is never called."""
    gw = rig.gateway(resilience={"retries": {"max_attempts": 2}})
    rig.a.set_behaviour("m", f"{SPEC}+cut-after-40+continue")
    rig.b.set_behaviour("m", f"{SPEC}+continue")
    text, finishes, clean = read_stream(gw, "chat")
    assert finishes == ["error"] and not clean and ANSWER.startswith(text)
    assert rig.a.calls("m") == 2 and rig.b.calls() == 0
    row = usage_rows(gw)[0]
    assert row["status"] == 502 and row["attempts"] == 2 and row["rescued"] is False


def test_the_console_shows_the_rescue_of_a_request(rig: Rig) -> None:
    """The console's request page lists the stream rescue: who failed, after how much, who went on."""
    gw = rig.gateway()
    rig.a.set_behaviour("m", f"{SPEC}+cut-after-40+faults-times-1+continue")
    read_stream(gw, "chat")
    rid = usage_rows(gw)[0]["request_id"]
    page = httpx.get(f"{gw.url}/dashboard/requests/{rid}", timeout=10)
    assert page.status_code == 200
    assert "Stream rescues (1)" in page.text
    assert "<strong>pa/m@a1</strong> failed after 160 characters were sent" in page.text
    assert "continued by <strong>pa/m@a1</strong> from a prefill" in page.text


FIRST = "answer-Hello_from_the_first_model_today+chunks-6"
SECOND = "answer-Hello_from_the_second_one+chunks-4"


@pytest.mark.parametrize("surface", SURFACES)
def test_a_rescue_that_starts_a_different_answer_is_not_joined(rig: Rig, surface: str) -> None:
    """The preferred target cuts its stream after 3 of 6 chunks every time; the fallback ignores the
    prefill and starts its own, different answer. The two answers are never joined and presented as
    complete: the client reads only the first target's partial text, then the error event."""
    gw = rig.gateway(resilience={"retries": {"per_target": 0}})
    rig.a.set_behaviour("m", f"{FIRST}+cut-after-3")
    rig.b.set_behaviour("m", SECOND)
    text, finishes, clean = read_stream(gw, surface)
    assert "second" not in text and "Hello from the first model today".startswith(text)
    assert finishes != [ORDINARY_FINISH[surface]] and not clean
    assert rig.b.calls("m") >= 1
    row = usage_rows(gw)[0]
    assert row["rescued"] is False and row["status"] >= 500
    rescues = last_decision(gw)["stream_rescues"]
    assert any(r["failed"] == "pb/m@b1" and "different answer" in r["error"] for r in rescues)


def test_after_a_rescue_restarts_the_answer_the_next_candidate_continues_it(rig: Rig) -> None:
    """The fallback restarts with a different answer (that attempt fails); the preferred target,
    whose cut happened once, is asked next with the prefill and finishes the first answer."""
    gw = rig.gateway(resilience={"retries": {"per_target": 0}})
    rig.a.set_behaviour("m", f"{FIRST}+cut-after-3+faults-times-1+continue")
    rig.b.set_behaviour("m", SECOND)
    text, finishes, clean = read_stream(gw, "chat")
    assert text == "Hello from the first model today"
    assert finishes == ["stop"] and clean
    assert rig.a.calls("m") == 2 and rig.b.calls("m") == 1
    assert usage_rows(gw)[0]["rescued"] is True


def test_the_rescue_metric_counts_each_stream_once_by_whether_the_client_got_the_whole_answer(
    rig: Rig,
) -> None:
    """Two streams are cut; each rescue takes several attempts. The first ends whole through the
    fallback, the second does not (the fallback starts a different answer): the metric says one
    ``rescued`` and one ``failed``, matching the usage rows."""
    gw = rig.gateway()
    rig.a.set_behaviour("m", f"{FIRST}+cut-after-3+continue")
    rig.b.set_behaviour("m", f"{FIRST}+continue")
    assert read_stream(gw, "chat")[2]
    rig.b.set_behaviour("m", SECOND)
    assert not read_stream(gw, "chat")[2]
    assert [r["rescued"] for r in usage_rows(gw)] == [False, True]
    metrics = httpx.get(f"{gw.url}/metrics", timeout=5).text
    assert 'omniroute_stream_rescues_total{outcome="rescued",provider="pa"} 1.0' in metrics
    assert 'omniroute_stream_rescues_total{outcome="failed",provider="pa"} 1.0' in metrics
