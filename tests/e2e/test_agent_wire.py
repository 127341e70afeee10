"""What coding agents send and need, through the HTTP API against the fake providers.

- Never stricter than the upstream: ``system`` entries inside Anthropic ``messages`` (Claude Code's
  mid-conversation-system beta) and thinking budgets below 1,024 are accepted; same-format upstreams
  receive them unchanged, other families get what they support. ``max_tokens`` is clamped to the
  served model's ``max_output_tokens``.
- Streaming liveness: a stream whose first content is slow gets its headers and the format's
  keep-alive early; fallback behind them stays invisible; a request that then fails ends with the
  format's error event; the TTFT timeout counts to the first content, never to upstream keep-alives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

FORMATS = ("openai", "anthropic", "gemini")
ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01"}


def _config(
    fakes: dict[str, FakeProviderThread], tmp: Path, fmt: str, ttft_s: float, **server: Any
) -> dict[str, Any]:
    """One provider ``up`` of wire format ``fmt`` on fake O (model ``m``, 4,096 output tokens) and a
    fallback ``fb`` (OpenAI format) on fake C; combo ``pair`` = up → fb."""
    base = {"openai": "/v1", "anthropic": "", "gemini": "/v1beta"}[fmt]
    return {
        "database_url": f"sqlite:///{tmp}/omniroute.db",
        "server": server,
        "providers": [
            {
                "id": "up",
                "format": fmt,
                "base_url": f"{fakes['o'].base_url}{base}",
                "models": [{"id": "m", "max_output_tokens": 4096, "context_window": 100000}],
            },
            {
                "id": "fb",
                "format": "openai",
                "base_url": f"{fakes['c'].base_url}/v1",
                "models": [{"id": "m", "max_output_tokens": 4096, "context_window": 100000}],
            },
        ],
        "connections": [
            {"id": "u1", "provider": "up", "api_key": "sk-u1"},
            {"id": "f1", "provider": "fb", "api_key": "sk-f1"},
        ],
        "combos": [
            {"name": "pair", "strategy": "priority", "targets": [{"model": "up/m"}, {"model": "fb/m"}]}
        ],
        "resilience": {"timeouts": {"connect_s": 2, "ttft_s": ttft_s, "idle_s": 10, "total_s": 30}},
    }


@pytest.fixture
def agent_gateway(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> Callable[..., GatewayThread]:
    """``agent_gateway(fmt, ttft_s=1, **server)`` → a gateway on :func:`_config`."""

    def make(fmt: str = "anthropic", ttft_s: float = 1, **server: Any) -> GatewayThread:
        return make_gateway(replace=_config(fakes, tmp_path, fmt, ttft_s, **server))

    return make


def _messages(gw: GatewayThread, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(
        f"{gw.url}/v1/messages", json=body, headers={**ANTHROPIC_HEADERS, **headers}, timeout=30
    )


MID_SYSTEM = [
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "first answer"},
    {"role": "system", "content": "Reminder: answer in French."},
    {"role": "user", "content": "second question"},
]


# -- never stricter than the upstream --------------------------------------------------------------


def test_anthropic_mid_conversation_system_message_reaches_an_anthropic_upstream_unchanged(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    """Claude Code 2.1 sends ``role: system`` inside ``messages`` with the mid-conversation beta: the
    gateway accepts it and forwards body and beta header as they came (pass-through)."""
    gw = agent_gateway("anthropic")
    beta = "mid-conversation-system-2026-04-07"
    r = _messages(
        gw, {"model": "up/m", "max_tokens": 100, "messages": MID_SYSTEM}, **{"anthropic-beta": beta}
    )
    assert r.status_code == 200, r.text
    sent = fakes["o"].requests[-1]
    assert sent.body["messages"] == MID_SYSTEM
    assert sent.headers.get("anthropic-beta") == beta


@pytest.mark.parametrize("fmt", ["openai", "gemini"])
def test_anthropic_mid_conversation_system_message_becomes_what_other_families_accept(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], fmt: str
) -> None:
    """OpenAI-format upstreams get a system message at its place; Gemini (one systemInstruction) gets
    the instruction as user text at its place, so order and the cached prefix stay."""
    gw = agent_gateway(fmt)
    r = _messages(gw, {"model": "up/m", "max_tokens": 100, "messages": MID_SYSTEM})
    assert r.status_code == 200, r.text
    sent = fakes["o"].requests[-1].body
    if fmt == "openai":
        roles = [m["role"] for m in sent["messages"]]
        assert roles == ["user", "assistant", "system", "user"]
        assert sent["messages"][2]["content"] == "Reminder: answer in French."
    else:
        assert "systemInstruction" not in sent
        texts = [p.get("text") for c in sent["contents"] for p in c["parts"]]
        assert "System: Reminder: answer in French." in texts
        assert texts.index("System: Reminder: answer in French.") < texts.index("second question")


def test_openai_client_mid_conversation_system_message_reaches_anthropic_as_user_text_in_place(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gw = agent_gateway("anthropic")
    body = {"model": "up/m", "messages": [{"role": "system", "content": "Be brief."}, *MID_SYSTEM]}
    r = httpx.post(f"{gw.url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    sent = fakes["o"].requests[-1].body
    assert sent["system"] == "Be brief."
    last_user = sent["messages"][-1]
    assert last_user["role"] == "user"
    assert [b["text"] for b in last_user["content"]] == [
        "System: Reminder: answer in French.",
        "second question",
    ]


@pytest.mark.parametrize("budget", [1, 512, 1023])
def test_thinking_budget_below_1024_is_accepted_and_left_to_the_upstream(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], budget: int
) -> None:
    gw = agent_gateway("anthropic")
    body = {
        "model": "up/m",
        "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": budget},
        "messages": [{"role": "user", "content": "hi"}],
    }
    r = _messages(gw, body)
    assert r.status_code == 200, r.text
    assert fakes["o"].requests[-1].body["thinking"]["budget_tokens"] == budget


def test_known_block_in_the_wrong_role_is_still_an_anthropic_400_naming_it(
    agent_gateway: Callable[..., GatewayThread],
) -> None:
    gw = agent_gateway("anthropic")
    messages = [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]
    r = _messages(gw, {"model": "up/m", "max_tokens": 100, "messages": messages})
    assert r.status_code == 400
    err = r.json()
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert err["error"]["message"].startswith("messages.0.content.0.type:")


@pytest.mark.parametrize("surface", ["messages", "chat", "gemini"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_max_tokens_above_the_models_limit_is_clamped_to_max_output_tokens(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], fmt: str, surface: str
) -> None:
    """A client's ``max_tokens: 64000`` reaches a model configured with 4,096 output tokens as 4,096,
    from every surface to every upstream family (an Anthropic thinking budget stays below it)."""
    gw = agent_gateway(fmt)
    if surface == "messages":
        body: dict[str, Any] = {
            "model": "up/m",
            "max_tokens": 64000,
            "thinking": {"type": "enabled", "budget_tokens": 32000},
            "messages": [{"role": "user", "content": "hi"}],
        }
        r = _messages(gw, body)
    elif surface == "chat":
        body = {"model": "up/m", "max_tokens": 64000, "messages": [{"role": "user", "content": "hi"}]}
        r = httpx.post(f"{gw.url}/v1/chat/completions", json=body, timeout=30)
    else:
        body = {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"maxOutputTokens": 64000},
        }
        r = httpx.post(f"{gw.url}/v1beta/models/up/m:generateContent", json=body, timeout=30)
    assert r.status_code == 200, r.text
    sent = fakes["o"].requests[-1].body
    if fmt == "openai":
        assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 4096
    elif fmt == "anthropic":
        assert sent["max_tokens"] == 4096
        if "thinking" in sent:
            assert sent["thinking"]["budget_tokens"] < 4096
    else:
        assert sent["generationConfig"]["maxOutputTokens"] == 4096


# -- streaming liveness -----------------------------------------------------------------------------

KEEPALIVE = {"openai": b": keep-alive", "anthropic": b"event: ping", "gemini": b"\n"}


def _stream(gw: GatewayThread, surface: str, model: str) -> tuple[httpx.Response, bytes]:
    if surface == "anthropic":
        url, body = (
            f"{gw.url}/v1/messages",
            {
                "model": model,
                "max_tokens": 100,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
    elif surface == "gemini":
        url = f"{gw.url}/v1beta/models/{model}:streamGenerateContent?alt=sse"
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    else:
        url, body = (
            f"{gw.url}/v1/chat/completions",
            {
                "model": model,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
            },
        )
    with httpx.stream("POST", url, json=body, headers=ANTHROPIC_HEADERS, timeout=30) as r:
        return r, r.read()


@pytest.mark.parametrize("surface", FORMATS)
def test_slow_first_token_gets_headers_and_keepalives_before_content(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], surface: str
) -> None:
    """The first content takes 3 s (TTFT limit raised to 10 s): with a 0.3 s keep-alive interval the
    client has headers and the format's keep-alive well before it, then the complete answer."""
    gw = agent_gateway("openai", ttft_s=10, stream_keepalive_s=0.3)
    fakes["o"].set_behaviour("m", "slow-ttft-3000+chunks-1")
    r, raw = _stream(gw, surface, "up/m")
    assert r.status_code == 200
    assert r.headers["x-request-id"]
    first_content = raw.index(b"Hello")
    assert raw.find(KEEPALIVE[surface]) != -1 and raw.find(KEEPALIVE[surface]) < first_content
    if surface == "gemini":
        assert raw.startswith(b"\n") and raw[: raw.index(b"data: ")].strip() == b""
    if surface == "anthropic":
        assert raw.rstrip().endswith(b'"type":"message_stop"}')
    elif surface == "openai":
        assert raw.rstrip().endswith(b"data: [DONE]")


