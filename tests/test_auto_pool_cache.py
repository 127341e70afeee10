"""The auto pool and decision rows on the request path (AUTO-2, OBS-2, PERF-3): the virtual pool is
derived once per registry snapshot and follows OAuth expiry; deferred decision rows keep their order."""

from __future__ import annotations

from auto_support import NOW, make_gw, provider
from omniroute.routing.auto.factory import virtual_pool
from omniroute.routing.decision import Decision
from omniroute.values import Connection


def test_virtual_pool_is_reused_per_snapshot_and_drops_expired_tokens() -> None:
    """AUTO-2: same snapshot, same candidates; a token that expires leaves the pool at once."""
    provs = [provider("a", "m-a", 1.0, 2.0), provider("b", "m-b", 1.0, 2.0)]
    conns = [
        Connection(id="a-k", provider="a", api_key="sk"),
        Connection(id="b-o", provider="b", auth_type="oauth", access_token="t", expires_at=NOW + 60),
    ]
    gw = make_gw(provs, conns)
    first = virtual_pool(gw.registry, NOW)
    again = virtual_pool(gw.registry, NOW + 1)
    assert [c.key for c in first] == ["a/m-a@a-k", "b/m-b@b-o"]
    assert again == first and all(x is y for x, y in zip(again, first, strict=True))
    again.clear()  # callers get their own list
    assert len(virtual_pool(gw.registry, NOW + 2)) == 2
    assert [c.key for c in virtual_pool(gw.registry, NOW + 60)] == ["a/m-a@a-k"]


def test_deferred_candidate_rows_keep_their_place() -> None:
    """OBS-2: rows built later read back in the order they were added, counted before they exist."""
    d = Decision("r", "auto")
    d.candidates.append({"n": 1})
    built: list[int] = []

    def rows() -> list[dict[str, int]]:
        built.append(1)
        return [{"n": 2}, {"n": 3}]

    d.defer_candidates(2, rows)
    assert d.candidate_count == 3 and "candidates=3" in d.header() and not built
    d.candidates.append({"n": 4})
    assert [r["n"] for r in d.to_dict()["candidates"]] == [1, 2, 3, 4]
    assert built == [1] and d.candidate_count == 4
