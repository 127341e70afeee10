"""``n`` > 1 on ``/v1/chat/completions`` is never silently answered with one choice: OpenAI-format
upstreams get ``n`` passed through, Gemini-format ones as ``candidateCount``, and an Anthropic-format
target (the Messages API has no ``n``) is a 400 naming ``n``."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from test_wire_formats import UPSTREAMS, wire_config

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread


@pytest.fixture
def gw(make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]) -> GatewayThread:
    return make_gateway(wire_config(fakes))


def chat(gw: GatewayThread, model: str, **extra: object) -> httpx.Response:
    body = {"model": model, "n": 2, "messages": [{"role": "user", "content": "hi"}], **extra}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=10)


@pytest.mark.parametrize("stream", [False, True])
def test_n_on_an_anthropic_format_target_is_400_naming_n(gw: GatewayThread, stream: bool) -> None:
    r = chat(gw, UPSTREAMS["anthropic"][0], stream=stream)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "n" and "'n'" in err["message"]


def test_n_reaches_openai_and_gemini_upstreams(
    gw: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    assert chat(gw, UPSTREAMS["openai"][0]).status_code == 200
    assert fakes["o"].requests[-1].body["n"] == 2
    assert chat(gw, UPSTREAMS["gemini"][0]).status_code == 200
    sent = fakes["g"].requests[-1].body
    assert sent["generationConfig"]["candidateCount"] == 2


def test_n_of_one_on_an_anthropic_format_target_is_served(gw: GatewayThread) -> None:
    assert chat(gw, UPSTREAMS["anthropic"][0], n=1).status_code == 200
