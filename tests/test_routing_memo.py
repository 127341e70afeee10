"""Per-snapshot memos of the request path (SPEC §4, COMBO-1, PERF-2): a model string resolves and
expands once per registry snapshot, the decision still gets its rows and exclusions every time, and
a new snapshot (management edit) resolves afresh."""

from __future__ import annotations

from auto_support import make_gw, provider
from omniroute.routing.decision import Decision
from omniroute.routing.registry import Registry
from omniroute.routing.resolve import resolve
from omniroute.values import ChatRequest, Connection


async def test_plans_and_expansions_are_memoised_per_snapshot() -> None:
    """SPEC §4: same snapshot, same plan object; rows and exclusions land in every decision."""
    provs = [provider("a", "m-a", 1.0, 2.0)]
    conns = [
        Connection(id="a-1", provider="a", api_key="sk"),
        Connection(id="a-2", provider="a", is_active=False),
    ]
    gw = make_gw(provs, conns)
    plan = resolve(gw.registry, "a/m-a")
    assert resolve(gw.registry, "a/m-a") is plan
    req = ChatRequest(body={"messages": []}, model="a/m-a")
    rows = []
    for _ in range(2):
        decision = Decision(request_id="r", requested_model="a/m-a")
        cands, _ = await gw.planner.candidates(plan, req, decision)
        assert [c.key for c in cands] == ["a/m-a@a-1"]
        assert [e.reason for e in decision.exclusions] == ["connection inactive"]
        rows.append(decision.candidates)
    assert rows[0] == rows[1] == [{"provider": "a", "model": "m-a", "connection": "a-1"}]
    gw.registry = Registry.build(gw.catalog, [Connection(id="a-3", provider="a", api_key="sk")])
    fresh = resolve(gw.registry, "a/m-a")
    assert fresh is not plan
    cands, _ = await gw.planner.candidates(fresh, req, Decision(request_id="r", requested_model="a/m-a"))
    assert [c.key for c in cands] == ["a/m-a@a-3"]
