"""Fusion (COMBO-5), pipeline and agentic orchestration (COMBO-6) end to end against the fake providers
(seed 001 "Fusion Strategy", "Agentic pipeline mode").

Panel answers and planner decisions are scripted with the fakes' ``answer-TEXT`` directive, set per
model with ``FakeProviderThread.set_behaviour`` (cleared after each test) so the routed model ids stay
the catalog ones and keep their prices.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing._openai import OpenAIRenderer
from omniroute.testing.fake_provider import RecordedRequest
from omniroute.testing.faults import count_words
from omniroute.testing.gateway import GatewayThread

Script = Callable[[str, str, str], None]
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
PRICES = {"o": (1.0, 2.0), "c": (0.5, 1.0), "g": (0.1, 0.4)}


def answer_spec(text: str) -> str:
    """The fake-provider directive answering ``text`` (``_`` would read as a space, so it is escaped)."""
    return "answer-" + urllib.parse.quote(text, safe="").replace("_", "%5F")


@pytest.fixture
def script(fakes: dict[str, FakeProviderThread]) -> Iterator[Script]:
    """``script(fake, model, text)``: that fake answers ``text`` for ``model``; undone after the test."""
    done: list[tuple[str, str]] = []

    def set_answer(fake: str, model: str, text: str) -> None:
        fakes[fake].set_behaviour(model, answer_spec(text))
        done.append((fake, model))

    yield set_answer
    for fake, model in done:
        fakes[fake].set_behaviour(model, "")


def combo(name: str, strategy: str, targets: list[Any], **config: Any) -> dict[str, Any]:
    steps = [t if isinstance(t, dict) else {"model": t} for t in targets]
    return {"name": name, "strategy": strategy, "targets": steps, "config": config}


def gateway_with(make_gateway: Callable[..., GatewayThread], *combos: dict[str, Any]) -> GatewayThread:
    return make_gateway({"combos": list(combos)})


def chat(gt: GatewayThread, body: dict[str, Any], path: str = "/chat/completions") -> httpx.Response:
    return httpx.post(f"{gt.base_url}{path}", json=body, timeout=15)


def sse(gt: GatewayThread, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The data objects of a streamed chat completion (``[DONE]`` dropped)."""
    out: list[dict[str, Any]] = []
    with httpx.stream("POST", f"{gt.base_url}/chat/completions", json=body, timeout=15) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append(json.loads(line[6:]))
    return out


def model_requests(fake: FakeProviderThread) -> list[RecordedRequest]:
    return [r for r in fake.requests if r.model is not None]


def prompt_tokens(req: RecordedRequest) -> int:
    """What the fake counted as the prompt of ``req``."""
    return OpenAIRenderer().read(req.body, req.model or "", False).words


def usage_rows(gt: GatewayThread, request_id: str) -> list[dict[str, Any]]:
    async def rows(g: Any) -> list[dict[str, Any]]:
        await g.usage.flush()
        return [r for r in await g.store.recent_usage(limit=100) if r["request_id"] == request_id]

    return gt.call(rows)


def decision(gt: GatewayThread, request_id: str) -> dict[str, Any]:
    async def get(g: Any) -> dict[str, Any]:
        return dict(await g.get_decision(request_id))

    return gt.call(get)


# -- fusion ------------------------------------------------------------------------------------------

PANEL = ["local-o/model-o", "local-c/model-c", "local-g/model-g"]
ANSWERS = {"o": "Paris is the capital.", "c": "The capital is Paris.", "g": "Paris, on the Seine."}


