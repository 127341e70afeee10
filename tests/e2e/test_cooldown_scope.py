"""What a failure holds back (RESIL-2): a rate limit cools one model of a connection, an outage or
dead credentials the whole connection — over HTTP against fake providers, on a fake clock.

Provider ``pa`` (fake A, one connection ``a1``) serves models ``m`` and ``m2``; ``pb`` (fake B,
``b1``) serves ``m``; ``m`` falls back ``pa → pb``; combo ``c`` tries ``pa/m`` then ``pa/m2``, two
models of the same connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.clock import FakeClock
from omniroute.config import config_from_dict
from omniroute.resilience.classify import RATE_LIMIT_SCOPE
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

T0 = 1_800_000_000.0


class Rig:
    def __init__(self, tmp: Path) -> None:
        self.a = FakeProviderThread(name="a").start()
        self.b = FakeProviderThread(name="b").start()
        self.clock = FakeClock(T0)
        config = {
            "database_url": f"sqlite:///{tmp}/gw.db",
            "providers": [
                {"id": "pa", "base_url": f"{self.a.base_url}/v1", "models": [{"id": "m"}, {"id": "m2"}]},
                {"id": "pb", "base_url": f"{self.b.base_url}/v1", "models": [{"id": "m"}]},
            ],
            "connections": [
                {"id": "a1", "provider": "pa", "api_key": "ka1"},
                {"id": "b1", "provider": "pb", "api_key": "kb1"},
            ],
            "fallback_chains": {"m": [{"provider": "pa"}, {"provider": "pb"}]},
            "combos": [
                {"name": "c", "strategy": "priority", "targets": [{"model": "pa/m"}, {"model": "pa/m2"}]}
            ],
        }
        self.gw = GatewayThread(config_from_dict(config, env={}), clock=self.clock).start()

    def chat(self, model: str) -> httpx.Response:
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        return httpx.post(f"{self.gw.base_url}/chat/completions", json=body, timeout=20)

    def cooldowns(self) -> dict[str, Any]:
        out: dict[str, Any] = httpx.get(f"{self.gw.url}/api/resilience", timeout=5).json()["cooldowns"]
        return out

    def close(self) -> None:
        self.gw.stop()
        self.a.stop()
        self.b.stop()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def served(r: httpx.Response) -> str:
    return f"{r.headers.get('x-omniroute-provider')}/{r.headers.get('x-omniroute-model')}"


def test_a_rate_limit_on_one_model_leaves_the_other_models_of_the_connection_in_use(rig: Rig) -> None:
    """A 429 (Retry-After 30 s) on ``m`` cools only (a1, m): ``m`` is served by pb meanwhile and A is
    not asked for it again, while ``pa/m2`` on the same connection is served by A at once; the
    cooldown in ``GET /api/resilience`` names its model."""
    rig.a.set_behaviour("m", "fail-429-retry-30")
    assert served(rig.chat("m")) == "pb/m"
    cooldown = rig.cooldowns()["a1"]
    assert cooldown["model"] == "m" and cooldown["until"] == T0 + 30
    r = rig.chat("pa/m2")
    assert r.status_code == 200 and served(r) == "pa/m2"
    assert served(rig.chat("m")) == "pb/m"
    assert rig.a.calls("m") == 1 and rig.a.calls("m2") == 1
    assert rig.cooldowns()["a1"]["model"] == "m"  # m2's success did not clear m's cooldown


def test_a_combo_falls_back_to_another_model_of_the_rate_limited_connection(rig: Rig) -> None:
    """Combo ``c`` = [pa/m, pa/m2]: a 429 on pa/m falls back to pa/m2 on the same connection, which
    serves; the next request skips the cooling pa/m and goes straight to pa/m2."""
    rig.a.set_behaviour("m", "fail-429-retry-30")
    r = rig.chat("c")
    assert r.status_code == 200 and served(r) == "pa/m2"
    r = rig.chat("c")
    assert r.status_code == 200 and served(r) == "pa/m2"
    assert rig.a.calls("m") == 1 and rig.a.calls("m2") == 2


def test_an_overloaded_upstream_cools_the_whole_connection(rig: Rig) -> None:
    """A 529 (overloaded) is about the upstream, not one model's budget: the whole connection a1
    cools, so ``pa/m2`` is not attempted either while it lasts."""
    rig.a.set_behaviour("m", "fail-529")
    assert served(rig.chat("m")) == "pb/m"
    assert rig.cooldowns()["a1"]["model"] is None
    r = rig.chat("pa/m2")
    assert r.status_code in (429, 503) and rig.a.calls("m2") == 0


def test_invalid_credentials_disable_the_whole_connection(rig: Rig) -> None:
    """A 401 on ``m`` marks a1 invalid: ``pa/m2`` is refused without calling A."""
    rig.a.set_behaviour("m", "fail-401")
    assert served(rig.chat("m")) == "pb/m"
    r = rig.chat("pa/m2")
    assert r.status_code == 503 and rig.a.calls("m2") == 0


@pytest.mark.parametrize(
    "fault",
    [
        "fail-402",
        "fail-400+msg-Your_credit_balance_is_too_low",
        "fail-403+msg-You_exceeded_your_current_quota,_check_your_plan_and_billing_details.",
    ],
)
def test_an_exhausted_account_locks_every_model_of_the_connection(rig: Rig, fault: str) -> None:
    """Billing or credit exhaustion is the account's: after it on ``m``, ``pa/m2`` on the same
    connection is refused without calling A; the lock shows model ``*`` beside ``m``'s own."""
    rig.a.set_behaviour("m", fault)
    assert served(rig.chat("m")) == "pb/m"
    r = rig.chat("pa/m2")
    assert r.status_code in (402, 503) and rig.a.calls("m2") == 0
    locks = httpx.get(f"{rig.gw.url}/api/resilience", timeout=5).json()["lockouts"]
    assert {(lk["connection"], lk["model"]) for lk in locks} == {("a1", "m"), ("a1", "*")}


def test_a_quota_of_one_model_leaves_the_other_models_in_use(rig: Rig) -> None:
    """A daily quota of ``m``, or a 403 about access to ``m``, locks only ``m`` on a1."""
    for fault in (
        "fail-429+msg-Quota_exceeded_for_requests_per_day",
        "fail-403+msg-You_do_not_have_access_to_the_model",
    ):
        rig.a.set_behaviour("m", fault)
        assert served(rig.chat("m")) == "pb/m"
        r = rig.chat("pa/m2")
        assert r.status_code == 200 and served(r) == "pa/m2"
        httpx.post(f"{rig.gw.url}/api/resilience/reset", timeout=5)


def test_the_scope_table_cites_its_source_for_every_format() -> None:
    """Each per-model rate-limit rule names the provider document it comes from."""
    assert set(RATE_LIMIT_SCOPE) == {"openai", "anthropic", "gemini"}
    for scope, source in RATE_LIMIT_SCOPE.values():
        assert scope == "model" and source.startswith("https://")
