"""Health attribution: a 500 that the same request reproduces on another connection is the request's
fault and does not count against any provider's breaker; a 500 that another connection does not
reproduce counts as usual; validation-like 4xx never count."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MSGS = [{"role": "user", "content": "hi"}]
BOTH = {
    "combos": [
        {
            "name": "pair",
            "strategy": "priority",
            "targets": [{"model": "local-o/model-o"}, {"model": "local-c/model-c"}],
            "config": {"maxRetries": 0},
        }
    ],
    "resilience": {"retries": {"per_target": 0}},
}


@pytest.fixture(autouse=True)
def restore_behaviours(fakes: dict[str, FakeProviderThread]) -> Iterator[None]:
    """The fakes are shared: give their models their name's own behaviour back afterwards."""
    yield
    for name, fake in fakes.items():
        fake.set_behaviour(f"model-{name}", f"model-{name}")


def failures(gw: GatewayThread) -> dict[str, int]:
    snap: dict[str, Any] = httpx.get(f"{gw.url}/api/resilience", timeout=10).json()
    return {p: b["failures"] for p, b in snap["breakers"].items()}


def chat(gw: GatewayThread, model: str) -> httpx.Response:
    return httpx.post(f"{gw.url}/v1/chat/completions", json={"model": model, "messages": MSGS}, timeout=10)


def test_a_500_the_request_reproduces_elsewhere_does_not_count(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gw = make_gateway(BOTH)
    fakes["o"].set_behaviour("model-o", "fail-500")
    fakes["c"].set_behaviour("model-c", "fail-500")
    for _ in range(6):  # more than the failure threshold (5)
        assert chat(gw, "pair").status_code >= 500
    assert fakes["o"].calls() == 6 and fakes["c"].calls() == 6
    assert failures(gw).get("local-o", 0) == 0 and failures(gw).get("local-c", 0) == 0
    assert chat(gw, "local-o/model-o").status_code >= 500, "still served: the breaker stayed closed"
    assert fakes["o"].calls() == 7


def test_a_500_another_connection_does_not_reproduce_counts(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gw = make_gateway(BOTH)
    fakes["o"].set_behaviour("model-o", "fail-500")
    r = chat(gw, "pair")
    assert r.status_code == 200 and r.headers["x-omniroute-provider"] == "local-c"
    assert failures(gw)["local-o"] == 1
    assert "local-c" not in failures(gw)


def test_a_500_with_no_other_connection_to_try_counts(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gw = make_gateway({"resilience": {"retries": {"per_target": 0}}})
    fakes["o"].set_behaviour("model-o", "fail-500")
    assert chat(gw, "local-o/model-o").status_code >= 500
    assert failures(gw)["local-o"] == 1


def test_validation_like_4xx_never_count(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> None:
    gw = make_gateway({"resilience": {"retries": {"per_target": 0}}})
    for status in ("400", "413", "422"):
        fakes["o"].set_behaviour("model-o", f"fail-{status}")
        assert chat(gw, "local-o/model-o").status_code == int(status)
    assert failures(gw).get("local-o", 0) == 0
