"""Failover through the HTTP API on a fake clock: recovery of a primary after an outage (RESIL-11),
declared-empty capabilities in pre-call checks (RESIL-8) and reset hints written in words (RESIL-13).

A gateway in front of two fake providers: ``pa`` (fake A, the primary) and ``pb`` (fake B, the
fallback), model ``m`` routed through the chain ``m: [pa, pb]`` with the shipped resilience defaults.
The gateway runs on a :class:`~omniroute.clock.FakeClock` that the test moves between requests, so
cooldowns and breaker windows elapse without waiting.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.clock import FakeClock
from omniroute.config import config_from_dict
from omniroute.gateway import Gateway
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

T0 = 1_800_000_000.0


class Rig:
    """Fakes A and B, and a gateway on a fake clock built from ``config``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.fakes = {n: FakeProviderThread(name=n).start() for n in ("a", "b")}
        self.clock = FakeClock(T0)
        self.gw: GatewayThread | None = None

    def config(self, models: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
        """Providers pa → A and pb → B serving ``models[provider]`` (default one model ``m``)."""
        f = self.fakes
        models = models or {}
        return {
            "database_url": f"sqlite:///{self.tmp}/gw.db",
            "providers": [
                {
                    "id": p,
                    "base_url": f"{f[n].base_url}/v1",
                    "models": models.get(p, [{"id": "m", "context_window": 128000}]),
                }
                for p, n in (("pa", "a"), ("pb", "b"))
            ],
            "connections": [
                {"id": "a1", "provider": "pa", "api_key": "ka1"},
                {"id": "b1", "provider": "pb", "api_key": "kb1"},
            ],
            "fallback_chains": {"m": [{"provider": "pa"}, {"provider": "pb"}]},
        }

    def gateway(self, **kw: Any) -> GatewayThread:
        self.gw = GatewayThread(config_from_dict(self.config(**kw), env={}), clock=self.clock).start()
        return self.gw

    def at(self, t: float) -> None:
        """Move the gateway's clock to ``T0 + t`` seconds, on the gateway's own loop."""
        assert self.gw is not None

        async def move(_: Gateway) -> None:
            self.clock.set(T0 + t)

        self.gw.call(move)

    def close(self) -> None:
        if self.gw is not None:
            self.gw.stop()
        for f in self.fakes.values():
            f.stop()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def chat(gw: GatewayThread, **extra: Any) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], **extra}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=20)


def served_by(r: httpx.Response) -> str:
    return r.headers.get("x-omniroute-provider", "")


def resilience(gw: GatewayThread) -> dict[str, Any]:
    return httpx.get(f"{gw.url}/api/resilience", timeout=5).json()


# -- recovery (RESIL-11) ---------------------------------------------------------------------------

PROBE_INTERVAL_S = 10.0  # circuit_breaker.max_reset_timeout_s, shipped default
REQUEST_EVERY_S = 4.0


@pytest.mark.parametrize("outage_s", [60, 61, 62, 63, 301])
def test_recovered_primary_serves_again_within_15s_of_any_outage(rig: Rig, outage_s: int) -> None:
    """RESIL-11: A answers 503 for ``outage_s`` seconds, then is healthy; with a request every 4 s
    every request is served (by B during the outage), A serves again within 15 s of its recovery,
    and once its breaker opened A sees at most one probe per probe interval."""
    gw = rig.gateway()
    a = rig.fakes["a"]
    a.set_behaviour("m", "fail-503")
    hits: list[float] = []  # when a request reached A during the outage
    opened_at: float | None = None
    back_at: float | None = None
    t = 0.0
    while back_at is None and t <= outage_s + 30:
        rig.at(t)
        if t >= outage_s:
            a.set_behaviour("m", "")
        before = a.calls()
        r = chat(gw)
        assert r.status_code == 200, (t, r.text)
        if t < outage_s:
            assert served_by(r) == "pb", t
            if a.calls() > before:
                hits.append(t)
            if opened_at is None and resilience(gw)["breakers"].get("pa", {}).get("state") == "OPEN":
                opened_at = t
        elif served_by(r) == "pa":
            back_at = t
        t += REQUEST_EVERY_S
    assert back_at is not None and back_at - outage_s <= 15, (back_at, hits)
    assert opened_at is not None, "the outage opened A's breaker"
    probes = [h for h in hits if h >= opened_at]
    assert all(y - x >= PROBE_INTERVAL_S for x, y in itertools.pairwise(probes)), probes
    assert served_by(chat(gw)) == "pa"


