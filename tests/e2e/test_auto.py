"""Auto routing end to end through the HTTP API with the fake providers O, C, G (AUTO-1 … AUTO-8,
API-2, API-7, OBS-2, RESIL-8).

Catalog of the fakes (USD per 1M tokens, blended .6·in + .4·out): local-g/model-g 0.22 (vision,
free tier, 1M context), local-c/model-c 0.70 (no vision, 200k), local-o/model-o 1.40 (vision, 128k).
With no measurements the default weights pick the cheapest, G. Exploration is 0 unless said.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from omniroute.gateway import Gateway
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

NO_EXPLORATION = {"auto": {"exploration_rate": 0.0}}
KEYS = {"api_keys": [{"name": "k1", "key": "sk-test-k1"}, {"name": "k2", "key": "sk-test-k2"}]}
G_KEY = "local-g/model-g@g1"


def chat(
    gt: GatewayThread,
    model: str = "auto",
    text: str = "hi",
    *,
    headers: dict[str, str] | None = None,
    messages: list[dict[str, Any]] | None = None,
) -> httpx.Response:
    body = {"model": model, "messages": messages or [{"role": "user", "content": text}]}
    return httpx.post(f"{gt.base_url}/chat/completions", json=body, headers=headers or {}, timeout=20)


def served(r: httpx.Response) -> str:
    assert r.status_code == 200, r.text
    return r.headers["x-omniroute-provider"]


def decision(gt: GatewayThread, r: httpx.Response) -> dict[str, Any]:
    d = httpx.get(f"{gt.url}/api/routing/decisions/{r.headers['x-request-id']}", timeout=10)
    assert d.status_code == 200, d.text
    return dict(d.json())


@pytest.fixture
def gt(make_gateway: Callable[..., GatewayThread]) -> GatewayThread:
    return make_gateway(NO_EXPLORATION)


def test_auto_and_variants_are_listed_with_max_context(gt: GatewayThread) -> None:
    """API-2, AUTO-1: ``/v1/models`` lists ``auto`` and the curated variants with context_length and
    max_output_tokens = MAX over each pool (never 0); ``GET /api/combos/auto`` the same with pools."""
    models = {m["id"]: m for m in httpx.get(f"{gt.base_url}/models", timeout=10).json()["data"]}
    for vid in ("auto", "auto/coding", "auto/fast", "auto/cheap", "auto/smart", "auto/lkgp", "auto/vision"):
        assert models[vid]["context_length"] == 1_000_000 and models[vid]["max_output_tokens"] == 16384
    assert models["auto/reasoning:pro"]["context_length"] == 1_000_000  # filter fails open
    one = httpx.get(f"{gt.base_url}/models/auto/vision", timeout=10).json()
    assert one["id"] == "auto/vision" and one["context_length"] == 1_000_000
    listing = {v["id"]: v for v in httpx.get(f"{gt.url}/api/combos/auto", timeout=10).json()["data"]}
    assert listing["auto"]["context_length"] == 1_000_000
    assert {m["key"] for m in listing["auto/vision"]["pool"]} == {"local-o/model-o@o1", G_KEY}
    assert all(v["context_length"] > 0 and v["max_output_tokens"] > 0 for v in listing.values())


def test_auto_routes_with_decision_header_and_per_candidate_factors(gt: GatewayThread) -> None:
    """AUTO-3, API-7, OBS-2: ``auto`` serves the best-scoring candidate; X-OmniRoute-Decision carries
    strategy, provider, score and top factors; the stored decision has every candidate's 16 factors."""
    r = chat(gt)
    assert served(r) == "local-g" and r.json()["model"] == "model-g"
    h = r.headers["x-omniroute-decision"]
    assert "route=auto" in h and "strategy=rules" in h and f"served={G_KEY}" in h
    assert "score=" in h and "top=health:1.00" in h
    d = decision(gt, r)
    assert d["strategy"] == "rules" and d["router_strategy"] == "rules" and d["auto"]["router"] == "lkgp"
    assert [c["provider"] for c in d["candidates"]] == ["local-g", "local-c", "local-o"]
    assert all(len(c["factors"]) == 16 for c in d["candidates"])
    assert d["candidates"][0]["score"] == pytest.approx(d["final_score"])
    assert d["attempts"][0]["status"] == 200 and d["exploration"] is False


