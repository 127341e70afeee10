"""Self-healing, probes, incident mode, seeded bandit exploration (AUTO-8) and LKGP stickiness per
conversation (AUTO-5a), in process on a fake clock."""

from __future__ import annotations

from auto_support import clock, make_gw, plan, provider, set_breaker, set_quota
from omniroute.errors import AttemptRecord
from omniroute.routing.auto.healing import cooldown_for

HEAL_COMBO = {
    "name": "heal",
    "strategy": "auto",
    "targets": [],
    "config": {"auto": {"weights": {"quota": 1}}},
}


def _heal_gw():  # type: ignore[no-untyped-def]
    return make_gw([provider("good", "g", 1, 1), provider("bad", "b", 1, 1)], combos=[HEAL_COMBO])


def test_cooldown_doubles_from_five_to_thirty_minutes() -> None:
    """AUTO-8: 5 min, doubling per repeat, max 30 min."""
    assert [cooldown_for(n) for n in (1, 2, 3, 4, 9)] == [300, 600, 1200, 1800, 1800]


async def test_low_score_is_excluded_then_readmitted_by_one_probe() -> None:
    """AUTO-8: score < .2 → excluded "below threshold" for 5 min; after the cooldown exactly one request
    probes it first with a reduced timeout; the probe's success re-admits it."""
    gw = _heal_gw()
    await set_quota(gw, "bad-k", 0.1)  # score = quota = 0.1 under the combo's weights
    cands, _, d = await plan(gw, "heal")
    assert [c.provider.id for c in cands] == ["good"]
    reason = next(e.reason for e in d.exclusions if e.provider == "bad")
    assert "below threshold" in reason and "0.100" in reason
    assert next(r for r in d.candidates if r["provider"] == "bad")["role"] == "excluded"

    clock(gw).advance(60)
    cands, _, d = await plan(gw, "heal", request_id="r2")
    assert [c.provider.id for c in cands] == ["good"]
    assert any("below threshold" in e.reason and "excluded until" in e.reason for e in d.exclusions)

    clock(gw).advance(250)  # 310 s after the exclusion
    probe_cands, opts, d = await plan(gw, "heal", request_id="r3")
    assert [c.provider.id for c in probe_cands] == ["bad", "good"]
    assert probe_cands[0].timeout_s == 15.0 and d.extra["auto"]["probe"] == "bad/b@bad-k"
    other, _, d2 = await plan(gw, "heal", request_id="r4")  # a concurrent request does not probe too
    assert [c.provider.id for c in other] == ["good"]
    assert any("probe in flight" in e.reason for e in d2.exclusions)

    await set_quota(gw, "bad-k", 1.0)  # it recovered
    assert opts.on_success is not None
    await opts.on_success(probe_cands[0])
    cands, _, _ = await plan(gw, "heal", request_id="r5")
    assert {c.provider.id for c in cands} == {"good", "bad"}


async def test_failed_probe_excludes_again_for_twice_as_long() -> None:
    """AUTO-8: a probe that failed (another candidate served) doubles the exclusion."""
    gw = _heal_gw()
    await set_quota(gw, "bad-k", 0.1)
    await plan(gw, "heal")
    clock(gw).advance(301)
    cands, opts, d = await plan(gw, "heal", request_id="p")
    assert cands[0].provider.id == "bad"
    d.attempts.append(AttemptRecord("bad", "b", "bad-k", 503, "down", 5.0))
    assert opts.on_success is not None
    await opts.on_success(cands[1])
    clock(gw).advance(301)
    cands, _, _ = await plan(gw, "heal", request_id="q")
    assert [c.provider.id for c in cands] == ["good"]  # 600 s now, not 300
    clock(gw).advance(300)
    cands, _, _ = await plan(gw, "heal", request_id="r")
    assert cands[0].provider.id == "bad"  # probe again


