"""``POST /v1/embeddings`` runs through the engine's one attempt loop (API-5, RESIL-1, RESIL-6): it
fails over on a 503 to the next provider serving the model, stops at the request's attempt cap, and
gives back the half-open probe slot of a provider it did not need, as chat does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import base_config, merge
from omniroute.clock import FakeClock
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MakeGateway = Callable[..., GatewayThread]
EMBED = "text-embedding-3-small"
EMBED_MODEL = {"id": EMBED, "input_price": 0.02, "output_price": 0.0, "capabilities": ["embeddings"]}


def embed_config(fakes: dict[str, FakeProviderThread], tmp: Path, **resilience: Any) -> dict[str, Any]:
    """The shared config with ``text-embedding-3-small`` served by local-o (priority 1) and local-c
    (priority 2), no same-target retries unless ``resilience`` says otherwise."""
    cfg = base_config(fakes, tmp)
    for p in cfg["providers"]:
        if p["id"] in ("local-o", "local-c"):
            p["models"].append(EMBED_MODEL)
    return merge(cfg, {"resilience": merge({"retries": {"per_target": 0}}, resilience)})


def embed(gt: GatewayThread, model: str = EMBED) -> httpx.Response:
    return httpx.post(f"{gt.base_url}/embeddings", json={"model": model, "input": ["hi"]}, timeout=20)


def decision(gt: GatewayThread, r: httpx.Response) -> dict[str, Any]:
    d = httpx.get(f"{gt.url}/api/routing/decisions/{r.headers['x-request-id']}", timeout=10)
    assert d.status_code == 200, d.text
    return dict(d.json())


@pytest.fixture(autouse=True)
def _answering_again(fakes: dict[str, FakeProviderThread]) -> Iterator[None]:
    """Every fake answers the embeddings model normally after each test (behaviours outlive a test)."""
    yield
    for fake in fakes.values():
        fake.set_behaviour(EMBED, "")


def embedding_calls(fake: FakeProviderThread) -> int:
    return sum(1 for r in fake.requests if r.path.endswith("/embeddings"))


def test_embeddings_fail_over_on_503_to_the_next_provider(
    make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """A 503 from the first provider is recorded and the next one answers; both in-flight counts are
    back to zero afterwards."""
    gt = make_gateway(replace=embed_config(fakes, tmp_path))
    fakes["o"].set_behaviour(EMBED, "fail-503")
    r = embed(gt)
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-provider"] == "local-c"
    assert len(r.json()["data"]) == 1
    attempts = [(a["provider"], a["status"]) for a in decision(gt, r)["attempts"]]
    assert attempts == [("local-o", 503), ("local-c", 200)]
    inflight = gt.call(lambda gw: gw.state.get_inflight(["o1", "c1"]))
    assert all(n == 0 for n in inflight.values()), inflight


def test_embeddings_respect_the_attempt_cap(
    make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """``resilience.retries.max_attempts: 1``: the first provider's 503 ends the request with one
    attempt; the second provider is never called."""
    gt = make_gateway(replace=embed_config(fakes, tmp_path, retries={"max_attempts": 1}))
    fakes["o"].set_behaviour(EMBED, "fail-503")
    r = embed(gt)
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "fallback_exhausted"
    assert embedding_calls(fakes["c"]) == 0
    assert [a["provider"] for a in r.json()["diagnostics"]["attempted"]] == ["local-o"]


def test_embeddings_give_back_the_probe_slot_of_a_provider_they_did_not_need(
    make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """local-c's breaker is half-open; an embeddings request served by local-o claims local-c's one
    probe slot in the ladder and must release it, so the next request to local-c is admitted as the
    probe (and closes the breaker) instead of being refused as 'probe in flight'."""
    cfg = embed_config(fakes, tmp_path, circuit_breaker={"failure_threshold": 1})
    gt = make_gateway(replace=cfg, clock=FakeClock())
    fakes["c"].set_behaviour(EMBED, "fail-503")
    assert embed(gt, f"local-c/{EMBED}").status_code == 503
    breakers = httpx.get(f"{gt.url}/api/resilience", timeout=10).json()["breakers"]
    assert breakers["local-c"]["state"] == "OPEN"
    fakes["c"].set_behaviour(EMBED, "")
    gt.advance(60)  # past the breaker's reset timeout and the connection's cooldown: half-open
    r = embed(gt)
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-provider"] == "local-o"
    probe = embed(gt, f"local-c/{EMBED}")
    assert probe.status_code == 200, probe.text
    assert probe.headers["x-omniroute-provider"] == "local-c"
    breakers = httpx.get(f"{gt.url}/api/resilience", timeout=10).json()["breakers"]
    assert breakers.get("local-c", {}).get("state", "CLOSED") == "CLOSED"
