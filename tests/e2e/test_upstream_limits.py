"""Upstream limits (``upstream_limits``): a huge body, a gzip bomb or a huge stream event from a
provider stops at the limit as a 502 counted against that provider, so the request falls back;
nothing is read past the limit and a big event is assembled in linear time."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.config import config_from_dict
from omniroute.errors import ResponseTooLarge
from omniroute.providers.upstream import MB, SseAssembler
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread


class Rig:
    """Fakes A and B serving model ``m`` through the chain ``m: [pa, pb]``, limits of 1 MB."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.fakes = {n: FakeProviderThread(name=n).start() for n in ("a", "b")}
        self.gateways: list[GatewayThread] = []

    def gateway(self, chain: tuple[str, ...] = ("pa", "pb")) -> GatewayThread:
        data: dict[str, Any] = {
            "database_url": f"sqlite:///{self.tmp}/gw-{len(self.gateways)}.db",
            "providers": [
                {"id": f"p{n}", "base_url": f"{f.base_url}/v1", "models": [{"id": "m"}]}
                for n, f in self.fakes.items()
            ],
            "connections": [{"id": f"{n}1", "provider": f"p{n}", "api_key": f"k{n}"} for n in self.fakes],
            "fallback_chains": {"m": [{"provider": p} for p in chain]},
            "resilience": {
                "circuit_breaker": {"failure_threshold": 1},
                "timeouts": {"connect_s": 5, "ttft_s": 20, "idle_s": 20, "total_s": 60},
            },
            "upstream_limits": {"max_response_mb": 1, "max_event_mb": 1},
        }
        gt = GatewayThread(config_from_dict(data, env={})).start()
        self.gateways.append(gt)
        return gt

    def close(self) -> None:
        for g in self.gateways:
            g.stop()
        for f in self.fakes.values():
            f.stop()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def chat(gw: GatewayThread, stream: bool = False) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=60)


def breaker(gw: GatewayThread, provider: str) -> str:
    state = httpx.get(f"{gw.url}/api/resilience", timeout=5).json()
    return str(state["breakers"].get(provider, {}).get("state", "CLOSED"))


@pytest.mark.parametrize(
    ("fault", "stream"), [("huge-body-3", False), ("gzip-bomb-64", False), ("huge-event-3", True)]
)
def test_an_oversized_upstream_answer_is_a_counted_failure_and_falls_back(
    rig: Rig, fault: str, stream: bool
) -> None:
    """Over the limit, the attempt fails, opens A's breaker (threshold 1) and B answers."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", fault)
    r = chat(gw, stream=stream)
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-provider"] == "pb"
    assert breaker(gw, "pa") == "OPEN"


@pytest.mark.parametrize(
    ("fault", "stream"), [("huge-body-3", False), ("gzip-bomb-64", False), ("huge-event-3", True)]
)
def test_an_oversized_upstream_answer_with_no_fallback_is_a_clean_502(
    rig: Rig, fault: str, stream: bool
) -> None:
    gw = rig.gateway(chain=("pa",))
    rig.fakes["a"].set_behaviour("m", fault)
    r = chat(gw, stream=stream)
    assert r.status_code == 502, r.text
    assert "larger than 1 MB" in r.json()["error"]["message"]


def test_a_gzip_bomb_is_not_inflated_past_the_limit(rig: Rig) -> None:
    """256 MB of inflated body (a few hundred KB on the wire) never sits in memory: reading stops at
    the 1 MB limit, so the peak stays far below the bomb's size."""
    gw = rig.gateway(chain=("pa",))
    rig.fakes["a"].set_behaviour("m", "gzip-bomb-256")
    tracemalloc.start()
    try:
        r = chat(gw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.status_code == 502, r.text
    assert peak < 64 * MB


def test_an_event_far_over_the_limit_is_refused_before_it_is_buffered() -> None:
    sse = SseAssembler(MB, "p")
    assert sse.feed(b'data: {"a": 1}\n\ndata: ') == ([("", b'{"a": 1}')], False)
    fed = 0
    with pytest.raises(ResponseTooLarge):
        for _ in range(1000):
            sse.feed(b"x" * 4096)
            fed += 4096
    assert fed <= MB, "refused at the limit, not after the whole event"


def test_a_100_mb_event_is_assembled_in_linear_time() -> None:
    """A 100 MB event arriving in 8 KB reads comes out whole; every read costs its own bytes only (a
    quadratic parser re-copies the growing event on each of the 12,800 reads: over 600 GB)."""
    sse = SseAssembler(128 * MB)
    piece = b"x" * 8192
    assert sse.feed(b'event: big\ndata: {"pad": "') == ([], False)
    for _ in range(100 * 128):
        assert sse.feed(piece) == ([], False)
    events, _ = sse.feed(b'"}\n\ndata: next\n\n')
    assert [(name, len(data)) for name, data in events] == [("big", 100 * MB + 11), ("", 4)]