def test_invalid_auto_id_is_400(gt: GatewayThread) -> None:
    """AUTO-1: ``auto/nonsense`` → 400 naming the valid ids, OpenAI error shape."""
    r = chat(gt, "auto/nonsense")
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "model" and "auto/coding" in err["message"] and "Traceback" not in r.text


def test_vision_variant_keeps_only_vision_candidates(gt: GatewayThread) -> None:
    """AUTO-1: ``auto/vision`` routes among vision-capable models only (C has none)."""
    r = chat(gt, "auto/vision")
    assert served(r) == "local-g"
    assert {c["provider"] for c in decision(gt, r)["candidates"]} == {"local-g", "local-o"}


def test_mode_header_switches_the_pack(gt: GatewayThread) -> None:
    """AUTO-7: seeded latencies make G cheap-slow and O expensive-fast: Mode cheap → G, fast → O,
    balanced → default weights; an unknown mode is a 400 naming the header."""

    async def seed(gw: Gateway) -> None:
        now = gw.clock.time()
        for key, ms in ((G_KEY, 3000.0), ("local-c/model-c@c1", 3000.0), ("local-o/model-o@o1", 300.0)):
            for _ in range(20):
                await gw.state.record_sample(key, now, latency_ms=ms, ok=True)

    gt.call(seed)
    got = {}
    for mode in ("cheap", "fast", "balanced"):
        r = chat(gt, headers={"X-OmniRoute-Mode": mode, "X-Session-Id": f"mode-{mode}"})
        got[mode] = (served(r), decision(gt, r)["auto"]["weights"])
    assert got["cheap"] == ("local-g", "cost-saver")
    assert got["fast"] == ("local-o", "ship-fast")
    assert got["balanced"][1] == "default"
    r = chat(gt, headers={"X-OmniRoute-Mode": "warp-speed"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "X-OmniRoute-Mode"


def test_budget_cheapest_serves_the_cheapest_and_strict_is_402(gt: GatewayThread) -> None:
    """AUTO-7: every candidate's estimate is above $0.0001 → ``cheapest`` serves G; ``strict`` → 402
    naming the cap and the cheapest candidate's estimated cost."""
    r = chat(gt, headers={"X-OmniRoute-Budget": "0.0001", "X-OmniRoute-Budget-Fallback": "cheapest"})
    assert served(r) == "local-g" and r.headers["x-omniroute-strategy"] == "budget-cheapest"
    r = chat(gt, headers={"X-OmniRoute-Budget": "0.0001", "X-OmniRoute-Budget-Fallback": "strict"})
    assert r.status_code == 402, r.text
    msg = r.json()["error"]["message"]
    assert "$0.000100" in msg and "cheapest candidate's estimated cost is $0.000400" in msg


def test_lkgp_keeps_each_conversation_on_its_provider(
    gt: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """AUTO-5a: conversation A lands on G; conversation B's first turn finds G failing and falls
    through to C. Over 5 more turns each stays on its own provider (strategy lkgp)."""
    first = {"A": "Tell me about cats", "B": "Tell me about dogs"}
    assert served(chat(gt, text=first["A"])) == "local-g"
    fakes["g"].set_behaviour("model-g", "fail-500-times-2")  # the try and the transient retry of G
    assert served(chat(gt, text=first["B"])) == "local-c"
    fakes["g"].set_behaviour("model-g", "")  # G is healthy again: only LKGP keeps B away from it
    history = {k: [{"role": "user", "content": v}] for k, v in first.items()}
    for turn in range(5):
        for conv, want in (("A", "local-g"), ("B", "local-c")):
            history[conv] += [
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": f"more {turn}"},
            ]
            r = chat(gt, messages=history[conv])
            assert served(r) == want, (conv, turn)
            assert r.headers["x-omniroute-strategy"] == "lkgp"
            assert decision(gt, r)["reason"] == f"LKGP: using last known good provider {want}"


def test_failing_pick_falls_through_to_the_next_best(
    gt: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """AUTO-5 / RESIL-6: the pick (G) fails with 500 → the next-best candidate (C) serves it."""
    fakes["g"].set_behaviour("model-g", "fail-500")
    r = chat(gt, text="fall through please")
    assert served(r) == "local-c" and int(r.headers["x-omniroute-attempts"]) >= 2
    d = decision(gt, r)
    assert d["candidates"][0]["provider"] == "local-g" and d["attempts"][0]["provider"] == "local-g"
    assert d["attempts"][-1] == {**d["attempts"][-1], "provider": "local-c", "status": 200}


def test_candidates_endpoint_shows_a_rate_limited_connection_unreachable(
    gt: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    """AUTO-2: after G answers 429 with Retry-After 60, ``/v1/auto-combo/auto/candidates`` shows G
    unreachable with its cooldown deadline; the others stay reachable."""
    fakes["g"].set_behaviour("model-g", "fail-429-retry-60")
    t0 = gt.clock.time()
    assert chat(gt, "local-g/model-g").status_code == 429
    rows = {
        c["key"]: c for c in httpx.get(f"{gt.base_url}/auto-combo/auto/candidates", timeout=10).json()["data"]
    }
    g = rows[G_KEY]
    assert g["reachable"] is False and g["cooldown"]["until"] == pytest.approx(t0 + 60, abs=5)
    assert "until" in g["unreachable_reasons"][0] and g["cooldown"]["until_iso"]
    assert rows["local-c/model-c@c1"]["reachable"] is True and g["excluded"] is False
    assert g["breaker"]["state"] == "CLOSED"
    fakes["g"].set_behaviour("model-g", "")
    assert served(chat(gt, text="cooling")) != "local-g"  # the ladder skips the cooling connection


def test_exclusions_apply_per_api_key(make_gateway: Callable[..., GatewayThread]) -> None:
    """AUTO-2: K1 excludes G from ``auto`` → K1 never routes to G, K2 still does; the candidates
    listing shows ``excluded`` per key; DELETE re-includes; unknown candidates are 404."""
    gt = make_gateway({**NO_EXPLORATION, **KEYS})
    k1 = {"Authorization": "Bearer sk-test-k1"}
    k2 = {"Authorization": "Bearer sk-test-k2"}
    url = f"{gt.base_url}/auto-combo/auto/candidates"
    r = httpx.put(f"{url}/{G_KEY}", headers=k1, timeout=10)
    assert r.status_code == 200, r.text
    assert {c["key"]: c["excluded"] for c in r.json()["data"]}[G_KEY] is True
    listing_k2 = httpx.get(url, headers=k2, timeout=10).json()["data"]
    assert not any(c["excluded"] for c in listing_k2)
    assert served(chat(gt, text="k1 request", headers=k1)) == "local-c"
    assert served(chat(gt, text="k2 request", headers=k2)) == "local-g"
    assert httpx.put(f"{url}/local-x/none@x", headers=k1, timeout=10).status_code == 404
    r = httpx.delete(f"{url}/{G_KEY}", headers=k1, timeout=10)
    assert r.status_code == 200 and not any(c["excluded"] for c in r.json()["data"])
    assert served(chat(gt, text="k1 again", headers=k1)) == "local-g"
    r = httpx.put(url, json={"exclude": ["g1", "c1"]}, headers=k1, timeout=10)  # by connection id
    assert r.status_code == 200
    assert served(chat(gt, text="k1 third", headers=k1)) == "local-o"


def test_candidate_endpoints_need_a_valid_client_key_when_keys_are_required(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    """API-8 on the ``/v1/auto-combo`` routes: 401 without a valid key when keys are required."""
    gt = make_gateway({**NO_EXPLORATION, **KEYS, "server": {"require_api_key": True}})
    url = f"{gt.base_url}/auto-combo/auto/candidates"
    assert httpx.get(url, timeout=10).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer wrong"}, timeout=10).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer sk-test-k1"}, timeout=10).status_code == 200


def test_persisted_auto_combo_with_router_strategy(make_gateway: Callable[..., GatewayThread]) -> None:
    """AUTO-2/AUTO-5: a config combo with ``strategy: auto``, a candidatePool and routerStrategy
    ``cost`` routes to the cheapest pool member."""
    combo = {
        "name": "my-auto",
        "strategy": "auto",
        "config": {"routerStrategy": "cost", "auto": {"candidatePool": ["local-o", "local-c"]}},
    }
    gt = make_gateway({**NO_EXPLORATION, "combos": [combo]})
    r = chat(gt, "my-auto")
    assert served(r) == "local-c" and r.headers["x-omniroute-strategy"] == "cost"
    assert {c["provider"] for c in decision(gt, r)["candidates"]} == {"local-o", "local-c"}
    listing = {v["id"]: v for v in httpx.get(f"{gt.url}/api/combos/auto", timeout=10).json()["data"]}
    assert listing["my-auto"]["context_length"] == 200_000


def test_quality_feedback_moves_the_quality_factor(gt: GatewayThread) -> None:
    """AUTO-3 ``quality``: .5 without observations, then the mean feedback score."""
    r = chat(gt, text="rate me")
    assert decision(gt, r)["candidates"][0]["factors"]["quality"] == 0.5
    fb = httpx.post(
        f"{gt.base_url}/auto-combo/feedback", json={"request_id": r.headers["x-request-id"], "score": 0.9}
    )
    assert fb.status_code == 200 and fb.json()["candidate"] == G_KEY
    r = chat(gt, text="rate me again")
    assert decision(gt, r)["candidates"][0]["factors"]["quality"] == pytest.approx(0.9)


def test_effort_header_sets_reasoning_effort_only_for_openai_format_upstreams(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    """AUTO-7: ``X-OmniRoute-Effort: auto`` resolves a reasoning effort and sends it to an
    OpenAI-format pick; when the pick fails and an Anthropic-format candidate serves, that request
    carries no OpenAI reasoning field (the effort is applied per candidate)."""
    gt = make_gateway(
        {
            **NO_EXPLORATION,
            "providers": [
                {
                    "id": "local-g",
                    "format": "openai",
                    "base_url": f"{fakes['g'].base_url}/v1",
                    "models": [
                        {
                            "id": "model-g+fail-503",
                            "input_price": 0.01,
                            "output_price": 0.01,
                            "context_window": 100000,
                            "max_output_tokens": 1000,
                        }
                    ],
                },
                {
                    "id": "anth-c",
                    "format": "anthropic",
                    "base_url": fakes["c"].base_url,
                    "models": [
                        {
                            "id": "model-c",
                            "input_price": 5,
                            "output_price": 5,
                            "context_window": 100000,
                            "max_output_tokens": 1000,
                        }
                    ],
                },
            ],
            "connections": [
                {"id": "g1", "provider": "local-g", "api_key": "k", "default_model": "model-g+fail-503"},
                {"id": "c1", "provider": "anth-c", "api_key": "k", "default_model": "model-c"},
            ],
        }
    )
    text = "Please think step by step and prove carefully why the algorithm terminates for every input."
    r = chat(gt, text=text, headers={"x-omniroute-effort": "auto"})
    assert served(r) == "anth-c"
    g_body = [q.body for q in fakes["g"].requests if q.model == "model-g+fail-503"][-1]
    c_body = [q.body for q in fakes["c"].requests if q.path.endswith("/messages")][-1]
    assert g_body.get("reasoning_effort") in ("low", "medium", "high")
    assert "reasoning_effort" not in c_body and "thinking" not in c_body
