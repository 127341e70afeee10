"""Client model-id conventions through the HTTP API against the fake providers (SPEC §4).

- ``model_aliases``: an exact id or case-insensitive glob routes to a combo, a ``provider/model`` or an
  ``auto`` id; only an exact combo name comes before an alias; aliases are listed by ``/v1/models``
  with the limits of what they route to; an alias whose route does not resolve fails start.
- Claude Code's ``[1m]`` suffix is stripped before resolution; Anthropic-format upstreams get the
  ``context-1m-2025-08-07`` beta, other families nothing; the decision keeps the id as sent.
- ``anthropic-beta`` reaches Anthropic-format upstreams on the translated path too, never others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.config import ConfigError, config_from_dict
from omniroute.gateway import Gateway
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

BETA_1M = "context-1m-2025-08-07"
ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01"}
ALIASES = [
    {"match": "claude-*", "route": "my-combo"},
    {"match": "gpt-*-codex", "route": "up-ant/claude-opus-4-8"},
    {"match": "gemini-*-pro-preview", "route": "auto/coding"},
    {"match": "Exact-Id", "route": "up-gem/gemini-pro"},
]


def _config(fakes: dict[str, FakeProviderThread], tmp: Path, **extra: Any) -> dict[str, Any]:
    """Provider ``up-ant`` (Anthropic format, fake O), ``up-oai`` (OpenAI, fake C), ``up-gem`` (Gemini, fake
    G); combo ``my-combo`` → up-oai/gpt-5, combo ``claude-special`` → up-gem (an exact combo name the
    ``claude-*`` alias also matches), mapping ``gpt-*`` → combo ``mapped`` → up-gem."""
    model = {"context_window": 100000, "max_output_tokens": 4096}
    return {
        "database_url": f"sqlite:///{tmp}/omniroute.db",
        "providers": [
            {
                "id": "up-ant",
                "format": "anthropic",
                "base_url": fakes["o"].base_url,
                "models": [{"id": "claude-opus-4-8", "context_window": 200000, "max_output_tokens": 8192}],
            },
            {
                "id": "up-oai",
                "format": "openai",
                "base_url": f"{fakes['c'].base_url}/v1",
                "models": [{"id": "gpt-5", **model}],
            },
            {
                "id": "up-gem",
                "format": "gemini",
                "base_url": f"{fakes['g'].base_url}/v1beta",
                "models": [{"id": "gemini-pro", **model}],
            },
        ],
        "connections": [
            {"id": "a1", "provider": "up-ant", "api_key": "sk-a1"},
            {"id": "c1", "provider": "up-oai", "api_key": "sk-c1"},
            {"id": "g1", "provider": "up-gem", "api_key": "sk-g1"},
        ],
        "combos": [
            {"name": "my-combo", "strategy": "priority", "targets": [{"model": "up-oai/gpt-5"}]},
            {"name": "claude-special", "strategy": "priority", "targets": [{"model": "up-gem/gemini-pro"}]},
            {"name": "mapped", "strategy": "priority", "targets": [{"model": "up-gem/gemini-pro"}]},
        ],
        "model_combo_mappings": [{"pattern": "gpt-*", "combo": "mapped"}],
        "model_aliases": ALIASES,
        "auto": {"exploration_rate": 0.0},
        **extra,
    }


@pytest.fixture
def gw(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> GatewayThread:
    return make_gateway(replace=_config(fakes, tmp_path))


def _chat(gw: GatewayThread, model: str, **headers: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(f"{gw.base_url}/chat/completions", json=body, headers=headers, timeout=20)
    assert r.status_code == 200, r.text
    return r


def _messages(gw: GatewayThread, model: str, **headers: str) -> httpx.Response:
    body = {"model": model, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(f"{gw.url}/v1/messages", json=body, headers={**ANTHROPIC_HEADERS, **headers}, timeout=20)
    assert r.status_code == 200, r.text
    return r


def _decision(gw: GatewayThread, r: httpx.Response) -> dict[str, Any]:
    d = httpx.get(f"{gw.url}/api/routing/decisions/{r.headers['x-request-id']}", timeout=10)
    assert d.status_code == 200, d.text
    return dict(d.json())


# -- aliases ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "provider", "upstream_model"),
    [
        ("CLAUDE-sonnet-4-6", "up-oai", "gpt-5"),  # case-insensitive glob → combo
        ("gpt-5.3-codex", "up-ant", "claude-opus-4-8"),  # glob → provider/model, before the gpt-* mapping
        ("Exact-Id", "up-gem", "gemini-pro"),  # exact id → provider/model
    ],
)
def test_alias_routes_a_client_default_model_where_the_operator_wants(
    gw: GatewayThread, model: str, provider: str, upstream_model: str
) -> None:
    """An agent's default model name lands on the alias's route; the decision keeps the id as sent
    and names the alias as the route."""
    r = _chat(gw, model)
    assert r.headers["x-omniroute-provider"] == provider
    d = _decision(gw, r)
    assert d["requested_model"] == model and d["route"] == "alias"
    assert d["attempts"][-1]["model"] == upstream_model


def test_alias_to_auto_routes_through_auto(gw: GatewayThread) -> None:
    """``gemini-*-pro-preview`` → ``auto/coding``: auto picks among the connected providers."""
    r = _chat(gw, "gemini-3-pro-preview")
    d = _decision(gw, r)
    assert d["route"] == "alias" and d["auto"] is not None
    assert r.headers["x-omniroute-provider"] in {"up-ant", "up-oai", "up-gem"}


def test_exact_combo_name_wins_over_an_alias_and_an_alias_over_a_mapping(gw: GatewayThread) -> None:
    """``claude-special`` is a combo (beats the ``claude-*`` alias); ``gpt-4o`` matches no alias and
    falls to the ``gpt-*`` mapping."""
    r = _chat(gw, "claude-special")
    assert r.headers["x-omniroute-provider"] == "up-gem" and _decision(gw, r)["route"] == "combo"
    r = _chat(gw, "gpt-4o")
    assert r.headers["x-omniroute-provider"] == "up-gem" and _decision(gw, r)["route"] == "mapping"


def test_models_lists_aliases_with_the_limits_of_their_route(gw: GatewayThread) -> None:
    """Each alias is listed under its ``match`` with ``alias_of`` and the context/output limits of
    what it routes to."""
    models = {m["id"]: m for m in httpx.get(f"{gw.base_url}/models", timeout=10).json()["data"]}
    codex = models["gpt-*-codex"]
    assert codex["alias_of"] == "up-ant/claude-opus-4-8"
    assert (codex["context_length"], codex["max_output_tokens"]) == (200000, 8192)
    claude = models["claude-*"]
    assert claude["alias_of"] == "my-combo"
    assert claude["context_length"] == models["my-combo"]["context_length"] == 100000
    preview = models["gemini-*-pro-preview"]
    assert preview["alias_of"] == "auto/coding"
    assert preview["context_length"] == models["auto/coding"]["context_length"]


def test_alias_whose_route_does_not_resolve_fails_start_naming_the_key(
    fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    aliases = [*ALIASES, {"match": "x-*", "route": "no-such-combo"}]
    cfg = config_from_dict(_config(fakes, tmp_path, model_aliases=aliases), env={})

    async def start() -> None:
        gateway = Gateway(cfg)
        try:
            await gateway.start()
        finally:
            await gateway.stop()

    with pytest.raises(ConfigError, match=r"model_aliases\[4\]\.route"):
        asyncio.run(start())


# -- the [1m] suffix and beta headers ---------------------------------------------------------------


@pytest.mark.parametrize("surface", ["messages", "chat"])
def test_1m_suffix_is_stripped_and_the_context_beta_added_for_anthropic_upstreams(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread], surface: str
) -> None:
    """``up-ant/claude-opus-4-8[1m]``: the upstream gets the bare id and ``anthropic-beta`` carrying the
    client's betas plus ``context-1m-2025-08-07`` (same-format pass-through and translated)."""
    model = "up-ant/claude-opus-4-8[1m]"
    send = _messages if surface == "messages" else _chat
    r = send(gw, model, **{"anthropic-beta": "interleaved-thinking-2025-05-14"})
    sent = fakes["o"].requests[-1]
    assert sent.body["model"] == "claude-opus-4-8"
    assert sent.headers["anthropic-beta"] == f"interleaved-thinking-2025-05-14,{BETA_1M}"
    assert _decision(gw, r)["requested_model"] == model