def test_gemini_keepalives_are_blank_lines_so_every_line_google_sdks_read_is_data(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    """The google-genai JS SDK (Gemini CLI) reads a stream as ``data: …`` events from the start of
    its buffer: an SSE comment keep-alive stalled it ("Incomplete JSON segment at the end")."""
    gw = agent_gateway("openai", ttft_s=10, stream_keepalive_s=0.3)
    fakes["o"].set_behaviour("m", "slow-ttft-1500+chunks-1")
    r, raw = _stream(gw, "gemini", "up/m")
    assert r.status_code == 200
    lines = [line for line in raw.split(b"\n") if line.strip()]
    assert lines and all(line.startswith(b"data: ") for line in lines), raw


@pytest.mark.parametrize("surface", FORMATS)
def test_fallback_behind_early_headers_is_invisible(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], surface: str
) -> None:
    """The primary never sends content (TTFT 1 s): headers went out at 0.2 s, the fallback answers and
    the client reads one ordinary, complete answer from it."""
    gw = agent_gateway("openai", stream_keepalive_s=0.2)
    fakes["o"].set_behaviour("m", "slow-ttft-4000")
    fakes["c"].set_behaviour("m", "chunks-1")
    r, raw = _stream(gw, surface, "pair")
    assert r.status_code == 200
    assert b"Hello from c" in raw
    assert b"error" not in raw


