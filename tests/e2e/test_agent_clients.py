"""The real coding-agent clients through the gateway, each in print (non-interactive) mode.

Claude Code, Codex CLI, Gemini CLI, opencode, ``llm`` and aider — installed by
``scripts/install-agents.sh`` (pinned versions, a cache outside the repository) — are pointed at a
gateway in front of the fake providers exactly as ``docs/CLIENTS.md`` says. Each client's default
model name is routed by a ``model_aliases`` entry to a combo of ANOTHER wire format (Anthropic client →
OpenAI-format upstream, Gemini CLI → Anthropic-format upstream …). Per client:

- a plain answer, and the model name the client sent as the gateway recorded it;
- a tool-using turn: the upstream calls one of the client's own tools with valid arguments
  (``call-NAME``), the client runs it in a temporary workspace and sends the result back; the fake is
  ``strict``, so the replayed call must look as a real provider of that family wants it;
- a second turn (the client's own "continue" option) that replays the first turn's signed reasoning,
  tool call and tool result to the strict upstream.

Where the client allows a custom model, it also answers from the real local model (llama-server).
Scenarios that fail for want of translation fidelity the gateway does not have yet are marked
``xfail(strict=True)`` with the missing capability, so they flip when it lands.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_support import (
    AGENTS,
    FAMILY_FAKE,
    SECRET,
    Agent,
    GeminiCli,
    Run,
    agent_config,
    answer,
    installed,
    spec,
)

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

pytestmark = pytest.mark.timeout(600)  # two client runs, each up to RUN_TIMEOUT_S on a loaded machine

# The cross-format combo each client's default model is routed to (never its own wire format).
CROSS = {
    "claude": "openai",
    "codex": "anthropic",
    "gemini": "anthropic",
    "opencode": "gemini",
    "llm": "anthropic",
    "aider": "gemini",
}
PROVIDER = {"openai": "oa", "anthropic": "an", "gemini": "ge"}
EDIT = (
    "notes.txt\n```\n<<<<<<< SEARCH\nThe secret word is PAPAYA-42.\n=======\n"
    "The secret word is MANGO-7.\n>>>>>>> REPLACE\n```\n"
)

Launch = Callable[..., tuple[Agent, GatewayThread]]


@pytest.fixture
def launch(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> Launch:
    """``launch(client, family=None, **server)`` → (the client set up against a fresh gateway whose
    aliases send its default model to ``via-<family>``, that gateway)."""

    def start(client: str, family: str | None = None, **server: Any) -> tuple[Agent, GatewayThread]:
        cache = installed(client)
        agent_cls = AGENTS[client]
        aliases = [(GeminiCli.router_model, "gemini-router")] if client == "gemini" else []
        aliases.append((agent_cls.default_model, f"via-{family or CROSS[client]}"))
        fakes["g"].set_behaviour("r", "m+" + answer(GeminiCli.router_answer))
        gw = make_gateway(replace=agent_config(fakes, tmp_path, aliases, **server))
        return agent_cls(cache, gw.url, tmp_path / client), gw

    return start


def usage_rows(gw: GatewayThread) -> list[dict[str, Any]]:
    return list(httpx.get(f"{gw.url}/api/usage", params={"limit": 200}, timeout=10).json()["data"])


def upstream(fakes: dict[str, FakeProviderThread], family: str) -> FakeProviderThread:
    return fakes[FAMILY_FAKE[family]]


def assert_ok(run: Run, gw: GatewayThread) -> None:
    """The client exited 0; otherwise fail with its output and the gateway's failed requests."""
    if run.returncode == 0:
        return
    failures = [row for row in usage_rows(gw) if row.get("status") != 200]
    raise AssertionError(f"{run.describe()}\ngateway failures: {json.dumps(failures, default=str)[:3000]}")


def behave(fakes: dict[str, FakeProviderThread], family: str, behaviour: str) -> None:
    upstream(fakes, family).set_behaviour("m", behaviour)


