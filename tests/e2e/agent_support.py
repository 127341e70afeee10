"""Helpers for the real coding-agent clients end to end (`tests/e2e/test_agent_clients.py`).

- `installed`: where ``scripts/install-agents.sh`` put a client (it runs the script when the cache
  has no status yet); a client that could not be installed skips its tests with the reason the script
  wrote.
- `agent_config`: a gateway in front of the three session fakes, one per wire format — provider ``oa``
  (OpenAI format, fake O), ``an`` (Anthropic, fake C), ``ge`` (Gemini, fake G), model ``m`` each —
  with one combo per family (``via-openai`` …) and the model aliases a test gives, which is
  how an agent's default model name lands on a cross-format combo today.
- `Agent` and its subclasses: how each client is pointed at the gateway (the same settings
  ``docs/CLIENTS.md`` shows), run in print mode in a temporary workspace, continued for a second
  turn, and which of its own tools the fake calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from omniroute.testing import FakeProviderThread

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ("claude", "codex", "gemini", "opencode", "llm", "aider")
FAMILY_FAKE = {"openai": "o", "anthropic": "c", "gemini": "g"}
FAMILY_PATH = {"openai": "/v1", "anthropic": "", "gemini": "/v1beta"}
PROVIDERS = (("oa", "openai"), ("an", "anthropic"), ("ge", "gemini"))  # provider id, wire format
SECRET = "PAPAYA-42"
NOTES = f"The secret word is {SECRET}.\n"
RUN_TIMEOUT_S = 240.0  # one client invocation; generous for a loaded 2-core machine


def agents_cache() -> Path:
    """The clients' install cache; runs ``scripts/install-agents.sh`` when a client has no status."""
    cache = Path(os.environ.get("OMNIROUTE_AGENTS_CACHE") or Path.home() / ".cache/omniroute/agents")
    if not all((cache / "status" / client).exists() for client in CLIENTS):
        subprocess.run(
            ["bash", str(ROOT / "scripts/install-agents.sh")],
            check=False,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "OMNIROUTE_AGENTS_CACHE": str(cache)},
        )
    return cache


def installed(client: str) -> Path:
    """The cache folder when ``client`` installed; skips the test with the install's reason if not."""
    cache = agents_cache()
    status_file = cache / "status" / client
    status = status_file.read_text().strip() if status_file.exists() else "failed: no install status"
    if not status.startswith("ok"):
        pytest.skip(f"{client} could not be installed by scripts/install-agents.sh: {status}")
    return cache


def spec(*directives: str, call: str | None = None, args: dict[str, Any] | None = None) -> str:
    """A fake-provider behaviour spec; ``call``/``args`` become ``call-NAME`` and ``args-JSON``."""
    parts = ["m", *directives]
    if call is not None:
        parts.append("call-" + urllib.parse.quote(call, safe=""))
        parts.append("args-" + urllib.parse.quote(json.dumps(args or {}), safe=""))
    return "+".join(parts)


def answer(text: str) -> str:
    """An ``answer-TEXT`` directive for any text (``_`` and every special character escaped)."""
    return "answer-" + urllib.parse.quote(text, safe="").replace("_", "%5F")


def agent_config(
    fakes: dict[str, FakeProviderThread],
    tmp: Path,
    aliases: list[tuple[str, str]],
    **server: Any,
) -> dict[str, Any]:
    """Gateway config: providers ``oa``/``an``/``ge``, combos ``via-openai``/``via-anthropic``/
    ``via-gemini``/``gemini-router`` (fake G's model ``r``, for Gemini CLI's routing requests) and
    ``model_aliases`` from (glob, combo) pairs, the first match wins."""
    model = {
        "id": "m",
        "context_window": 1_000_000,
        "max_output_tokens": 32000,
        "capabilities": ["tools", "vision", "reasoning"],
    }
    providers = [
        {
            "id": pid,
            "format": family,
            "base_url": fakes[FAMILY_FAKE[family]].base_url + FAMILY_PATH[family],
            "models": [model, {**model, "id": "r"}],
        }
        for pid, family in PROVIDERS
    ]
    combos = [
        {"name": f"via-{family}", "strategy": "priority", "targets": [{"model": f"{pid}/m"}]}
        for pid, family in PROVIDERS
    ]
    combos.append({"name": "gemini-router", "strategy": "priority", "targets": [{"model": "ge/r"}]})
    return {
        "database_url": f"sqlite:///{tmp}/omniroute.db",
        "server": server,
        "providers": providers,
        "connections": [{"id": f"{pid}1", "provider": pid, "api_key": f"sk-{pid}"} for pid, _ in PROVIDERS],
        "combos": combos,
        "model_aliases": [{"match": pattern, "route": combo} for pattern, combo in aliases],
        "resilience": {"timeouts": {"connect_s": 5, "ttft_s": 60, "idle_s": 60, "total_s": 180}},
    }