# -- declared capabilities in pre-call checks (RESIL-8) -------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def caps_models(primary: list[str] | None, fallback: list[str] | None) -> dict[str, list[dict[str, Any]]]:
    """Model ``m`` on pa and pb, with ``capabilities`` set to the given list or left out (``None``)."""

    def entry(caps: list[str] | None) -> list[dict[str, Any]]:
        m: dict[str, Any] = {"id": "m", "context_window": 128000}
        if caps is not None:
            m["capabilities"] = caps
        return [m]

    return {"pa": entry(primary), "pb": entry(fallback)}


def test_declared_empty_capabilities_skip_the_model_for_a_tools_request(rig: Rig) -> None:
    """RESIL-8: ``capabilities: []`` means none — a request with tools skips A for B (whose
    capabilities are unknown); a request without tools still goes to A."""
    gw = rig.gateway(models=caps_models([], None))
    r = chat(gw, tools=TOOLS)
    assert r.status_code == 200 and served_by(r) == "pb"
    assert rig.fakes["a"].calls() == 0
    assert served_by(chat(gw)) == "pa"
    listed = {p["id"]: p["models"][0] for p in httpx.get(f"{gw.url}/api/providers").json()["data"]}
    assert listed["pa"]["capabilities"] == [] and listed["pb"]["capabilities"] is None


def test_missing_capabilities_are_unknown_and_never_skipped(rig: Rig) -> None:
    """RESIL-8: no ``capabilities`` key means unknown — A serves a tools request although B declares
    ``tools``."""
    gw = rig.gateway(models=caps_models(None, ["tools"]))
    r = chat(gw, tools=TOOLS)
    assert r.status_code == 200 and served_by(r) == "pa"


def test_capabilities_lacking_the_needed_one_skip_the_model(rig: Rig) -> None:
    """RESIL-8: A declaring only ``vision`` is skipped for a tools request when B declares ``tools``."""
    gw = rig.gateway(models=caps_models(["vision"], ["tools"]))
    r = chat(gw, tools=TOOLS)
    assert r.status_code == 200 and served_by(r) == "pb"


# -- reset hints in words (RESIL-13) ---------------------------------------------------------------


def test_429_resetting_in_days_cools_for_max_hint_and_shows_the_real_reset(rig: Rig) -> None:
    """RESIL-13: "Resets in 92h27m28s" in a 429 body cools A for cooldown.max_hint_s (30 min) instead
    of a 3 s backoff; GET /api/resilience names the real reset; after the 30 min A is tried again."""
    gw = rig.gateway()
    a = rig.fakes["a"]
    a.set_behaviour("m", "fail-429+msg-You_have_hit_your_usage_limit._Resets_in_92h27m28s.")
    rig.at(0)
    assert served_by(chat(gw)) == "pb"
    cooldown = resilience(gw)["cooldowns"]["a1"]
    assert cooldown["until"] == T0 + 1800
    reset = datetime.fromtimestamp(T0 + 92 * 3600 + 27 * 60 + 28, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert cooldown["reason"] == f"rate limited (429, resets {reset})"
    rig.at(1799)
    assert served_by(chat(gw)) == "pb" and a.calls() == 1
    a.set_behaviour("m", "")
    rig.at(1800)
    assert served_by(chat(gw)) == "pa"


def test_a_long_worded_reset_is_shown_apart_from_the_capped_cooldown(rig: Rig) -> None:
    """RESIL-13: a 429 saying "Try again in 3 days" cools A for cooldown.max_hint_s (30 min);
    GET /api/resilience gives that capped end as ``until`` and the upstream's real reset as its own
    field, ``reset_at`` (epoch s, ISO twin); once A answers again the reset is gone."""
    gw = rig.gateway()
    a = rig.fakes["a"]
    a.set_behaviour("m", "fail-429+msg-Usage_limit_reached._Try_again_in_3_days.")
    rig.at(0)
    assert served_by(chat(gw)) == "pb"
    cooldown = resilience(gw)["cooldowns"]["a1"]
    assert cooldown["until"] == T0 + 1800
    assert cooldown["reset_at"] == T0 + 3 * 86400
    assert cooldown["reset_at_iso"] == datetime.fromtimestamp(T0 + 3 * 86400, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    a.set_behaviour("m", "")
    rig.at(1800)
    assert served_by(chat(gw)) == "pa"
    assert "a1" not in resilience(gw)["cooldowns"]


def test_a_short_hint_has_no_separate_reset(rig: Rig) -> None:
    """RESIL-13: a hint within cooldown.max_hint_s is the cooldown itself: ``reset_at`` is null."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "fail-429+msg-Rate_limit_reached._Try_again_in_20s.")
    rig.at(0)
    assert served_by(chat(gw)) == "pb"
    cooldown = resilience(gw)["cooldowns"]["a1"]
    assert cooldown["until"] == T0 + 20 and cooldown["reset_at"] is None
