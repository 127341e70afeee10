"""Unit tests of the multi-call strategies' pure parts (COMBO-5 fusion, COMBO-6 pipeline and agentic
orchestration; seed 001): judge prompt and anonymisation, quorum-grace collection, step bodies, the
planner decision parser, tool-continuation detection for every client wire format, validation,
usage sums and the fake provider's ``answer-`` directive."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, cast

import pytest

from omniroute.clock import FakeClock
from omniroute.routing.agentic import (
    clamp_rounds,
    count_tool_rounds,
    executor_body,
    is_tool_continuation,
    parse_decision,
    planner_body,
)
from omniroute.routing.engine import Outcome, StreamOutcome
from omniroute.routing.fusion import (
    FusionTuning,
    build_judge_prompt,
    collect_quorum,
    effective_min_panel,
    judge_body,
)
from omniroute.routing.multicall import validate_multi_call_options, warn_misplaced_options
from omniroute.routing.multicall_parts import (
    PricedUsage,
    SummedStream,
    add_usage,
    completion_chunks,
    flatten_tool_turns,
    has_tools,
    toolless,
)
from omniroute.routing.pipeline import step_body
from omniroute.testing.faults import parse_behaviour
from omniroute.values import Candidate, Connection, ModelInfo, ProviderInfo, Usage
from omniroute.wire.anthropic import inbound as anthropic_in
from omniroute.wire.responses import inbound as responses_in

TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {}}}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}


# -- fusion -----------------------------------------------------------------------------------------


def test_judge_prompt_anonymises_and_asks_for_the_analysis() -> None:
    prompt = build_judge_prompt(["Answer A.", "  Answer B.  ", "Answer C."])
    assert "[Source 1]\nAnswer A." in prompt and "[Source 2]\nAnswer B." in prompt and "[Source 3]" in prompt
    assert "Source 4" not in prompt and "3 independent experts" in prompt
    for word in ("Consensus", "Contradictions", "Partial coverage", "Unique insights", "Blind spots"):
        assert word in prompt
    assert "ONE final answer" in prompt
    assert prompt.index("=== PANEL ANSWERS ===") < prompt.index("=== END PANEL ANSWERS ===")


def test_judge_body_keeps_stream_and_tools_and_appends_one_user_turn() -> None:
    body = {"messages": [{"role": "user", "content": "q"}], "stream": True, "tools": [TOOL], "temperature": 0}
    out = judge_body(body, ["a", "b"])
    assert out["stream"] is True and out["tools"] == [TOOL] and out["temperature"] == 0
    assert out["messages"][0] == body["messages"][0] and out["messages"][1]["role"] == "user"
    assert len(body["messages"]) == 1  # the client's body is not mutated


@pytest.mark.parametrize(
    ("requested", "size", "expected"), [(2, 3, 2), (1, 3, 2), (0, 5, 2), (5, 3, 3), (3, 40, 3), (2, 1, 1)]
)
def test_min_panel_is_clamped_to_two_and_panel_size(requested: int, size: int, expected: int) -> None:
    assert effective_min_panel(requested, size) == expected


def test_fusion_tuning_defaults_and_overrides() -> None:
    t = FusionTuning.from_config({}, 3)
    assert (t.min_panel, t.grace_s, t.hard_s, t.max_panel) == (2, 8.0, 90.0, 40)
    t = FusionTuning.from_config({"fusionTuning": {"minPanel": 9, "stragglerGraceMs": 500, "maxPanel": 5}}, 4)
    assert (t.min_panel, t.grace_s, t.max_panel) == (4, 0.5, 5)
    assert FusionTuning.from_config({"fusionTuning": {"minPanel": "x", "maxPanel": True}}, 3).max_panel == 40


async def _after(clock: FakeClock, delay: float, value: bool) -> bool:
    await clock.sleep(delay)
    return value


def _tasks(clock: FakeClock, *specs: tuple[float, bool]) -> list[asyncio.Task[bool]]:
    return [asyncio.create_task(_after(clock, d, v)) for d, v in specs]


async def test_quorum_then_grace_cancels_the_straggler() -> None:
    clock = FakeClock()
    t0 = clock.monotonic()
    tasks = _tasks(clock, (0.01, True), (0.02, True), (5.0, True))
    report = await clock.run(collect_quorum(tasks, bool, clock=clock, min_ok=2, grace_s=0.1, hard_s=10))
    assert report.stop == "grace" and report.dropped == [2] and tasks[2].cancelled()
    assert report.quorum_s is not None and 0.015 <= report.quorum_s < 0.1
    assert clock.monotonic() - t0 < 0.5


async def test_quorum_all_settled_before_grace() -> None:
    clock = FakeClock()
    report = await clock.run(
        collect_quorum(
            _tasks(clock, (0.01, True), (0.02, True), (0.03, True)),
            bool,
            clock=clock,
            min_ok=2,
            grace_s=1,
            hard_s=5,
        )
    )
    assert report.stop == "all_settled" and report.dropped == []


async def test_failures_do_not_count_toward_quorum() -> None:
    clock = FakeClock()
    tasks = _tasks(clock, (0.01, False), (0.02, True), (0.15, True))
    report = await clock.run(collect_quorum(tasks, bool, clock=clock, min_ok=2, grace_s=0.05, hard_s=5))
    assert report.stop == "all_settled" and report.dropped == [] and tasks[2].result() is True


async def test_hard_timeout_caps_the_panel() -> None:
    clock = FakeClock()
    tasks = _tasks(clock, (0.01, True), (5.0, True), (5.0, False))
    report = await clock.run(collect_quorum(tasks, bool, clock=clock, min_ok=2, grace_s=1, hard_s=0.1))
    assert report.stop == "hard_timeout" and report.dropped == [1, 2] and report.quorum_s is None


def test_tool_bypass_only_when_tools_and_tool_choice_not_none() -> None:
    assert has_tools({"tools": [TOOL]}) and has_tools({"tools": [TOOL], "tool_choice": "required"})
    assert not has_tools({"tools": [TOOL], "tool_choice": "none"}) and not has_tools({"tools": []})


def test_toolless_strips_tools_and_stream_and_flattens_tool_turns() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ],
        "tools": [TOOL],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 5,
    }
    out = toolless(body)
    assert set(out) == {"messages", "max_tokens"}
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]
    assert 'get_weather({"city":"Paris"})' in out["messages"][1]["content"]
    assert out["messages"][2]["content"] == "[tool result call_1]\nsunny"
    assert flatten_tool_turns([{"role": "user", "content": "x"}]) == [{"role": "user", "content": "x"}]


# -- pipeline -----------------------------------------------------------------------------------------


def test_step_bodies() -> None:
    body = {"messages": [{"role": "user", "content": "q"}], "stream": True, "tools": [TOOL]}
    first = step_body(body, "Plan it.", None, final=False)
    assert first["messages"] == [{"role": "system", "content": "Plan it."}, {"role": "user", "content": "q"}]
    assert "stream" not in first and "tools" not in first
    later = step_body(body, "", "step one said this", final=True)
    assert later["messages"] == [{"role": "user", "content": "step one said this"}]
    assert later["stream"] is True and later["tools"] == [TOOL]


# -- agentic ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "action", "instruction", "answer"),
    [
        (
            '{"action": "tool", "instruction": "call get_weather for Rome"}',
            "tool",
            "call get_weather for Rome",
            "",
        ),
        ('{"action": "final", "answer": "It is sunny."}', "final", "", "It is sunny."),
        ('```json\n{"action":"final","answer":"A {braced} answer"}\n```', "final", "", "A {braced} answer"),
        ('Sure! Decision: {"Action": "Continue", "Instructions": "next"} thanks', "tool", "next", ""),
        ('{"decision": "final-answer", "response": "x"}', "final", "", "x"),
        ('{"answer": "only an answer"}', "final", "", "only an answer"),
        ('{"instruction": "only an instruction"}', "tool", "only an instruction", ""),
        ('{"note": 1} then {"action": "done", "answer": "y"}', None, "", ""),
        ("no json at all", None, "", ""),
        ("{broken json", None, "", ""),
        ('["a", "list"]', None, "", ""),
    ],
)
def test_parse_decision(text: str, action: str | None, instruction: str, answer: str) -> None:
    d = parse_decision(text)
    assert (d.action, d.instruction, d.answer) == (action, instruction, answer)


def test_round_counting_and_continuation_openai_shape() -> None:
    user = {"role": "user", "content": "weather?"}
    turn = [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    assert (count_tool_rounds([user]), is_tool_continuation([user])) == (0, False)
    assert (count_tool_rounds([user, *turn]), is_tool_continuation([user, *turn])) == (1, True)
    done = [
        user,
        *turn,
        {"role": "assistant", "content": "It is sunny."},
        {"role": "user", "content": "thanks"},
    ]
    assert (count_tool_rounds(done + turn), is_tool_continuation(done)) == (2, False)
    assert (
        clamp_rounds(None) == 8
        and clamp_rounds(0) == 1
        and clamp_rounds(99) == 32
        and clamp_rounds(True) == 8
    )


def test_continuation_detected_in_anthropic_tool_result() -> None:
    body = anthropic_in.to_canonical(
        {
            "model": "m",
            "max_tokens": 10,
            "messages": [
                {"role": "user", "content": "weather?"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "tu_1", "name": "w", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "tu_1", "content": "sunny"},
                        {"type": "text", "text": "and tomorrow?"},
                    ],
                },
            ],
        }
    )
    assert count_tool_rounds(body["messages"]) == 1 and is_tool_continuation(body["messages"])


def test_continuation_detected_in_responses_function_call_output() -> None:
    body, _ = responses_in.to_canonical(
        {
            "model": "m",
            "input": [
                {"role": "user", "content": "weather?"},
                {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            ],
        }
    )
    assert count_tool_rounds(body["messages"]) == 1 and is_tool_continuation(body["messages"])


def test_planner_and_executor_bodies() -> None:
    conv = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    body = {"messages": conv, "tools": [TOOL], "tool_choice": "auto", "stream": True}
    p = planner_body(body, 1, 8, must_answer=False)
    assert "tools" not in p and "tool_choice" not in p and p["messages"][0]["role"] == "system"
    text = json.dumps(p["messages"])
    assert (
        '\\"action\\": \\"tool\\"' in text and "1 of at most 8" in text and "- get_weather: Weather" in text
    )
    assert "Tool result [call_1]: sunny" in text and 'get_weather({\\"city\\":\\"Paris\\"})' in text
    assert "No more tool rounds" in json.dumps(planner_body(body, 8, 8, must_answer=True)["messages"])
    e = executor_body(body, "Call get_weather for Rome.")
    assert e["tools"] == [TOOL] and e["stream"] is True
    assert [m["role"] for m in e["messages"]] == ["system", "system", "user", "assistant", "tool"]
    assert "Call get_weather for Rome." in e["messages"][1]["content"]


# -- validation -----------------------------------------------------------------------------------------


def test_misplaced_options_warn(caplog: pytest.LogCaptureFixture) -> None:
    combo: dict[str, Any] = {
        "name": "c",
        "strategy": "priority",
        "targets": [{"model": "a/b", "prompt": "x"}],
        "config": {"judgeModel": "a/b", "fusionTuning": {}, "agenticOrchestration": {"enabled": True}},
    }
    with caplog.at_level(logging.WARNING):
        warnings = warn_misplaced_options(combo)
    assert len(warnings) == 4 and len(caplog.records) == 4
    assert warn_misplaced_options({"name": "f", "strategy": "fusion", "config": {"judgeModel": "a/b"}}) == []


def test_validation_errors() -> None:
    def params(combo: dict[str, Any]) -> list[str]:
        return [p for p, _ in validate_multi_call_options(combo)]

    assert params({"strategy": "fusion", "targets": []}) == ["targets"]
    big = {
        "strategy": "fusion",
        "targets": [{"model": "a/b"}] * 3,
        "config": {"fusionTuning": {"maxPanel": 2}},
    }
    assert params(big) == ["targets"]
    assert params({"strategy": "fusion", "targets": [{"model": "a/b"}], "config": {"judgeModel": 3}}) == [
        "config.judgeModel"
    ]
    assert params({"strategy": "pipeline", "targets": []}) == ["targets"]
    assert params({"strategy": "pipeline", "targets": [{"model": "a/b", "prompt": "x" * 20_001}]}) == [
        "targets[0].prompt"
    ]
    rounds = {"agenticOrchestration": {"enabled": True, "maxToolRounds": 33}}
    agentic = {"strategy": "pipeline", "targets": [{"model": "a/b"}], "config": rounds}
    assert params(agentic) == ["config.agenticOrchestration.maxToolRounds", "targets"]
    assert params({"strategy": "priority", "targets": []}) == []


# -- usage and streams ------------------------------------------------------------------------------------


def test_priced_usage_sums_costs_per_call() -> None:
    a, b = (
        ModelInfo("a", input_price=1.0, output_price=2.0),
        ModelInfo("b", input_price=10.0, output_price=20.0),
    )
    ua, ub = Usage(100, 10), Usage(1000, 100)
    summed = add_usage(ua, ub)
    cost = ua.cost_usd(a) + ub.cost_usd(b)
    total = PricedUsage(summed.prompt_tokens, summed.completion_tokens, cost=cost)
    assert total.cost_usd(a) == total.cost_usd(b) == pytest.approx(cost)
    assert total.to_openai()["total_tokens"] == 1210


RESPONSE = {
    "id": "x",
    "model": "m",
    "created": 1,
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi.", "tool_calls": [CALL]},
            "finish_reason": "tool_calls",
        }
    ],
}
CAND = Candidate(ProviderInfo("p"), Connection("c1", "p"), ModelInfo("m", input_price=1.0, output_price=2.0))
NOW = 1_700_000_000.0  # epoch s: stamps a replayed answer that has no ``created``


def test_completion_replays_as_chunks() -> None:
    chunks = completion_chunks(RESPONSE, NOW)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "Hi."}
    assert chunks[1]["choices"][0]["delta"]["tool_calls"][0]["index"] == 0
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert {c["created"] for c in chunks} == {1}
    unstamped = completion_chunks({k: v for k, v in RESPONSE.items() if k != "created"}, NOW)
    assert {c["created"] for c in unstamped} == {int(NOW)}


async def test_replayed_stream_carries_the_total_usage() -> None:
    so = SummedStream.replay(Outcome(RESPONSE, CAND, PricedUsage(10, 5, cost=0.5), 12.0), NOW)
    chunks = [c async for c in so.chunks()]
    assert len(chunks) == 3 and so.saw_finish
    assert so.usage is not None and so.usage.prompt_tokens == 10 and so.usage.cost_usd(CAND.model) == 0.5
    await so.finalize(None)


class _Closed:
    def close(self) -> None:
        return None


async def test_wrapped_stream_adds_member_usage_to_the_usage_chunk() -> None:
    usage_chunk = {"id": "x", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    first = [*completion_chunks(RESPONSE, NOW), usage_chunk]
    inner = StreamOutcome(
        CAND, first, cast(Any, _Closed()), cast(Any, None), cast(Any, None), 1.0, 1.0, finished=True
    )
    so = SummedStream.wrap(inner, Usage(100, 10), 1.0)
    assert so.usage is not None and so.usage.prompt_tokens == 100  # before the upstream reports usage
    chunks = [c async for c in so.chunks()]
    assert chunks[-1]["usage"]["prompt_tokens"] == 103 and chunks[-1]["usage"]["total_tokens"] == 115
    assert so.usage.prompt_tokens == 103
    assert so.usage.cost_usd(CAND.model) == pytest.approx(1.0 + (3 * 1.0 + 2 * 2.0) / 1e6)
    twice = SummedStream.wrap(SummedStream.wrap(inner, Usage(1, 1), 0.1), Usage(2, 2), 0.2)
    assert (twice.extra, twice.extra_cost) == (Usage(3, 3), pytest.approx(0.3))


# -- fake provider --------------------------------------------------------------------------------------


def test_fake_answer_directive() -> None:
    assert parse_behaviour("m+answer-Hi_there%2B%7B%7D").answer == "Hi there+{}"
    assert parse_behaviour("m+answer-a%5Fb+chunks-2").answer == "a_b"
    assert parse_behaviour("m").answer is None and parse_behaviour("m+answer-").answer is None