@dataclass
class Run:
    """One finished client invocation: exit code, output streams and the answer text it printed."""

    returncode: int
    stdout: str
    stderr: str
    answer: str

    def describe(self) -> str:
        return f"exit {self.returncode}\nstdout: {self.stdout[-3000:]}\nstderr: {self.stderr[-3000:]}"


class Agent:
    """A coding-agent client pointed at a gateway, run non-interactively in ``workspace``.

    Subclasses set ``name`` (the install status key), ``default_model`` (a glob over the names it
    sends unless told otherwise, observed with this version), ``tool`` (one of its own tools the fake
    calls, with arguments built by `tool_args`) and implement `setup`, `argv` and `parse`.
    """

    name: ClassVar[str]
    default_model: ClassVar[str]
    tool: ClassVar[str]

    def __init__(self, cache: Path, gateway_url: str, root: Path) -> None:
        self.tools = True  # False: ask the client to offer the model no tools (where it can)
        self.cache = cache
        self.gateway_url = gateway_url
        self.home = root / "home"
        self.workspace = root / "workspace"
        self.home.mkdir(parents=True, exist_ok=True)
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.workspace / "notes.txt").write_text(NOTES)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "NO_COLOR": "1",
            "TERM": "dumb",
        }
        self.setup()

    @property
    def npm_bin(self) -> Path:
        return self.cache / "npm/node_modules/.bin"

    def setup(self) -> None:
        """Write the client's settings for the gateway into ``home``/``workspace``/``env``."""
        raise NotImplementedError

    def argv(self, prompt: str, *, resume: bool) -> list[str]:
        """The command line for one print-mode prompt; ``resume`` continues the last session."""
        raise NotImplementedError

    def parse(self, stdout: str) -> str:
        """The answer text in the client's output."""
        return stdout.strip()

    def tool_args(self) -> dict[str, Any]:
        """Valid arguments for `tool` that read ``notes.txt`` in the workspace."""
        raise NotImplementedError

    def run(self, prompt: str, *, resume: bool = False, extra: list[str] | None = None) -> Run:
        proc = subprocess.run(
            [*self.argv(prompt, resume=resume), *(extra or [])],
            cwd=self.workspace,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr, self.parse(proc.stdout))


class ClaudeCode(Agent):
    """Claude Code (``claude -p``): Anthropic Messages via ``ANTHROPIC_BASE_URL``."""

    name = "claude"
    default_model = "claude-*"
    tool = "Read"

    def setup(self) -> None:
        self.env |= {
            "ANTHROPIC_BASE_URL": self.gateway_url,
            "ANTHROPIC_API_KEY": "sk-omniroute",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        }

    def argv(self, prompt: str, *, resume: bool) -> list[str]:
        return [
            str(self.npm_bin / "claude"),
            "-p",
            prompt,
            "--output-format",
            "json",
            "--allowedTools",
            "Read",
            *(["--continue"] if resume else []),
        ]

    def parse(self, stdout: str) -> str:
        try:
            return str(json.loads(stdout).get("result", ""))
        except ValueError:
            return stdout

    def tool_args(self) -> dict[str, Any]:
        return {"file_path": str(self.workspace / "notes.txt")}


class CodexCli(Agent):
    """Codex CLI (``codex exec``): the Responses API through a custom model provider."""

    name = "codex"
    default_model = "gpt-*"
    tool = "exec_command"
    # Its default model (gpt-6.2-sol with 0.171) gets its tools as an ``additional_tools`` input item;
    # an older model name gets them in ``tools``, as every Responses server understands.
    model: str | None = "gpt-5.1-codex"

    def setup(self) -> None:
        codex_home = self.home / ".codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model_provider = "omniroute"\n\n'
            "[model_providers.omniroute]\n"
            'name = "OmniRoute"\n'
            f'base_url = "{self.gateway_url}/v1"\n'
            'env_key = "OMNIROUTE_API_KEY"\n'
            'wire_api = "responses"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n"
        )
        self.env |= {"CODEX_HOME": str(codex_home), "OMNIROUTE_API_KEY": "sk-omniroute"}

    def argv(self, prompt: str, *, resume: bool) -> list[str]:
        head = [str(self.npm_bin / "codex"), "exec"]
        if resume:
            head += ["resume", "--last"]
        model = ["-m", self.model] if self.model else []
        return [*head, *model, "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt]

    def tool_args(self) -> dict[str, Any]:
        return {"cmd": "cat notes.txt"}


class GeminiCli(Agent):
    """Gemini CLI (``gemini -p``): Gemini ``generateContent`` via ``GOOGLE_GEMINI_BASE_URL``."""

    name = "gemini"
    default_model = "gemini-*"
    tool = "read_file"
    router_model = "gemini-*flash-lite*"  # its model router asks this model which model to use
    router_answer = json.dumps(
        {
            "reasoning": "A simple request.",
            "model_choice": "flash",
            "complexity_reasoning": "A simple request.",
            "complexity_score": 10,
        }
    )

    def setup(self) -> None:
        settings = self.home / ".gemini"
        settings.mkdir()
        (settings / "settings.json").write_text(
            json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}})
        )
        self.env |= {
            "GOOGLE_GEMINI_BASE_URL": self.gateway_url,
            "GEMINI_API_KEY": "sk-omniroute",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }

    def argv(self, prompt: str, *, resume: bool) -> list[str]:
        resume_args = ["--resume", "latest"] if resume else []
        return [str(self.npm_bin / "gemini"), *resume_args, "-p", prompt, "--output-format", "json"]

    def parse(self, stdout: str) -> str:
        try:
            return str(json.loads(stdout).get("response", ""))
        except ValueError:
            return stdout

    def tool_args(self) -> dict[str, Any]:
        return {"file_path": str(self.workspace / "notes.txt")}