async def test_incident_mode_turns_exploration_off_and_uses_reliability_first() -> None:
    """AUTO-8: > 50 % of the pool OPEN → incident mode: reliability-first weights, no exploration."""
    gw = make_gw([provider(p, "m", 1, 1) for p in ("a", "b", "c")], exploration=1.0)
    await set_breaker(gw, "a", "OPEN")
    await set_breaker(gw, "b", "OPEN")
    for i in range(20):
        cands, _, d = await plan(gw, request_id=f"i{i}")
        assert d.extra["incident_mode"] is True and d.extra["exploration"] is False
        assert d.extra["auto"]["weights"] == "reliability-first (incident mode)"
        assert cands[0].provider.id == "c"


async def test_exploration_rate_over_2000_seeded_requests() -> None:
    """AUTO-8: exploration .05 on a 4-candidate pool with a clear winner → 3–7 % of 2,000 picks are
    exploration, each flagged in the decision; the request's seed makes it reproducible."""
    gw = make_gw(
        [provider("win", "w", 0.1, 0.1)] + [provider(p, "m", 5, 5) for p in ("x", "y", "z")], exploration=0.05
    )
    explored = 0
    for i in range(2000):
        cands, _, d = await plan(gw, request_id=f"req-{i}")
        if d.extra["exploration"]:
            explored += 1
            assert cands[0].provider.id != "win" and "exploration=1" in d.header()
            assert d.reason.startswith("exploration:")
        else:
            assert cands[0].provider.id == "win"
    assert 60 <= explored <= 140, explored
    a, _, _ = await plan(gw, request_id="same", headers={"X-OmniRoute-Seed": "42"})
    b, _, _ = await plan(gw, request_id="other", headers={"X-OmniRoute-Seed": "42"})
    assert a == b


async def test_smart_explores_more_and_exploration_zero_never_explores() -> None:
    gw = make_gw([provider("win", "w", 0.1, 0.1), provider("x", "m", 5, 5)], exploration=0.0)
    runs = [await plan(gw, request_id=f"n{i}") for i in range(300)]
    assert not any(d.extra["exploration"] for _, _, d in runs)
    smart = [await plan(gw, "auto/smart", request_id=f"s{i}") for i in range(1000)]
    assert 60 <= sum(1 for _, _, d in smart if d.extra["exploration"]) <= 140


async def test_lkgp_keeps_each_conversation_on_its_own_provider() -> None:
    """AUTO-5a: two conversations (different first user messages) on ``auto`` each stay on the
    provider that served them, across 5 turns; the record is written on success."""
    gw = make_gw([provider("cheap", "c", 0.1, 0.1), provider("dear", "d", 5, 5)])
    convs = {"one": "Tell me about cats", "two": "Tell me about dogs"}
    served = {}
    for name, first in convs.items():
        cands, opts, d = await plan(gw, text=first, request_id=f"{name}-0")
        assert d.strategy == "rules"
        served[name] = cands[0] if name == "one" else cands[1]  # conversation two fell through
        assert opts.on_success is not None
        await opts.on_success(served[name])
    for turn in range(1, 6):
        for name, first in convs.items():
            msgs = [{"role": "user", "content": first}]
            for t in range(turn):
                msgs += [{"role": "assistant", "content": f"a{t}"}, {"role": "user", "content": f"q{t}"}]
            cands, opts, d = await plan(gw, body={"messages": msgs}, request_id=f"{name}-{turn}")
            assert cands[0].key == served[name].key, (name, turn)
            assert d.strategy == "lkgp" and d.final_score == 1.0
            assert d.reason == f"LKGP: using last known good provider {served[name].provider.id}"
            assert opts.on_success is not None
            await opts.on_success(cands[0])
    assert served["one"].provider.id != served["two"].provider.id


async def test_lkgp_falls_back_to_rules_when_its_provider_is_open() -> None:
    gw = make_gw([provider("cheap", "c", 0.1, 0.1), provider("dear", "d", 5, 5), provider("mid", "m", 1, 1)])
    cands, opts, _ = await plan(gw, session="s")
    assert opts.on_success is not None
    await opts.on_success(cands[2])
    sticky, _, d = await plan(gw, session="s", request_id="2")
    assert d.strategy == "lkgp" and sticky[0].provider.id == cands[2].provider.id
    await set_breaker(gw, cands[2].provider.id, "OPEN")
    again, _, d = await plan(gw, session="s", request_id="3")
    assert d.strategy == "rules" and again[0].provider.id == "cheap"
