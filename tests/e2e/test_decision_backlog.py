"""PERF-5, OBS-2: auto decisions that wait behind a decision-writer backlog are held in their stored
form (the JSON bytes the writer will write), not as the engine's scoring records, and
``GET /api/routing/decisions/{id}`` shows the same decision before and after it is stored."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import httpx

from omniroute.clock import FakeClock
from omniroute.routing.auto.scoring import CandidateInputs
from omniroute.routing.decision import Decision, StoredDecision
from omniroute.testing.gateway import GatewayThread


def _auto(gt: GatewayThread) -> str:
    body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
    r = httpx.post(f"{gt.base_url}/chat/completions", json=body, timeout=20)
    assert r.status_code == 200, r.text
    return r.headers["x-request-id"]


def _decision(gt: GatewayThread, rid: str) -> dict[str, Any]:
    r = httpx.get(f"{gt.url}/api/routing/decisions/{rid}", timeout=10)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _scoring_records_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, CandidateInputs))


def test_auto_decisions_queued_behind_a_backlog_hold_no_scoring_records(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    gt = make_gateway({"auto": {"exploration_rate": 0.0}}, clock=FakeClock())
    gt.gateway.decision_compact_after = 1  # the writer (flushing every 0.25 s, clock stopped) is behind
    first = _auto(gt)
    held = gt.gateway.decisions
    assert isinstance(held[first], Decision)  # no backlog yet: serialised later, off the request path
    alive = _scoring_records_alive()
    assert alive > 0  # the first decision's candidates, scored and kept until it is written
    queued = [_auto(gt) for _ in range(5)]
    assert all(isinstance(held[rid], StoredDecision) for rid in queued)
    assert _scoring_records_alive() == alive, "a queued decision still holds its scoring records"
    assert len(gt.gateway.decision_writer or ()) == 6  # nothing dropped: all six wait for the store
    before = {rid: _decision(gt, rid) for rid in [first, *queued]}
    cand = before[queued[0]]["candidates"]
    assert len(cand) >= 2 and all("factors" in c and "score" in c for c in cand)
    full = before[first]["candidates"]  # served from the full decision: the same rows, field for field
    assert [sorted(c) for c in cand] == [sorted(c) for c in full]
    assert [sorted(c["factors"]) for c in cand] == [sorted(c["factors"]) for c in full]
    gt.advance(0.25)  # the writer flushes
    assert not any(rid in held for rid in [first, *queued]), "stored decisions stayed in memory"
    assert {rid: _decision(gt, rid) for rid in before} == before