def test_1m_suffix_keeps_a_beta_the_client_already_sent_once(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    _messages(gw, "up-ant/claude-opus-4-8[1m]", **{"anthropic-beta": BETA_1M})
    assert fakes["o"].requests[-1].headers["anthropic-beta"] == BETA_1M


@pytest.mark.parametrize(("model", "fake"), [("claude-opus-4-8[1m]", "c"), ("up-gem/gemini-pro[1m]", "g")])
def test_1m_suffix_is_dropped_for_other_families_and_aliases_match_the_bare_id(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread], model: str, fake: str
) -> None:
    """``claude-opus-4-8[1m]`` matches the ``claude-*`` alias (→ OpenAI-format ``up-oai``); neither an
    OpenAI- nor a Gemini-format upstream receives the suffix or any ``anthropic-beta``."""
    _messages(gw, model, **{"anthropic-beta": "interleaved-thinking-2025-05-14"})
    sent = fakes[fake].requests[-1]
    assert "[1m]" not in str(sent.model)
    assert "[1m]" not in str(sent.body.get("model", ""))
    assert "anthropic-beta" not in sent.headers


def test_alias_whose_combo_is_deleted_at_run_time_leaves_the_listing_and_answers_404(
    gw: GatewayThread,
) -> None:
    """Deleting ``my-combo`` through the management API: ``/v1/models`` still answers (without the
    ``claude-*`` alias) and a request for it is a 404 ``model_not_found``, never a 500."""
    assert httpx.delete(f"{gw.url}/api/combos/my-combo", timeout=10).status_code == 200
    models = {m["id"] for m in httpx.get(f"{gw.base_url}/models", timeout=10).json()["data"]}
    assert "claude-*" not in models and "gpt-*-codex" in models
    body = {"model": "claude-sonnet-4-6", "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=20)
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
