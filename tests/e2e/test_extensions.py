"""Extensions given to ``create_app``: a combo strategy, an auto router strategy and a provider wire
format added through :class:`~omniroute.extensions.Extensions` are accepted by name (management API,
config file) and route requests over HTTP (COMBO-3, AUTO-5, PROV-1); they belong to that gateway
only."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import pytest
from combo_support import Api, C, G, O, combo_config

from conftest import base_config
from omniroute.extensions import Extensions
from omniroute.providers.upstream import UpstreamRequest
from omniroute.routing.auto.routers import RouterContext, RouterDecision
from omniroute.routing.auto.scoring import CandidateInputs
from omniroute.routing.strategies import Ordering, StrategyContext
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread
from omniroute.values import Candidate, ChatRequest
from omniroute.wire import FORMATS
from omniroute.wire.base import WireFormat
from omniroute.wire.openai.upstream import OpenAIAdapter

MakeGateway = Callable[..., GatewayThread]


class MiddleFirst:
    """A combo strategy that tries the middle target first, then the rest in definition order."""

    name = "middle-first"
    expands_connections = False
    protects_first = True

    async def order(self, ctx: StrategyContext) -> Ordering:
        targets = list(ctx.targets)
        mid = targets.pop(len(targets) // 2)
        return Ordering([mid, *targets], "middle target first")


class PriciestRouter:
    """An auto router that picks the most expensive candidate."""

    name = "priciest"

    def select(self, pool: Sequence[CandidateInputs], ctx: RouterContext) -> RouterDecision:
        best = max(range(len(pool)), key=lambda i: pool[i].cost or 0.0)
        return RouterDecision(best, self.name, "most expensive first", len(pool), 1.0)


@pytest.fixture
def api(make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path) -> Api:
    ext = Extensions(strategies=(MiddleFirst(),), routers=(PriciestRouter(),))
    return Api(make_gateway(replace=combo_config(fakes, tmp_path), extensions=ext))


def test_a_strategy_given_to_create_app_is_created_by_name_and_routes_a_request(api: Api) -> None:
    """COMBO-3: ``POST /api/combos`` accepts the extension's name (any case, ``_`` for ``-``) and the
    combo routes with it: the middle target answers and the strategy header names it."""
    created = api.combo("mid", [O, C, G], strategy="Middle_First")
    assert created["strategy"] == "middle-first"
    r = api.chat("mid")
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-provider"] == "local-c"
    assert r.headers["x-omniroute-strategy"] == "middle-first"
    decision = api.http.get(f"/api/routing/decisions/{r.headers['x-request-id']}").json()
    assert decision["strategy"] == "middle-first"
    assert "middle target first" in decision["reason"]
    assert [c["provider"] for c in decision["candidates"]] == ["local-c", "local-o", "local-g"]


def test_an_extension_strategy_falls_over_like_a_built_in(
    api: Api, fakes: dict[str, FakeProviderThread]
) -> None:
    """RESIL-1: when the target the extension put first fails with a 503, the next one answers."""
    fakes["c"].set_behaviour("model-c", "fail-503")
    api.combo("mid-fail", [O, C, G], strategy="middle-first")
    r = api.chat("mid-fail")
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-provider"] == "local-o"


def test_an_extension_strategy_is_unknown_to_a_gateway_without_it(
    make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """Extensions are per gateway: another gateway rejects the name with a 400 naming ``strategy``."""
    plain = Api(make_gateway(replace=combo_config(fakes, tmp_path)))
    r = plain.http.post("/api/combos", json={"name": "m", "strategy": "middle-first", "targets": [O, C]})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "strategy" and "unknown strategy 'middle-first'" in err["message"]


def test_a_router_given_to_create_app_picks_for_an_auto_combo(api: Api) -> None:
    """AUTO-5: an auto combo whose ``routerStrategy`` names the extension's router is served by its
    pick (the most expensive of the fakes, O), and the strategy header names the router."""
    r = api.http.post(
        "/api/combos",
        json={"name": "pricey", "strategy": "auto", "config": {"routerStrategy": "priciest"}},
    )
    assert r.status_code == 201, r.text
    chat = api.chat("pricey")
    assert chat.status_code == 200, chat.text
    assert chat.headers["x-omniroute-provider"] == "local-o"
    assert chat.headers["x-omniroute-strategy"] == "priciest"


def test_a_format_name_that_is_taken_is_refused() -> None:
    """Two wire formats with one name would make routes and adapters ambiguous: a ValueError."""
    with pytest.raises(ValueError, match="openai"):
        Extensions(formats=(FORMATS[0],))


class TaggedOpenAI(OpenAIAdapter):
    """An upstream format that is OpenAI's plus an ``X-Acme-Tenant`` header on every request."""

    def build_request(self, cand: Candidate, req: ChatRequest, *, stream: bool) -> UpstreamRequest:
        up = super().build_request(cand, req, stream=stream)
        return dataclasses.replace(up, headers={**up.headers, "X-Acme-Tenant": "t-1"})


def test_a_provider_format_given_to_create_app_is_accepted_and_routes(
    make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """PROV-1: a config provider whose ``format`` is the extension's starts, its requests go through
    the extension's adapter, and ``POST /api/providers`` accepts the name while still refusing an
    unknown one."""
    cfg = base_config(fakes, tmp_path)
    cfg["providers"][0]["format"] = "acme-openai"
    ext = Extensions(formats=(WireFormat(name="acme-openai", upstream=TaggedOpenAI()),))
    gt = make_gateway(replace=cfg, extensions=ext)
    r = httpx.post(
        f"{gt.base_url}/chat/completions",
        json={"model": "local-o/model-o", "messages": [{"role": "user", "content": "hi"}]},
        timeout=20,
    )
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-provider"] == "local-o"
    assert fakes["o"].requests[-1].headers.get("x-acme-tenant") == "t-1"
    ok = httpx.post(
        f"{gt.url}/api/providers",
        json={"id": "p8", "format": "acme-openai", "base_url": "http://127.0.0.1:1/v1"},
        timeout=10,
    )
    assert ok.status_code == 201, ok.text
    bad = httpx.post(
        f"{gt.url}/api/providers",
        json={"id": "p9", "format": "grpc", "base_url": "http://127.0.0.1:1/v1"},
        timeout=10,
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "format"
    assert "acme-openai" in bad.json()["error"]["message"]
