"""Management-API endpoints added for the console (OPS-3): usage summary and filtered paging (OBS-1),
"try it" and connection tests, auto scores and per-key exclusions (AUTO-2, AUTO-3). Real gateway,
real fake providers."""

from __future__ import annotations

import math
from collections.abc import Callable

import httpx
import pytest

from omniroute.testing.gateway import GatewayThread


def chat(gw: GatewayThread, model: str, key: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"model": model, "messages": [{"role": "user", "content": "x"}]}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, headers=headers, timeout=10)


@pytest.fixture
def api(gateway: GatewayThread) -> httpx.Client:
    return httpx.Client(base_url=gateway.url, timeout=10)


def test_try_answers_through_the_routing_and_is_recorded(gateway: GatewayThread, api: httpx.Client) -> None:
    """OPS-3: ``POST /api/try`` routes like a client request, returns the answer with its decision,
    and the request appears in the usage log; an upstream refusal comes back as its status and error."""
    r = api.post("/api/try", json={"model": "local-o/model-o", "prompt": "echo: from the console"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["status"], out["answer"], out["connection"]) == (200, "from the console", "o1")
    assert out["decision"]["served"] == "local-o/model-o@o1" and len(out["decision"]["attempts"]) == 1
    rows = api.get("/api/usage", params={"request_id": out["request_id"]}).json()["data"]
    assert [(row["status"], row["requested_model"]) for row in rows] == [(200, "local-o/model-o")]
    refused = api.post("/api/try", json={"model": "local-o/model-o+fail-400", "prompt": "x"}).json()
    assert refused["status"] == 400 and refused["answer"] is None and refused["error"]["message"]
    assert api.post("/api/try", json={"model": "", "prompt": "x"}).status_code == 400


def test_connection_test_uses_that_connection_and_stores_the_outcome(
    gateway: GatewayThread, api: httpx.Client
) -> None:
    """PROV-3/OPS-3: a test makes one attempt through the connection at its default model and stores
    ``test_status``/``last_error``; a failing upstream is reported and stored; unknown ids are 404."""
    ok = api.post("/api/connections/c1/test").json()
    assert (ok["status"], ok["connection"], ok["served_model"]) == (200, "c1", "model-c")
    assert api.get("/api/connections/c1").json()["test_status"] == "ok"
    assert api.put("/api/connections/g1", json={"default_model": "model-g+fail-500"}).status_code == 200
    failed = api.post("/api/connections/g1/test").json()
    assert failed["status"] >= 500 and len(failed["decision"]["attempts"]) == 1
    stored = api.get("/api/connections/g1").json()
    assert stored["test_status"] == "failed" and stored["last_error"]
    assert api.post("/api/connections/nope/test").status_code == 404


def test_usage_traffic_counts_requests_errors_fallbacks_and_tops(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    """OPS-3/OBS-1: the overview's traffic figures count requests, errors (not fallbacks), fallbacks (served
    after a failed attempt), latency percentiles and spend, and names the busiest keys."""
    gw = make_gateway(
        {
            "api_keys": [{"name": "team", "key": "sk-team-key-123456"}],
            "combos": [
                {
                    "name": "rescue",
                    "strategy": "priority",
                    "targets": [{"model": "local-o/model-o+fail-500"}, {"model": "local-c/model-c"}],
                }
            ],
        }
    )
    api = httpx.Client(base_url=gw.url, timeout=10)
    assert [chat(gw, m, "sk-team-key-123456").status_code for m in ("local-o/model-o", "rescue")] == [
        200,
        200,
    ]
    assert chat(gw, "local-g/model-g+fail-400").status_code == 400
    s = api.get("/api/usage/traffic", params={"window": "1h"}).json()
    t = s["totals"]
    assert (t["requests"], t["errors"], t["fallbacks"]) == (3, 1, 1)
    assert math.isclose(s["error_rate"], 1 / 3)
    assert t["p50_latency_ms"] > 0 and t["p95_latency_ms"] >= t["p50_latency_ms"]
    assert t["cost_usd"] > 0 and s["bucket_s"] == 60 and sum(b["requests"] for b in s["series"]) == 3
    assert s["top_keys"][0] == {**s["top_keys"][0], "name": "team", "requests": 2}
    assert {m["model"] for m in s["top_models"]} == {"model-o", "model-c"}
    bad = api.get("/api/usage/traffic", params={"window": "2h"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "window"


def test_usage_list_filters_pages_and_names_bad_filters(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    """OBS-1: ``GET /api/usage`` filters by key (id or name), model and status and pages with
    ``offset``/``has_more``; a bad status or unknown key is a 400 naming the parameter."""
    gw = make_gateway({"api_keys": [{"name": "team", "key": "sk-team-key-123456"}]})
    api = httpx.Client(base_url=gw.url, timeout=10)
    chat(gw, "local-o/model-o", "sk-team-key-123456")
    chat(gw, "local-c/model-c")
    chat(gw, "local-c/model-c+fail-400")

    def ids(**params: object) -> list[str]:
        return [r["requested_model"] for r in api.get("/api/usage", params=params).json()["data"]]

    assert ids(key="team") == ["local-o/model-o"]
    assert ids(model="local-c/model-c") == ["local-c/model-c"]
    assert ids(status="error") == ["local-c/model-c+fail-400"]
    first = api.get("/api/usage", params={"limit": 2}).json()
    assert len(first["data"]) == 2 and first["has_more"] is True
    last = api.get("/api/usage", params={"limit": 2, "offset": 2}).json()
    assert len(last["data"]) == 1 and last["has_more"] is False
    for params, param in (({"status": "bad"}, "status"), ({"key": "nobody"}, "key"), ({"limit": 0}, "limit")):
        r = api.get("/api/usage", params=params)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text


def test_auto_scores_explain_each_candidate_and_edit_key_exclusions(
    gateway: GatewayThread, api: httpx.Client
) -> None:
    """AUTO-2/AUTO-3: every candidate of a channel with its 16 factors, weights (summing to 1) and
    contributions adding up to its score, best first; an open breaker shows as a reason; a key's
    exclusion set through the management API shows for that key only and reaches routing."""
    key = api.post("/api/keys", json={"name": "scorer"}).json()
    assert chat(gateway, "local-o/model-o+fail-500").status_code >= 500
    for _ in range(4):
        chat(gateway, "local-o/model-o+fail-500")
    s = api.get("/api/auto/scores", params={"channel": "auto"}).json()
    assert math.isclose(sum(s["weights"].values()), 1.0, abs_tol=1e-6)
    cands = s["candidates"]
    assert {c["key"] for c in cands} == {"local-o/model-o@o1", "local-c/model-c@c1", "local-g/model-g@g1"}
    assert [c["score"] for c in cands] == sorted((c["score"] for c in cands), reverse=True)
    for c in cands:
        assert len(c["factors"]) == 16
        assert math.isclose(sum(f["contribution"] for f in c["factors"]), c["score"], abs_tol=1e-9)
    broken = next(c for c in cands if c["provider"] == "local-o")
    assert broken["reachable"] is False and "circuit open" in broken["unreachable_reasons"][0]
    edit = {"channel": "auto", "api_key": "scorer", "exclude": ["g1"]}
    after = api.put("/api/auto/exclusions", json=edit).json()
    assert after["excluded"] == ["local-g/model-g@g1"] and after["api_key_id"] == key["id"]
    assert api.get("/api/auto/scores").json()["excluded"] == []  # requests without a key: unchanged
    served = chat(gateway, "auto", key["key"])
    assert served.status_code == 200 and served.headers["x-omniroute-connection"] != "g1"
    unknown = api.put("/api/auto/exclusions", json={**edit, "exclude": ["zz"]})
    assert unknown.status_code == 404 and unknown.json()["error"]["param"] == "candidate_key"
    assert api.get("/api/auto/scores", params={"channel": "nonsense-channel"}).status_code == 400


def test_auto_scores_of_a_persisted_auto_combo_use_its_router_and_weights(
    gateway: GatewayThread, api: httpx.Client
) -> None:
    """AUTO-2/AUTO-4: a stored ``strategy: auto`` combo is a channel of its own: its pool, its
    ``routerStrategy`` and its mode pack's weights."""
    combo = {
        "name": "thrifty",
        "strategy": "auto",
        "targets": [{"model": "local-o/model-o"}, {"model": "local-g/model-g"}],
        "config": {"routerStrategy": "cost", "modePack": "cost-saver"},
    }
    assert api.post("/api/combos", json=combo).status_code == 201
    s = api.get("/api/auto/scores", params={"channel": "thrifty"}).json()
    assert (s["router"], s["weights_source"]) == ("cost", "cost-saver")
    assert {c["connection"] for c in s["candidates"]} == {"o1", "g1"}