def test_fusion_panel_then_judge_with_anonymised_sources_and_summed_usage(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], script: Script
) -> None:
    for n, text in ANSWERS.items():
        script(n, f"model-{n}", text)
    cfg = {"judgeModel": "local-o/model-o", "fusionTuning": {"minPanel": 2}}
    gt = gateway_with(make_gateway, combo("fuse", "fusion", PANEL, **cfg))
    r = chat(gt, {"model": "fuse", "messages": QUESTION})
    assert r.status_code == 200, r.text
    o, c, g = (model_requests(fakes[n]) for n in "ocg")
    assert (len(o), len(c), len(g)) == (2, 1, 1)  # 3 panel calls + 1 judge call (on O)
    for panel_req in (o[0], c[0], g[0]):
        assert not panel_req.body.get("stream") and "tools" not in panel_req.body
    judge = o[1]
    assert judge.received_at >= max(o[0].received_at, c[0].received_at, g[0].received_at)
    text = json.dumps(judge.body["messages"])
    for i, answer in enumerate(ANSWERS.values(), 1):
        assert answer in text
        assert f"[Source {i}]" in text
    assert "Source 4" not in text
    for name in ("local-o", "local-c", "local-g", "model-o", "model-c", "model-g", "fake provider"):
        assert name not in text
    for word in ("Consensus", "Contradictions", "Partial coverage", "Unique insights", "Blind spots"):
        assert word in text
    assert r.json()["choices"][0]["message"]["content"] == ANSWERS["o"]  # the judge (O) answers
    # every call's usage is summed into the response usage
    calls = [*o, *c, *g]
    expected_prompt = sum(prompt_tokens(q) for q in calls)
    expected_completion = sum(count_words(a) for a in ANSWERS.values()) + count_words(ANSWERS["o"])
    usage = r.json()["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (expected_prompt, expected_completion)
    # usage log: one main row with the totals, one member row per panel answer
    rows = usage_rows(gt, r.headers["x-request-id"])
    main = [row for row in rows if row["member"] is None]
    members = sorted((row for row in rows if row["member"]), key=lambda row: row["member"])
    assert len(main) == 1 and [m["member"] for m in members] == ["panel-1", "panel-2", "panel-3"]
    assert main[0]["prompt_tokens"] == expected_prompt
    assert main[0]["model"] == "model-o" and main[0]["strategy"] == "fusion"

    def cost(n: str, req: RecordedRequest, answer: str) -> float:
        pin, pout = PRICES[n]
        return (prompt_tokens(req) * pin + count_words(answer) * pout) / 1e6

    member_cost = (
        cost("o", o[0], ANSWERS["o"]) + cost("c", c[0], ANSWERS["c"]) + cost("g", g[0], ANSWERS["g"])
    )
    assert sum(m["cost_usd"] for m in members) == pytest.approx(member_cost)
    assert main[0]["cost_usd"] == pytest.approx(member_cost + cost("o", judge, ANSWERS["o"]))
    d = decision(gt, r.headers["x-request-id"])
    assert d["strategy"] == "fusion" and d["fusion"]["mode"] == "judge"
    assert len(d["attempts"]) == 4 and r.headers["x-omniroute-attempts"] == "4"


def test_fusion_straggler_is_cancelled_after_grace(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    panel = ["local-o/model-o", "local-c/model-c", "local-g/model-g+latency-20000"]
    cfg = {"fusionTuning": {"minPanel": 2, "stragglerGraceMs": 500}}
    gt = gateway_with(make_gateway, combo("fuse-slow", "fusion", panel, **cfg))
    t0 = time.monotonic()
    r = chat(gt, {"model": "fuse-slow", "messages": QUESTION})
    elapsed = time.monotonic() - t0
    assert r.status_code == 200, r.text
    assert elapsed < 2.0
    fakes["g"].wait_until(lambda p: p.cancelled >= 1, timeout_s=2)
    assert fakes["g"].cancelled == 1
    o = model_requests(fakes["o"])
    c = model_requests(fakes["c"])
    assert len(o) == 2  # panel + judge (default judge: the first panel model)
    judge = o[1]
    second_answer = max(o[0].received_at, c[0].received_at)
    assert 0.45 <= judge.received_at - second_answer <= 1.2
    assert fakes["g"].cancel_times[0] <= judge.received_at + 0.05  # cancelled when the judge starts
    text = json.dumps(judge.body["messages"])
    assert "[Source 2]" in text and "[Source 3]" not in text
    d = decision(gt, r.headers["x-request-id"])
    assert d["fusion"]["stop"] == "grace"
    assert [m["reason"] for m in d["fusion"]["panel"]][2] == "straggler_dropped"


def test_fusion_every_member_failing_is_503_listing_each_reason(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    panel = ["local-o/model-o+fail-503", "local-c/model-c+fail-500", "local-g/model-g+fail-429"]
    gt = gateway_with(make_gateway, combo("fuse-dead", "fusion", panel))
    r = chat(gt, {"model": "fuse-dead", "messages": QUESTION})
    assert r.status_code == 503, r.text
    body = r.json()
    msg = body["error"]["message"]
    assert "All 3 fusion panel members failed" in msg
    for model in panel:
        assert model in msg
    members = body["diagnostics"]["members"]
    assert [m["model"] for m in members] == panel
    assert [m["status"] for m in members] == [503, 503, 429]  # RESIL-7 status of each member
    assert "Service Unavailable" in members[0]["reason"] and "Internal Server Error" in members[1]["reason"]
    assert "Too Many Requests" in members[2]["reason"]
    assert {a["provider"] for a in body["diagnostics"]["attempted"]} == {"local-o", "local-c", "local-g"}
    rows = usage_rows(gt, r.headers["x-request-id"])
    assert sorted(row["member"] or "" for row in rows) == ["", "panel-1", "panel-2", "panel-3"]


@pytest.mark.parametrize("stream", [False, True])
def test_fusion_single_survivor_without_judge_is_returned_directly(
    make_gateway: Callable[..., GatewayThread],
    fakes: dict[str, FakeProviderThread],
    script: Script,
    stream: bool,
) -> None:
    script("c", "model-c", "Only C knows: Paris.")
    panel = ["local-o/model-o+fail-503", "local-c/model-c", "local-g/model-g+fail-500"]
    gt = gateway_with(make_gateway, combo("fuse-one", "fusion", panel))
    body: dict[str, Any] = {"model": "fuse-one", "messages": QUESTION}
    if not stream:
        r = chat(gt, body)
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"] == "Only C knows: Paris."
    else:
        events = sse(gt, {**body, "stream": True, "stream_options": {"include_usage": True}})
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
        assert text == "Only C knows: Paris."
        assert events[-1]["usage"]["completion_tokens"] == count_words("Only C knows: Paris.")
        assert any(e["choices"] and e["choices"][0].get("finish_reason") == "stop" for e in events)
    assert fakes["o"].calls() == 1 and fakes["c"].calls() == 1  # no judge call


def test_fusion_with_tools_goes_straight_to_the_judge(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    cfg = {"judgeModel": "local-g/model-g+tool-call"}
    gt = gateway_with(make_gateway, combo("fuse-tools", "fusion", PANEL, **cfg))
    r = chat(gt, {"model": "fuse-tools", "messages": QUESTION, "tools": [TOOL]})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert (fakes["o"].calls(), fakes["c"].calls(), fakes["g"].calls()) == (0, 0, 1)
    assert model_requests(fakes["g"])[0].body["tools"] == [TOOL]
    # tool_choice "none" is not a tool request: the panel runs
    r = chat(gt, {"model": "fuse-tools", "messages": QUESTION, "tools": [TOOL], "tool_choice": "none"})
    assert r.status_code == 200 and fakes["o"].calls() == 1 and fakes["c"].calls() == 1


def test_fusion_judge_stream_keeps_stream_flag_and_sums_usage(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gt = gateway_with(make_gateway, combo("fuse-stream", "fusion", PANEL[:2]))
    events = sse(
        gt,
        {
            "model": "fuse-stream",
            "messages": QUESTION,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    o = model_requests(fakes["o"])
    c = model_requests(fakes["c"])
    assert not o[0].body.get("stream") and not c[0].body.get("stream") and o[1].body.get("stream") is True
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    assert text == "Hello from o (model-o)."
    usage = events[-1]["usage"]
    assert usage["prompt_tokens"] == sum(prompt_tokens(q) for q in (*o, *c))
    assert usage["completion_tokens"] == 3 * count_words("Hello from o (model-o).")


def test_fusion_config_errors_are_400(make_gateway: Callable[..., GatewayThread]) -> None:
    """COMBO-5/COMBO-6: a panel over maxPanel is a 400 per request; an empty fusion or pipeline is
    refused with a 400 when created through the API (and stops the start when declared in config)."""
    gt = gateway_with(make_gateway, combo("fuse-big", "fusion", PANEL, fusionTuning={"maxPanel": 2}))
    r = chat(gt, {"model": "fuse-big", "messages": QUESTION})
    assert r.status_code == 400 and "maxPanel" in r.json()["error"]["message"]
    for name, strategy in (("fuse-empty", "fusion"), ("pipe-empty", "pipeline")):
        r = httpx.post(
            f"{gt.url}/api/combos", json={"name": name, "strategy": strategy, "targets": []}, timeout=10
        )
        assert r.status_code == 400 and r.json()["error"]["param"] == "targets"


def test_fusion_member_may_be_a_combo_ref(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    inner = combo("inner", "priority", ["local-g/model-g+fail-503", "local-c/model-c"])
    outer = combo(
        "fuse-ref", "fusion", ["local-o/model-o", {"combo_ref": "inner"}, {"combo_ref": "fuse-ref"}]
    )
    gt = gateway_with(make_gateway, inner, outer)
    r = chat(gt, {"model": "fuse-ref", "messages": QUESTION})
    assert r.status_code == 200, r.text
    d = decision(gt, r.headers["x-request-id"])
    panel = d["fusion"]["panel"]
    assert [p["status"] for p in panel] == [200, 200, 503]
    assert "cycle" in panel[2]["reason"]
    assert panel[1]["served"].startswith("local-c/model-c@")
    assert "Hello from c (model-c)." in json.dumps(model_requests(fakes["o"])[1].body["messages"])


# -- pipeline ----------------------------------------------------------------------------------------


def pipeline_combo(name: str, b_model: str = "local-c/model-c") -> dict[str, Any]:
    steps = [
        {"model": "local-o/model-o", "prompt": "Summarise the question."},
        {"model": b_model, "prompt": "Rewrite it formally."},
        {"model": "local-g/model-g"},
    ]
    return combo(name, "pipeline", steps)


@pytest.mark.parametrize("stream", [False, True])
def test_pipeline_threads_each_output_into_the_next_step(
    make_gateway: Callable[..., GatewayThread],
    fakes: dict[str, FakeProviderThread],
    script: Script,
    stream: bool,
) -> None:
    script("o", "model-o", "Alpha output.")
    script("c", "model-c", "Bravo output.")
    gt = gateway_with(make_gateway, pipeline_combo("pipe"))
    body: dict[str, Any] = {"model": "pipe", "messages": QUESTION, "tools": [TOOL], "tool_choice": "none"}
    if stream:
        events = sse(gt, {**body, "stream": True, "stream_options": {"include_usage": True}})
        text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
        usage = events[-1]["usage"]
    else:
        r = chat(gt, body)
        assert r.status_code == 200, r.text
        text, usage = r.json()["choices"][0]["message"]["content"], r.json()["usage"]
    assert text == "Hello from g (model-g)."
    (a,), (b,), (c,) = (model_requests(fakes[n]) for n in "ocg")
    assert a.body["messages"] == [{"role": "system", "content": "Summarise the question."}, *QUESTION]
    assert b.body["messages"] == [
        {"role": "system", "content": "Rewrite it formally."},
        {"role": "user", "content": "Alpha output."},
    ]
    assert c.body["messages"] == [{"role": "user", "content": "Bravo output."}]
    for step in (a, b):
        assert "stream" not in step.body and "tools" not in step.body
    assert c.body.get("stream") is (True if stream else None)
    assert c.body["tools"] == [TOOL]  # the final step keeps the client's tools
    assert usage["prompt_tokens"] == sum(prompt_tokens(q) for q in (a, b, c))


def test_pipeline_failing_step_names_the_step_and_model(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gt = gateway_with(make_gateway, pipeline_combo("pipe-bad", "local-c/model-c+fail-503"))
    r = chat(gt, {"model": "pipe-bad", "messages": QUESTION})
    assert r.status_code == 503, r.text
    msg = r.json()["error"]["message"]
    assert "Pipeline step 2 (local-c/model-c+fail-503) failed" in msg
    assert fakes["g"].calls() == 0


def test_pipeline_empty_step_answer_is_502(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], script: Script
) -> None:
    script("o", "model-o", " ")
    gt = gateway_with(make_gateway, pipeline_combo("pipe-empty-answer"))
    r = chat(gt, {"model": "pipe-empty-answer", "messages": QUESTION})
    assert r.status_code == 502, r.text
    assert "Pipeline step 1 (local-o/model-o) failed" in r.json()["error"]["message"]
    assert fakes["c"].calls() == 0


def test_pipeline_step_prompt_over_limit_is_400(make_gateway: Callable[..., GatewayThread]) -> None:
    gt = make_gateway()

    async def add(g: Any) -> None:
        steps = [{"model": "local-o/model-o", "prompt": "x" * 20_001}, {"model": "local-c/model-c"}]
        await g.store.create_combo({"name": "pipe-long", "strategy": "pipeline", "targets": steps})
        await g.refresh()

    gt.call(add)
    r = chat(gt, {"model": "pipe-long", "messages": QUESTION})
    assert r.status_code == 400 and r.json()["error"]["param"] == "targets[0].prompt"


# -- agentic orchestration ---------------------------------------------------------------------------

WEATHER_Q = [{"role": "user", "content": "Weather in Paris and in Rome?"}]


def agent_combo(name: str, planner: str, executor: str, **agentic: Any) -> dict[str, Any]:
    return combo(
        name,
        "pipeline",
        [f"local-o/{planner}", f"local-c/{executor}+tool-call"],
        agenticOrchestration={"enabled": True, **agentic},
    )


def tool_turn(message: dict[str, Any], result: str) -> list[dict[str, Any]]:
    """The assistant tool-call turn as the client echoes it back, plus the tool results."""
    calls = message["tool_calls"]
    results = [{"role": "tool", "tool_call_id": call["id"], "content": result} for call in calls]
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]


def test_agentic_planner_reviews_each_tool_round_then_answers(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], script: Script
) -> None:
    gt = gateway_with(make_gateway, agent_combo("agent", "planner-a", "exec-a"))
    base = {"model": "agent", "tools": [TOOL]}
    # turn 1: a fresh request; the planner plans (prose), the executor emits the client's tool call
    r1 = chat(gt, {**base, "messages": WEATHER_Q})
    assert r1.status_code == 200, r1.text
    m1 = r1.json()["choices"][0]["message"]
    assert r1.json()["choices"][0]["finish_reason"] == "tool_calls" and m1["tool_calls"]
    # turn 2: the client returns the result; the planner asks for another round
    script("o", "planner-a", json.dumps({"action": "tool", "instruction": "Now get the weather for Rome."}))
    conv = [*WEATHER_Q, *tool_turn(m1, "Paris: sunny")]
    r2 = chat(gt, {**base, "messages": conv})
    assert r2.status_code == 200, r2.text
    m2 = r2.json()["choices"][0]["message"]
    assert r2.json()["choices"][0]["finish_reason"] == "tool_calls" and m2["tool_calls"]
    executor = model_requests(fakes["c"])
    assert len(executor) == 2 and executor[1].body["tools"] == [TOOL]
    assert "Now get the weather for Rome." in json.dumps(executor[1].body["messages"])
    assert executor[1].body["messages"][-1] == conv[-1]  # the executor sees the tool result
    # turn 3: the planner reviews the second result and answers; the client streams
    script("o", "planner-a", '```json\n{"action": "final", "answer": "Sunny in Paris, rainy in Rome."}\n```')
    conv = [*conv, *tool_turn(m2, "Rome: rainy")]
    events = sse(gt, {**base, "messages": conv, "stream": True})
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices"))
    assert text == "Sunny in Paris, rainy in Rome."
    assert not any(e["choices"][0]["delta"].get("tool_calls") for e in events if e.get("choices"))
    planner = model_requests(fakes["o"])
    assert len(planner) == 3 and fakes["c"].calls() == 2  # one buffered planner decision per turn
    for p in planner:
        assert "tools" not in p.body and not p.body.get("stream")
    review = json.dumps(planner[2].body["messages"])
    assert "Paris: sunny" in review and "Rome: rainy" in review and "2 of at most 8" in review


def test_agentic_round_limit_forces_the_planner_to_answer(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gt = gateway_with(make_gateway, agent_combo("agent-1", "planner-b", "exec-b", maxToolRounds=1))
    base = {"model": "agent-1", "tools": [TOOL]}
    r1 = chat(gt, {**base, "messages": WEATHER_Q})
    m1 = r1.json()["choices"][0]["message"]
    assert m1["tool_calls"]
    r2 = chat(gt, {**base, "messages": [*WEATHER_Q, *tool_turn(m1, "Paris: sunny")]})
    assert r2.status_code == 200, r2.text
    choice = r2.json()["choices"][0]
    assert choice["message"]["content"] == "Hello from o (planner-b)." and not choice["message"].get(
        "tool_calls"
    )
    assert fakes["c"].calls() == 1
    final = model_requests(fakes["o"])[-1]
    assert "tools" not in final.body and "No more tool rounds" in json.dumps(final.body["messages"])
    d = decision(gt, r2.headers["x-request-id"])
    assert d["agentic"]["planner"] == "limit reached" and d["agentic"]["client_facing"] == "planner"


def test_agentic_detects_anthropic_and_responses_tool_results(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], script: Script
) -> None:
    gt = gateway_with(make_gateway, agent_combo("agent-x", "planner-x", "exec-x"))
    script("o", "planner-x", '{"action": "final", "answer": "Done: sunny."}')
    anthropic_body = {
        "model": "agent-x",
        "max_tokens": 100,
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "tu_1", "name": "get_weather", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "sunny"}]},
        ],
    }
    r = httpx.post(f"{gt.url}/v1/messages", json=anthropic_body, timeout=15)
    assert r.status_code == 200, r.text
    assert r.json()["content"][0]["text"] == "Done: sunny."
    responses_body = {
        "model": "agent-x",
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        "input": [
            {"role": "user", "content": "Weather in Paris?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        ],
    }
    r = httpx.post(f"{gt.url}/v1/responses", json=responses_body, timeout=15)
    assert r.status_code == 200, r.text
    assert "Done: sunny." in json.dumps(r.json()["output"])
    assert fakes["c"].calls() == 0  # both were continuations the planner answered
    for p in model_requests(fakes["o"]):
        assert "sunny" in json.dumps(p.body["messages"]) and "1 of at most 8" in json.dumps(
            p.body["messages"]
        )