def tool_spec(agent: Agent, *directives: str) -> str:
    """The upstream's tool turn: aider's "tool" is an edit block in the answer; the others call."""
    if agent.name == "aider":
        return spec(*directives, answer(EDIT))
    return spec(*directives, call=agent.tool, args=agent.tool_args())


def tool_marker(agent: Agent) -> str:
    """Text only the tool's result (aider: its edit) contains."""
    return {"aider": "MANGO-7", "llm": "0.36"}.get(agent.name, SECRET)  # llm_version returns 0.36


def tool_result_seen(agent: Agent, run: Run) -> bool:
    """The client ran the tool and the upstream's follow-up (which repeats the result) reached it."""
    if agent.name == "aider":
        return tool_marker(agent) in (agent.workspace / "notes.txt").read_text()
    return "Tool result:" in run.answer and tool_marker(agent) in run.answer


# -- known gaps (each names the capability that is missing) ---------------------------------------

XFAIL: dict[tuple[str, str, str], str] = {}


def scenario(client: str, name: str, family: str | None = None) -> Any:
    """A parameter for ``client`` (and upstream ``family``, default its cross-format one) in scenario
    ``name``, xfail(strict) when the gateway lacks what it needs (see :data:`XFAIL`)."""
    family = family or CROSS[client]
    reason = XFAIL.get((client, name, family))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(client, family, marks=marks, id=f"{client}-via-{family}")


# -- (a) plain answer ---------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "family"), [scenario(c, "plain") for c in AGENTS])
def test_plain_answer_through_a_cross_format_combo(
    launch: Launch, fakes: dict[str, FakeProviderThread], client: str, family: str
) -> None:
    """The client's default model name lands on a combo of another wire format and the answer comes
    back; every request the client made was served, and the names it sent match its default."""
    agent, gw = launch(client, family)
    behave(fakes, family, spec(answer("Four, from the gateway.")))
    run = agent.run("What is 2 + 2? Answer in one word.")
    assert_ok(run, gw)
    assert "Four, from the gateway." in run.answer, run.describe()
    rows = usage_rows(gw)
    assert rows and all(row["status"] == 200 for row in rows), rows
    main = [row for row in rows if row["provider"] == PROVIDER[family]]
    assert main, rows
    assert all(fnmatch.fnmatch(row["requested_model"], agent.default_model) for row in main)


def test_codex_default_model_plain_answer(launch: Launch, fakes: dict[str, FakeProviderThread]) -> None:
    agent, gw = launch("codex")
    agent.model = None  # type: ignore[attr-defined]
    behave(fakes, CROSS["codex"], spec(answer("Four, from the gateway.")))
    run = agent.run("What is 2 + 2? Answer in one word.")
    assert_ok(run, gw)
    assert "Four, from the gateway." in run.answer


def test_codex_default_model_runs_its_custom_exec_tool(
    launch: Launch, fakes: dict[str, FakeProviderThread]
) -> None:
    """With its default model Codex declares the code-mode custom tool ``exec`` in an
    ``additional_tools`` item; a call of it reaches Codex as a ``custom_tool_call``, Codex runs the
    script and sends its result back as ``custom_tool_call_output``."""
    agent, gw = launch("codex")
    agent.model = None  # type: ignore[attr-defined]
    script = 'const out = await tools.exec_command({cmd: "cat notes.txt"});\ntext(out)'
    behave(fakes, CROSS["codex"], spec("strict", call="exec", args={"input": script}))
    run = agent.run("Read notes.txt and tell me the secret word.")
    assert_ok(run, gw)
    assert "Tool result:" in run.answer and SECRET in run.answer, run.describe()


# -- (b) a tool-using turn ---------------------------------------------------------------------------


@pytest.mark.parametrize(("client", "family"), [scenario(c, "tool") for c in AGENTS])
def test_tool_turn_runs_the_clients_own_tool_and_sends_the_result_back(
    launch: Launch, fakes: dict[str, FakeProviderThread], client: str, family: str
) -> None:
    agent, gw = launch(client, family)
    behave(fakes, family, tool_spec(agent, "strict"))
    run = agent.run("Read notes.txt and tell me the secret word.")
    assert_ok(run, gw)
    assert tool_result_seen(agent, run), run.describe()


