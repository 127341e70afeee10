"""OBS-2: a stored decision reads back exactly as the decision served from memory — auto decisions
are stored packed (column names once, one list of values per candidate) and expanded when read."""

from __future__ import annotations

import orjson

from auto_support import clock, make_gw, plan, provider, set_quota
from omniroute.routing.decision import Decision, expand_stored

HEAL_COMBO = {
    "name": "heal",
    "strategy": "auto",
    "targets": [],
    "config": {"auto": {"weights": {"quota": 1}}},
}


def _round_trip(d: Decision) -> dict[str, object]:
    stored: dict[str, object] = orjson.loads(orjson.dumps(d.to_stored()))
    return expand_stored(stored)


async def test_auto_decision_is_stored_packed_and_reads_back_the_same() -> None:
    gw = make_gw([provider(p, f"m-{p}", 1.0 + i, 2.0) for i, p in enumerate("abcde")])
    _, _, d = await plan(gw)
    stored = d.to_stored()
    assert stored["candidates"] == [] and len(stored["candidates_packed"]["rows"]) == 5
    assert len(orjson.dumps(stored)) < len(orjson.dumps(d.to_dict()))
    assert _round_trip(d) == orjson.loads(orjson.dumps(d.to_dict()))
    assert set(d.to_dict()["candidates"][0]["factors"]) == set(_round_trip(d)["candidates"][0]["factors"])  # type: ignore[index]


async def test_excluded_and_probe_rows_keep_their_role_and_reason() -> None:
    gw = make_gw([provider("good", "g", 1, 1), provider("bad", "b", 1, 1)], combos=[HEAL_COMBO])
    await set_quota(gw, "bad-k", 0.1)
    _, _, d = await plan(gw, "heal")
    back = _round_trip(d)
    bad = next(r for r in back["candidates"] if r["provider"] == "bad")  # type: ignore[attr-defined]
    assert bad["role"] == "excluded" and "below threshold" in bad["excluded"]
    good = next(r for r in back["candidates"] if r["provider"] == "good")  # type: ignore[attr-defined]
    assert "excluded" not in good
    assert back == orjson.loads(orjson.dumps(d.to_dict()))
    clock(gw).advance(310)
    _, _, d = await plan(gw, "heal", request_id="r3")  # the excluded candidate is probed first
    back = _round_trip(d)
    served = orjson.loads(orjson.dumps(d.to_dict()))
    assert "probe" in [r["role"] for r in served["candidates"]]
    assert back == orjson.loads(orjson.dumps(d.to_dict()))


def test_a_decision_without_packed_rows_is_stored_as_served() -> None:
    d = Decision("r", "a/m")
    d.candidates.append({"provider": "a", "model": "m", "connection": "c"})
    assert d.to_stored() == d.to_dict()
    assert expand_stored(orjson.loads(orjson.dumps(d.to_stored()))) == orjson.loads(orjson.dumps(d.to_dict()))


async def test_a_compacted_decision_spools_to_the_same_row_as_the_whole_one() -> None:
    """A decision queued in its stored form (behind a store backlog) is written to the on-disk spool
    like the whole decision when the database refuses it: same request id, time and JSON."""
    from omniroute.observe.accounting import encode_decisions
    from omniroute.routing.decision import StoredDecision

    gw = make_gw([provider(p, f"m-{p}", 1.0 + i, 2.0) for i, p in enumerate("abc")])
    _, _, d = await plan(gw)
    whole, compact = encode_decisions([d, StoredDecision.of(d)])
    assert compact == whole
    assert orjson.loads(compact["data"]) == orjson.loads(orjson.dumps(d.to_stored()))