class OpenCode(Agent):
    """opencode (``opencode run``): OpenAI chat completions through a custom provider."""

    name = "opencode"
    default_model = "claude-*"
    tool = "read"
    model = "claude-sonnet-4-5"

    def setup(self) -> None:
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                "omniroute": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "OmniRoute",
                    "options": {"baseURL": f"{self.gateway_url}/v1", "apiKey": "sk-omniroute"},
                    "models": {self.model: {"name": "Claude Sonnet through OmniRoute", "tool_call": True}},
                }
            },
            "model": f"omniroute/{self.model}",
            "autoupdate": False,
            "share": "disabled",
        }
        (self.workspace / "opencode.json").write_text(json.dumps(config, indent=2))
        # Its cache (provider packages it installs on first use) is kept across runs.
        self.env["XDG_CACHE_HOME"] = str(self.cache / "xdg-cache")

    def argv(self, prompt: str, *, resume: bool) -> list[str]:
        return [str(self.npm_bin / "opencode"), "run", *(["--continue"] if resume else []), prompt]

    def tool_args(self) -> dict[str, Any]:
        return {"filePath": str(self.workspace / "notes.txt")}


class Llm(Agent):
    """Simon Willison's ``llm``: OpenAI chat completions through ``extra-openai-models.yaml``."""

    name = "llm"
    default_model = "gpt-*"
    tool = "llm_version"
    model = "gpt-4o-mini"  # llm's own default model id, as an operator would name it

    def setup(self) -> None:
        user_path = self.home / "llm"
        user_path.mkdir()
        (user_path / "extra-openai-models.yaml").write_text(
            f"- model_id: omniroute\n  model_name: {self.model}\n  api_base: {self.gateway_url}/v1\n"
            "  api_key_name: omniroute\n  supports_tools: true\n"
        )
        (user_path / "keys.json").write_text(json.dumps({"omniroute": "sk-omniroute"}))
        (user_path / "default_model.txt").write_text("omniroute")
        self.env["LLM_USER_PATH"] = str(user_path)

    def argv(self, prompt: str, *, resume: bool) -> list[str]:
        binary = str(self.cache / "llm/bin/llm")
        tools = ["-T", self.tool] if self.tools else []
        return [binary, *(["-c"] if resume else []), *tools, prompt]

    def tool_args(self) -> dict[str, Any]:
        return {}


class Aider(Agent):
    """aider (``aider --message``): OpenAI chat completions via ``--openai-api-base``; its "tools"
    are edit blocks in the answer text, which it applies to the files it was given."""

    name = "aider"
    default_model = "gpt-*"
    tool = ""
    model = "openai/gpt-4.1"

    def setup(self) -> None:
        self.env |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_CHECK_UPDATE": "false"}

    def argv(self, prompt: str, *, resume: bool) -> list[str]:
        return [
            str(self.cache / "aider/bin/aider"),
            "--model",
            self.model,
            "--openai-api-base",
            f"{self.gateway_url}/v1",
            "--openai-api-key",
            "sk-omniroute",
            "--no-git",
            "--yes-always",
            "--no-check-update",
            "--no-analytics",
            "--no-show-release-notes",
            "--no-pretty",
            "--edit-format",
            "diff",
            *(["--restore-chat-history"] if resume else []),
            "--message",
            prompt,
            "notes.txt",
        ]

    def tool_args(self) -> dict[str, Any]:
        return {}


AGENTS: dict[str, type[Agent]] = {
    cls.name: cls for cls in (ClaudeCode, CodexCli, GeminiCli, OpenCode, Llm, Aider)
}