@pytest.mark.parametrize(
    ("surface", "marker"),
    [
        ("openai", b'"type":"server_error"'),
        ("anthropic", b"event: error"),
        ("gemini", b'"status":"DEADLINE_EXCEEDED"'),
    ],
)
def test_failure_behind_early_headers_ends_with_the_formats_error_event(
    agent_gateway: Callable[..., GatewayThread],
    fakes: dict[str, FakeProviderThread],
    surface: str,
    marker: bytes,
) -> None:
    gw = agent_gateway("openai", stream_keepalive_s=0.2)
    fakes["o"].set_behaviour("m", "slow-ttft-4000")
    fakes["c"].set_behaviour("m", "slow-ttft-4000")
    r, raw = _stream(gw, surface, "pair")
    assert r.status_code == 200  # the headers had to go out before the outcome was known
    assert marker in raw
    assert b"Hello" not in raw
    if surface == "anthropic":
        assert b"message_stop" not in raw
        assert b'"timeout_error"' in raw
    if surface == "openai":
        assert b"[DONE]" not in raw


def test_ttft_timeout_counts_to_first_content_not_to_upstream_keepalives(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    """An upstream that sends a keep-alive comment every 0.2 s but no content for 4 s is timed out at
    the 1 s TTFT limit and the request falls back (keep-alives to the client off: routing headers)."""
    gw = agent_gateway("openai", stream_keepalive_s=0)
    fakes["o"].set_behaviour("m", "slow-ttft-4000+heartbeat-200")
    fakes["c"].set_behaviour("m", "chunks-1")
    r, raw = _stream(gw, "openai", "pair")
    assert r.status_code == 200
    assert r.headers["x-omniroute-provider"] == "fb"
    assert b"Hello from c" in raw
    decision = httpx.get(f"{gw.url}/api/routing/decisions/{r.headers['x-request-id']}", timeout=10).json()
    first = decision["attempts"][0]
    assert first["provider"] == "up" and "TTFT" in first["reason"]


# -- reasoning another family produced --------------------------------------------------------------

THINKING_REPLAY = [
    {"role": "user", "content": "weather in Paris?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I should call the tool.", "signature": "c2lnbmF0dXJl"},
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny"}]},
]


@pytest.mark.parametrize("stream", [False, True])
def test_replayed_anthropic_thinking_is_dropped_for_a_strict_openai_format_upstream(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], stream: bool
) -> None:
    """An Anthropic client's signed thinking cannot be verified by another family: it is not sent to
    an OpenAI-format upstream as ``reasoning_content``/``thinking_blocks`` (strict servers answer
    "Extra inputs are not permitted"), while the tool call and its result are."""
    gw = agent_gateway("openai")
    fakes["o"].set_behaviour("m", "strict")
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    body = {"model": "up/m", "max_tokens": 100, "messages": THINKING_REPLAY, "tools": tools, "stream": stream}
    r = _messages(gw, body)
    assert r.status_code == 200, r.text
    sent = fakes["o"].requests[-1].body["messages"]
    assert all("reasoning_content" not in m and "thinking_blocks" not in m for m in sent)
    assert sent[1]["tool_calls"][0]["id"] == "toolu_01"
    assert sent[2] == {"role": "tool", "tool_call_id": "toolu_01", "content": "sunny"}


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_is_off_for_a_turn_whose_tool_call_has_no_signature_anthropic_can_verify(
    agent_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], stream: bool
) -> None:
    """A conversation from another family (here an OpenAI client asking for reasoning) whose last
    assistant turn called a tool carries no Anthropic-signed thinking: a strict Anthropic upstream
    would refuse it with thinking on ("Expected `thinking` … but found `tool_use`"), so that request
    goes without thinking and is answered."""
    gw = agent_gateway("anthropic")
    fakes["o"].set_behaviour("m", "strict")
    messages = [
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    body = {
        "model": "up/m",
        "messages": messages,
        "tools": tools,
        "reasoning_effort": "high",
        "max_tokens": 4000,
        "stream": stream,
    }
    r = httpx.post(f"{gw.url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    assert "thinking" not in fakes["o"].requests[-1].body
    body["messages"] = messages[:1]  # a fresh conversation keeps its thinking
    assert httpx.post(f"{gw.url}/v1/chat/completions", json=body, timeout=30).status_code == 200
    assert fakes["o"].requests[-1].body["thinking"]["type"] == "enabled"
