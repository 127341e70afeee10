"""A key's ``allowed_models`` holds for what serves the request: names that an alias, a mapping or a
combo sends elsewhere cannot reach a model the key may not use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MSGS = [{"role": "user", "content": "hi"}]
KEY = "sk-cheap-only-0001"


def limited(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "server": {"require_api_key": True},
        "api_keys": [{"name": "cheap", "key": KEY, "allowed_models": ["local-o/*", "cheap-*"]}],
        **(extra or {}),
    }


def chat(gw: GatewayThread, model: str) -> httpx.Response:
    return httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": model, "messages": MSGS},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    )


@pytest.mark.parametrize(
    "extra",
    [
        {"model_aliases": [{"match": "cheap-alias", "route": "local-c/model-c"}]},
        {
            "combos": [
                {"name": "cheap-combo", "strategy": "priority", "targets": [{"model": "local-c/model-c"}]}
            ],
        },
        {
            "combos": [
                {"name": "premium", "strategy": "priority", "targets": [{"model": "local-c/model-c"}]}
            ],
            "model_combo_mappings": [{"pattern": "cheap-mapped*", "combo": "premium"}],
        },
    ],
    ids=["alias", "combo", "mapping"],
)
def test_an_allowed_name_cannot_reach_a_model_the_key_may_not_use(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], extra: dict[str, Any]
) -> None:
    gw = make_gateway(limited(extra))
    if "model_combo_mappings" in extra:
        model = "cheap-mapped-1"
    elif "combos" in extra:
        model = "cheap-combo"
    else:
        model = "cheap-alias"
    r = chat(gw, model)
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert "local-c/model-c" in err["message"] and err["param"] == "model"
    assert fakes["c"].calls() == 0, "the premium upstream was never called"


def test_a_combo_serves_only_its_allowed_targets_and_says_why(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gw = make_gateway(
        limited(
            {
                "combos": [
                    {
                        "name": "cheap-mix",
                        "strategy": "priority",
                        "targets": [{"model": "local-c/model-c"}, {"model": "local-o/model-o"}],
                    }
                ]
            }
        )
    )
    r = chat(gw, "cheap-mix")
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-provider"] == "local-o"
    assert fakes["c"].calls() == 0
    d = httpx.get(f"{gw.url}/api/routing/decisions/{r.headers['x-request-id']}", timeout=10).json()
    reasons = {(e["provider"], e["reason"]) for e in d["exclusions"]}
    assert ("local-c", "not in this API key's allowed_models") in reasons


def test_the_refusal_is_in_the_clients_wire_format(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gw = make_gateway(limited({"model_aliases": [{"match": "cheap-alias", "route": "local-c/model-c"}]}))
    r = httpx.post(
        f"{gw.url}/v1/messages",
        json={"model": "cheap-alias", "max_tokens": 5, "messages": MSGS},
        headers={"x-api-key": KEY},
        timeout=10,
    )
    assert r.status_code == 403, r.text
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "permission_error"
    assert "local-c/model-c" in r.json()["error"]["message"]
    g = httpx.post(
        f"{gw.url}/v1beta/models/cheap-alias:generateContent",
        json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        headers={"x-goog-api-key": KEY},
        timeout=10,
    )
    assert g.status_code == 403 and g.json()["error"]["status"] == "PERMISSION_DENIED", g.text
    assert fakes["c"].calls() == 0


def test_embeddings_follow_the_same_rule(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gw = make_gateway(limited({"model_aliases": [{"match": "cheap-emb", "route": "local-c/model-c"}]}))
    r = httpx.post(
        f"{gw.url}/v1/embeddings",
        json={"model": "cheap-emb", "input": "hi"},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=10,
    )
    assert r.status_code == 403, r.text
    assert "local-c/model-c" in r.json()["error"]["message"]
    assert fakes["c"].calls() == 0


def test_a_pipeline_step_the_key_may_not_use_is_refused(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    steps = [{"model": "local-o/model-o"}, {"model": "local-c/model-c"}]
    gw = make_gateway(limited({"combos": [{"name": "cheap-pipe", "strategy": "pipeline", "targets": steps}]}))
    r = chat(gw, "cheap-pipe")
    assert r.status_code == 403, r.text
    assert "local-c/model-c" in r.json()["error"]["message"]
    assert fakes["c"].calls() == 0
