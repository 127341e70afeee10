"""Helpers for the combo end-to-end tests: a config with extra catalog models, connections and tags
for the fake providers O, C, G; a small HTTP client for the admin and chat APIs; a burst runner for
hundreds of requests; and state seeding through the gateway's own loop."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from conftest import base_config
from omniroute.gateway import Gateway
from omniroute.state.records import QuotaSnapshot
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

O, C, G = "local-o/model-o", "local-c/model-c", "local-g/model-g"  # noqa: E741 - the issue's names
HI = [{"role": "user", "content": "hi"}]

EXTRA_MODELS: dict[str, list[dict[str, Any]]] = {
    "o": [
        {
            "id": "gpt-4o-mini",
            "input_price": 0.15,
            "output_price": 0.6,
            "context_window": 128000,
            "max_output_tokens": 16384,
        }
    ],
    "g": [
        {
            "id": "gemini-2.5-pro",
            "input_price": 2.0,
            "output_price": 12.0,
            "context_window": 1048576,
            "max_output_tokens": 65536,
        },
        {
            "id": "gemini-2.5-flash",
            "input_price": 0.3,
            "output_price": 2.5,
            "context_window": 1048576,
            "max_output_tokens": 65536,
        },
    ],
}


def combo_config(
    fakes: dict[str, FakeProviderThread],
    tmp: Path,
    *,
    tags: dict[str, list[str]] | None = None,
    extra_connections: Sequence[str] = (),
    combos: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The shared test config plus real-looking catalog models (gpt-4o-mini on O, gemini-2.5-* on G),
    connection ``tags`` by id and ``extra_connections`` like ``"o2"`` (provider from the letter)."""
    cfg = copy.deepcopy(base_config(fakes, tmp))
    for p in cfg["providers"]:
        p["models"] += EXTRA_MODELS.get(p["id"][-1], [])
    for c in cfg["connections"]:
        if tags and c["id"] in tags:
            c["tags"] = tags[c["id"]]
    for i, cid in enumerate(extra_connections):
        cfg["connections"].append(
            {
                "id": cid,
                "provider": f"local-{cid[0]}",
                "api_key": f"sk-{cid}",
                "priority": 10 + i,
                "tags": (tags or {}).get(cid, []),
            }
        )
    if combos:
        cfg["combos"] = combos
    return cfg


class Api:
    """Admin and chat calls against one gateway (loopback: no admin key needed)."""

    def __init__(self, gt: GatewayThread) -> None:
        self.gt = gt
        self.http = httpx.Client(base_url=gt.url, timeout=20)

    def combo(
        self, name: str, targets: list[Any], strategy: str = "priority", **config: Any
    ) -> dict[str, Any]:
        """Create a combo (maxRetries 0 unless given) and return the response body (201 asserted)."""
        config.setdefault("maxRetries", 0)
        r = self.http.post(
            "/api/combos", json={"name": name, "strategy": strategy, "targets": targets, "config": config}
        )
        assert r.status_code == 201, r.text
        body: dict[str, Any] = r.json()
        return body

    def chat(
        self,
        model: str,
        *,
        stream: bool = False,
        headers: dict[str, str] | None = None,
        messages: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> httpx.Response:
        body = {"model": model, "messages": messages or HI, **extra}
        if not stream:
            return self.http.post("/v1/chat/completions", json=body, headers=headers or {})
        body["stream"] = True
        with self.http.stream("POST", "/v1/chat/completions", json=body, headers=headers or {}) as r:
            r.read()
        return r

    def served(self, model: str, n: int, **kw: Any) -> list[str]:
        """Provider letters (``o``/``c``/``g``) that served ``n`` sequential requests (200 asserted)."""
        out = []
        for _ in range(n):
            r = self.chat(model, **kw)
            assert r.status_code == 200, r.text
            out.append(r.headers["x-omniroute-provider"][-1])
        return out

    def burst(self, model: str, n: int, *, concurrency: int = 8, **body: Any) -> list[str]:
        """``n`` requests seeded 0…n-1 (``X-OmniRoute-Seed``), ``concurrency`` at a time; serving letters."""

        async def run() -> list[str]:
            sem = asyncio.Semaphore(concurrency)
            async with aiohttp.ClientSession(base_url=self.gt.url) as s:

                async def one(i: int) -> str:
                    async with (
                        sem,
                        s.post(
                            "/v1/chat/completions",
                            json={"model": model, "messages": HI, **body},
                            headers={"x-omniroute-seed": str(i)},
                        ) as r,
                    ):
                        await r.read()
                        assert r.status == 200
                        return r.headers["x-omniroute-provider"][-1]

                return list(await asyncio.gather(*(one(i) for i in range(n))))

        return asyncio.run(run())


async def _cool(gw: Gateway, conns: Sequence[str], seconds: float) -> None:
    for cid in conns:
        conn = gw.registry.connections_by_id[cid]
        await gw.state.cooldown_extend(
            cid,
            gw.clock.time(),
            provider=conn.provider,
            hint_s=seconds,
            base_s=seconds,
            max_s=seconds,
            max_hint_s=seconds,
            reason="rate limited (test)",
            last_error="429",
        )


def cool(gt: GatewayThread, *conns: str, seconds: float = 60.0) -> None:
    """Put connections in cooldown (RESIL-2) as a 429 with a hint would."""
    gt.call(lambda gw: _cool(gw, conns, seconds))


def set_quota(gt: GatewayThread, conn: str, remaining: float, reset_in: float | None) -> None:
    """Store a quota snapshot as parsed from upstream rate-limit headers."""
    now = gt.clock.time()
    snap = QuotaSnapshot(remaining, None if reset_in is None else now + reset_in, observed_at=now)
    gt.call(lambda gw: gw.state.set_quota(conn, snap))


@contextmanager
def behaviour(fake: FakeProviderThread, model: str, spec: str) -> Iterator[None]:
    """Make ``fake`` answer ``model`` per the fault grammar ``spec`` inside the block."""
    fake.set_behaviour(model, spec)
    try:
        yield
    finally:
        fake.set_behaviour(model, "")


def upstream_messages(fake: FakeProviderThread) -> list[dict[str, Any]]:
    """The messages of the last request the fake received."""
    body = fake.requests[-1].body
    assert isinstance(body, dict)
    msgs: list[dict[str, Any]] = body["messages"]
    return msgs