# -- (c) a second turn replaying reasoning and tool results --------------------------------------


# Every client through its cross-format combo; the three with their own wire format also through
# the other families (their own included), so their conversations meet every upstream family.
REPLAYS = [scenario(c, "replay") for c in AGENTS] + [
    scenario(c, "replay", f) for c in ("claude", "codex", "gemini") for f in FAMILY_FAKE if f != CROSS[c]
]


@pytest.mark.parametrize(("client", "family"), REPLAYS)
def test_second_turn_replays_reasoning_and_tool_results_to_a_strict_upstream(
    launch: Launch, fakes: dict[str, FakeProviderThread], client: str, family: str
) -> None:
    agent, gw = launch(client, family)
    behave(fakes, family, tool_spec(agent, "reasoning", "strict"))
    first = agent.run("Read notes.txt and tell me the secret word.")
    assert_ok(first, gw)
    assert tool_result_seen(agent, first), first.describe()
    behave(fakes, family, spec("reasoning", "strict", answer("Second turn done.")))
    second = agent.run("Thanks. Now say you are done.", resume=True)
    assert_ok(second, gw)
    assert "Second turn done." in second.answer, second.describe()
    assert tool_marker(agent) in json.dumps(upstream(fakes, family).requests[-1].body)


# -- slow first token --------------------------------------------------------------------------------


def test_gemini_cli_waits_through_a_slow_first_token_on_early_headers_and_keepalives(
    launch: Launch, fakes: dict[str, FakeProviderThread]
) -> None:
    """The upstream's first token takes 4 s, four keep-alive intervals: the gateway has sent headers
    and keep-alives meanwhile, and Gemini CLI waits for the answer."""
    agent, gw = launch("gemini", stream_keepalive_s=1)
    behave(fakes, CROSS["gemini"], spec("slow-ttft-4000", answer("Slow but sure.")))
    run = agent.run("Say something slowly.")
    assert_ok(run, gw)
    assert "Slow but sure." in run.answer, run.describe()


# -- the real local model ---------------------------------------------------------------------------


@pytest.mark.parametrize("client", ["llm", "aider"])
def test_plain_answer_from_the_real_local_model(
    make_gateway: Callable[..., GatewayThread], llama_url: str, tmp_path: Path, client: str
) -> None:
    """Clients whose prompt fits SmolLM2's context get a real model's answer through a combo."""
    cache = installed(client)
    agent_cls = AGENTS[client]
    gw = make_gateway(
        replace={
            "database_url": f"sqlite:///{tmp_path}/omniroute.db",
            "providers": [
                {
                    "id": "llama",
                    "format": "openai",
                    "base_url": f"{llama_url}/v1",
                    "models": [{"id": "smollm2", "context_window": 4096, "max_output_tokens": 64}],
                }
            ],
            "connections": [{"id": "llama1", "provider": "llama", "api_key": "none"}],
            "combos": [{"name": "local", "strategy": "priority", "targets": [{"model": "llama/smollm2"}]}],
            "model_aliases": [{"match": agent_cls.default_model, "route": "local"}],
            "resilience": {"timeouts": {"ttft_s": 120, "idle_s": 60, "total_s": 240}},
        }
    )
    agent = agent_cls(cache, gw.url, tmp_path / client)
    agent.tools = False
    # Neither client caps the answer by default; a 135M model on 2 cores needs the cap.
    if client == "llm":
        extra = ["-o", "max_tokens", "24"]
    else:
        (agent.workspace / ".aider.model.settings.yml").write_text(
            "- name: openai/gpt-4.1\n  extra_params:\n    max_tokens: 24\n"
        )
        extra = ["--chat-mode", "ask"]
    run = agent.run("Say hello.", extra=extra)
    assert_ok(run, gw)
    rows = usage_rows(gw)
    assert rows and rows[0]["provider"] == "llama" and rows[0]["completion_tokens"] > 0, rows
