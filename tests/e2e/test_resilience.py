"""The four-tier ladder through the HTTP API against fake providers (RESIL-1 … RESIL-9).

A rig of fresh fake providers per test: ``pa`` (connections a1 → fake A and a2 → fake A2), ``pb``
(fake B), ``pc`` (fake C, small context), ``pd`` (fake D); model ``m`` is served by all of them and
routed through the fallback chain ``m: [pa, pb]`` unless a test says otherwise. Faults are set per fake
with ``set_behaviour("m", "<fault grammar>")``.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from omniroute.clock import FakeClock
from omniroute.config import config_from_dict
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

STREAM = [False, True]


class Rig:
    """Fresh fakes plus a gateway factory for one test."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.fakes = {n: FakeProviderThread(name=n).start() for n in ("a", "a2", "b", "c", "d")}
        self.gateways: list[GatewayThread] = []

    def config(
        self,
        chain: tuple[str, ...] = ("pa", "pb"),
        resilience: dict[str, Any] | None = None,
        a2: bool = False,
    ) -> dict[str, Any]:
        f = self.fakes
        windows = {"pa": 8000, "pb": 128000, "pc": 4000, "pd": 32000}
        conns = [
            {"id": "a1", "provider": "pa", "api_key": "ka1", "priority": 1},
            {"id": "b1", "provider": "pb", "api_key": "kb1"},
            {"id": "c1", "provider": "pc", "api_key": "kc1"},
            {"id": "d1", "provider": "pd", "api_key": "kd1"},
        ]
        if a2:
            conns.append(
                {
                    "id": "a2",
                    "provider": "pa",
                    "api_key": "ka2",
                    "priority": 2,
                    "base_url": f"{f['a2'].base_url}/v1",
                }
            )
        res = {
            "timeouts": {"connect_s": 5, "ttft_s": 10, "idle_s": 5, "total_s": 30},
            "cooldown": {"base_s": 3, "max_s": 300},
        }
        for k, v in (resilience or {}).items():
            res[k] = {**res.get(k, {}), **v} if isinstance(v, dict) else v
        return {
            "database_url": f"sqlite:///{self.tmp}/gw.db",
            "providers": [
                {
                    "id": p,
                    "base_url": f"{f[n].base_url}/v1",
                    "models": [
                        {
                            "id": "m",
                            "context_window": windows[p],
                            "max_output_tokens": 1000,
                            "input_price": 1.0,
                            "output_price": 1.0,
                        },
                        {"id": "m2", "context_window": windows[p], "max_output_tokens": 1000},
                    ],
                }
                for p, n in (("pa", "a"), ("pb", "b"), ("pc", "c"), ("pd", "d"))
            ],
            "connections": conns,
            "fallback_chains": {"m": [{"provider": p} for p in chain]},
            "resilience": res,
        }

    def gateway(self, clock: FakeClock | None = None, **kw: Any) -> GatewayThread:
        gt = GatewayThread(config_from_dict(self.config(**kw), env={}), clock=clock).start()
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


def chat(
    gw: GatewayThread,
    model: str = "m",
    stream: bool = False,
    content: str = "hello there",
    timeout: float = 20,
    **extra: Any,
) -> httpx.Response:
    """POST a chat request; for streams the whole SSE body is read."""
    body = {"model": model, "messages": [{"role": "user", "content": content}], "stream": stream, **extra}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=timeout)


def sse_events(r: httpx.Response) -> list[dict[str, Any] | str]:
    out: list[dict[str, Any] | str] = []
    for line in r.text.splitlines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def stream_text(r: httpx.Response) -> str:
    return "".join(
        e["choices"][0]["delta"].get("content") or ""
        for e in sse_events(r)
        if isinstance(e, dict) and e.get("choices")
    )


def served_by(r: httpx.Response) -> str:
    return r.headers.get("x-omniroute-provider", "")


def state(gw: GatewayThread) -> dict[str, Any]:
    return httpx.get(f"{gw.url}/api/resilience", timeout=5).json()


@pytest.mark.parametrize("stream", STREAM)
def test_429_with_retry_after_falls_back_and_cools_connection(rig: Rig, stream: bool) -> None:
    """RESIL-2: A 429 Retry-After 5 (longer than the in-request wait) → B answers at once; A's
    connection is skipped ≥ 5 s, then used again."""
    clock = FakeClock()
    gw = rig.gateway(clock)
    rig.fakes["a"].set_behaviour("m", "fail-429-retry-5")
    r = chat(gw, stream=stream)
    assert r.status_code == 200 and served_by(r) == "pb"
    assert rig.fakes["a"].calls() == 1
    cd = state(gw)["cooldowns"]["a1"]
    assert cd["until"] - clock.time() > 4.5
    assert served_by(chat(gw, stream=stream)) == "pb"
    assert rig.fakes["a"].calls() == 1, "A must be skipped while cooling down"
    rig.fakes["a"].set_behaviour("m", "")
    gw.advance(5.1)
    r = chat(gw, stream=stream)
    assert served_by(r) == "pa" and rig.fakes["a"].calls() == 2


def advance_once_waiting(gw: GatewayThread, clock: FakeClock, seconds: float) -> None:
    """Once one more task than the gateway's idle ones sleeps on ``clock`` (a request waiting out a
    hint), move the clock by ``seconds``."""

    async def step(_gw: Any) -> None:
        await clock.wait_for_sleepers(rest + 1)
        clock.advance(seconds)

    async def idle(_gw: Any) -> int:
        return clock.sleepers

    rest = gw.call(idle)
    gw.call(step)


@pytest.mark.parametrize("stream", STREAM)
def test_short_rate_limit_hint_on_the_preferred_target_is_waited_out(rig: Rig, stream: bool) -> None:
    """RESIL-6: A (first of two targets) answers 429 Retry-After 2, within max_hint_wait_s → the
    gateway waits 2 s on its clock and A serves; B is never called."""
    clock = FakeClock()
    gw = rig.gateway(clock)
    rig.fakes["a"].set_behaviour("m", "fail-429-times-1+retry-2")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        fut = pool.submit(chat, gw, stream=stream)
        t0 = clock.monotonic()
        advance_once_waiting(gw, clock, 2)
        r = fut.result()
    assert r.status_code == 200 and served_by(r) == "pa"
    assert rig.fakes["a"].calls() == 2 and rig.fakes["b"].calls() == 0
    assert clock.monotonic() - t0 == 2


@pytest.mark.parametrize(
    ("resilience", "why"),
    [
        ({"retries": {"max_hint_wait_s": 1}}, "the hint is longer than max_hint_wait_s"),
        ({"timeouts": {"total_s": 2.5}}, "waiting would not leave a second of the deadline"),
    ],
)
def test_a_hint_that_does_not_fit_fails_over_at_once(rig: Rig, resilience: dict[str, Any], why: str) -> None:
    """RESIL-6: a 429 Retry-After 2 that is over the cap or the deadline fails over without waiting."""
    clock = FakeClock()
    gw = rig.gateway(clock, resilience=resilience)
    rig.fakes["a"].set_behaviour("m", "fail-429-retry-2")
    t0 = clock.monotonic()
    r = chat(gw)
    assert served_by(r) == "pb" and rig.fakes["a"].calls() == 1, why
    assert clock.monotonic() == t0


def test_breaker_opens_after_five_503_and_probes_once(rig: Rig) -> None:
    """RESIL-1: five counted failures open A's breaker; traffic skips A; after the reset timeout
    exactly one probe reaches A; success closes it."""
    gw = rig.gateway(
        FakeClock(),
        resilience={
            "circuit_breaker": {"failure_threshold": 5, "reset_timeout_s": 3},
            "cooldown": {"base_s": 0.01, "max_s": 0.02},
        },
    )
    rig.fakes["a"].set_behaviour("m", "fail-503")
    for _ in range(5):
        assert served_by(chat(gw)) == "pb"
        gw.advance(0.05)
    assert rig.fakes["a"].calls() == 5
    assert state(gw)["breakers"]["pa"]["state"] == "OPEN"
    for _ in range(3):
        assert served_by(chat(gw)) == "pb"
    assert rig.fakes["a"].calls() == 5, "an OPEN breaker keeps every request away from A"
    rig.fakes["a"].set_behaviour("m", "latency-600")  # recovered but slow: the probe is in flight a while
    gw.advance(3.1)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: chat(gw), range(8)))
    assert all(r.status_code == 200 for r in results)
    assert rig.fakes["a"].calls() == 6, "exactly one probe reaches A in HALF_OPEN"
    assert sorted(served_by(r) for r in results) == ["pa"] + ["pb"] * 7
    assert "pa" not in state(gw)["breakers"] or state(gw)["breakers"]["pa"]["state"] == "CLOSED"
    assert served_by(chat(gw)) == "pa"


def test_failed_probe_reopens_with_doubled_timeout(rig: Rig) -> None:
    """RESIL-1: a failing probe re-opens the breaker with the reset timeout doubled."""
    gw = rig.gateway(
        FakeClock(),
        resilience={
            "circuit_breaker": {"failure_threshold": 2, "reset_timeout_s": 3},
            "cooldown": {"base_s": 0.01, "max_s": 0.02},
            "retries": {"per_target": 0},
        },
    )
    rig.fakes["a"].set_behaviour("m", "fail-500")
    for _ in range(2):
        assert served_by(chat(gw)) == "pb"
    b = state(gw)["breakers"]["pa"]
    assert b["state"] == "OPEN" and b["reset_timeout_s"] == 3
    gw.advance(3.1)
    calls = rig.fakes["a"].calls()
    assert served_by(chat(gw)) == "pb"
    assert rig.fakes["a"].calls() == calls + 1
    b = state(gw)["breakers"]["pa"]
    assert b["state"] == "OPEN" and b["reset_timeout_s"] == 6


def test_second_connection_serves_when_first_is_rate_limited(rig: Rig) -> None:
    """RESIL-2: connection a1 429 → a2 of the same provider serves; the provider breaker is untouched."""
    gw = rig.gateway(a2=True)
    rig.fakes["a"].set_behaviour("m", "fail-429")
    r = chat(gw)
    assert r.status_code == 200
    assert served_by(r) == "pa" and r.headers["x-omniroute-connection"] == "a2"
    assert "pa" not in state(gw)["breakers"]


def test_model_not_found_locks_that_model_on_that_connection_only(rig: Rig) -> None:
    """RESIL-3: 404 for m on a1 locks (pa, a1, m); m2 on a1 still serves."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "fail-404")
    r = chat(gw, model="pa/m")
    assert r.status_code == 404
    locks = state(gw)["lockouts"]
    assert [(x["provider"], x["connection"], x["model"]) for x in locks] == [("pa", "a1", "m")]
    assert chat(gw, model="pa/m2").status_code == 200
    calls = rig.fakes["a"].calls()
    r = chat(gw, model="pa/m")
    assert r.status_code == 503 and r.json()["error"]["code"] == "all_candidates_unavailable"
    assert rig.fakes["a"].calls() == calls, "a locked model is not attempted"


@pytest.mark.parametrize("stream", STREAM)
def test_ordinary_400_is_returned_as_is_without_fallback(rig: Rig, stream: bool) -> None:
    """RESIL-5: an ordinary validation 400 goes back to the client; B is never called."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "fail-400+msg-invalid_value_for_temperature")
    r = chat(gw, stream=stream)
    assert r.status_code == 400
    assert "temperature" in r.json()["error"]["message"]
    assert rig.fakes["b"].calls() == 0


@pytest.mark.parametrize("stream", STREAM)
def test_context_overflow_falls_back_only_to_larger_windows(rig: Rig, stream: bool) -> None:
    """RESIL-5/RESIL-8: A overflows; C (smaller window) is skipped; B (larger) serves."""
    gw = rig.gateway(chain=("pa", "pc", "pb"))
    rig.fakes["a"].set_behaviour("m", "ctx-3")
    r = chat(gw, stream=stream, content="one two three four five six")
    assert r.status_code == 200 and served_by(r) == "pb"
    assert rig.fakes["c"].calls() == 0


def test_credit_balance_text_is_quota_lockout(rig: Rig) -> None:
    """RESIL-3/RESIL-5: 400 'credit balance is too low' → quota: A locked out, B serves."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "fail-400+msg-Your_credit_balance_is_too_low")
    r = chat(gw)
    assert r.status_code == 200 and served_by(r) == "pb"
    assert any(x["provider"] == "pa" and x["model"] == "m" for x in state(gw)["lockouts"])


def test_401_marks_connection_invalid_visible_to_operator(rig: Rig) -> None:
    """RESIL-2: 401 → a1 invalid (reason shown in /api/resilience); the next target serves."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "fail-401")
    r = chat(gw)
    assert r.status_code == 200 and served_by(r) == "pb"
    inv = state(gw)["invalid"]["a1"]
    assert "401" in inv["reason"]
    chat(gw)
    assert rig.fakes["a"].calls() == 1


@pytest.mark.parametrize("stream", STREAM)
def test_no_headers_hits_ttft_timeout_then_fallback(rig: Rig, stream: bool) -> None:
    """RESIL-6: A accepts but never answers → after the TTFT timeout (1 s) B serves, not a hang."""
    gw = rig.gateway(resilience={"timeouts": {"ttft_s": 1}})
    rig.fakes["a"].set_behaviour("m", "stall")
    t0 = time.monotonic()
    r = chat(gw, stream=stream)
    took = time.monotonic() - t0
    assert r.status_code == 200 and served_by(r) == "pb"
    assert 0.9 < took < 2.5


def test_stream_error_event_before_content_falls_back_invisibly(rig: Rig) -> None:
    """RESIL-9: 200 then an error event before any content → B's stream, one clean stream."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "error-event")
    r = chat(gw, stream=True)
    assert r.status_code == 200 and served_by(r) == "pb"
    events = sse_events(r)
    assert events[-1] == "[DONE]"
    assert not any(isinstance(e, dict) and "error" in e for e in events)
    assert stream_text(r) == "Hello from b (m)."


def test_stream_cut_after_commit_ends_with_error_not_stop(rig: Rig) -> None:
    """RESIL-9: 3 chunks then a cut, with stream rescue off → error event and non-stop finish; usage
    row records the failure."""
    gw = rig.gateway(resilience={"stream_rescue": False})
    rig.fakes["a"].set_behaviour("m", "chunks-8+cut-after-3")
    t0 = time.monotonic()
    r = chat(gw, stream=True)
    assert time.monotonic() - t0 < 2
    events = sse_events(r)
    assert "[DONE]" not in events
    finishes = [
        e["choices"][0]["finish_reason"]
        for e in events
        if isinstance(e, dict) and e.get("choices") and e["choices"][0].get("finish_reason")
    ]
    assert finishes and "stop" not in finishes
    assert isinstance(events[-1], dict) and "error" in events[-1]
    with pytest.raises(openai.APIError):
        c = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)
        for _ in c.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        ):
            pass
    rows = usage_rows(gw)
    assert rows[0]["status"] == 502 and rows[0]["provider"] == "pa" and rows[0]["error"]


def test_stream_malformed_event_mid_stream_is_skipped_and_counted(rig: Rig) -> None:
    """RESIL-9: A's 10th event is invalid JSON → it is skipped, never passed on; the stream goes on
    to an ordinary finish and [DONE]; the decision and the metrics count the skipped event."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "chunks-12+malformed-at-10")
    r = chat(gw, stream=True)
    assert "{not json" not in r.text
    events = sse_events(r)
    assert events[-1] == "[DONE]"
    assert not any(isinstance(e, dict) and "error" in e for e in events)
    finishes = [
        c["finish_reason"]
        for e in events
        if isinstance(e, dict)
        for c in e.get("choices", [])
        if c["finish_reason"]
    ]
    assert finishes == ["stop"]
    d = httpx.get(f"{gw.url}/api/routing/decisions/{r.headers['x-request-id']}", timeout=5).json()
    assert d["malformed_events_skipped"] == 1 and d["attempts"][-1]["status"] == 200
    metrics = httpx.get(f"{gw.url}/metrics", timeout=5).text
    assert 'omniroute_malformed_stream_events_total{provider="pa"} 1.0' in metrics
    rig.fakes["a"].set_behaviour("m", "")
    assert stream_text(chat(gw, stream=True)) == "Hello from a (m)."


def test_stream_malformed_first_event_falls_back_invisibly(rig: Rig) -> None:
    """RESIL-9: a malformed event before any content is sent falls back to B, as any broken start."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "malformed-at-1")
    r = chat(gw, stream=True)
    assert served_by(r) == "pb" and stream_text(r) == "Hello from b (m)."


def test_non_streaming_body_stall_falls_back_after_the_idle_timeout(rig: Rig) -> None:
    """RESIL-6: A sends its headers and half the body, then stalls → after idle_s (1 s), not
    total_s (30 s), B answers."""
    gw = rig.gateway(resilience={"timeouts": {"idle_s": 1}})
    rig.fakes["a"].set_behaviour("m", "stall-after-1")
    t0 = time.monotonic()
    r = chat(gw)
    assert time.monotonic() - t0 < 5
    assert r.status_code == 200 and served_by(r) == "pb"
    assert r.json()["choices"][0]["message"]["content"] == "Hello from b (m)."


def test_stream_without_done_is_finalised_at_once(rig: Rig) -> None:
    """RESIL-9: a stream that ends at the HTTP level without [DONE] is finalised immediately."""
    gw = rig.gateway(resilience={"timeouts": {"idle_s": 5}})
    rig.fakes["a"].set_behaviour("m", "no-done")
    t0 = time.monotonic()
    r = chat(gw, stream=True, stream_options={"include_usage": True})
    assert time.monotonic() - t0 < 1.5
    events = sse_events(r)
    assert events[-1] == "[DONE]"
    assert isinstance(events[-2], dict) and events[-2]["choices"] == [] and events[-2]["usage"]


def test_stream_stall_after_first_chunk_errors_within_idle_timeout(rig: Rig) -> None:
    """RESIL-9: A stalls after the first content chunk, with stream rescue off → error event within
    the idle timeout."""
    gw = rig.gateway(resilience={"timeouts": {"idle_s": 1}, "stream_rescue": False})
    rig.fakes["a"].set_behaviour("m", "stall-after-1")
    t0 = time.monotonic()
    r = chat(gw, stream=True)
    assert time.monotonic() - t0 < 2.5
    events = sse_events(r)
    assert isinstance(events[-1], dict) and "error" in events[-1]


def test_outage_then_recovery_breaker_closes_and_body_names_served_model(rig: Rig) -> None:
    """RESIL-1: A down → B serves every request (body model + usage); after recovery A's circuit
    closes within reset timeout + one probe."""
    clock = FakeClock()
    gw = rig.gateway(
        clock,
        resilience={
            "circuit_breaker": {"failure_threshold": 2, "reset_timeout_s": 2},
            "cooldown": {"base_s": 0.01, "max_s": 0.02},
        },
    )
    rig.fakes["a"].set_behaviour("m", "fail-503")
    for _ in range(4):
        r = chat(gw)
        assert r.status_code == 200 and served_by(r) == "pb"
        body = r.json()
        assert body["model"] == "m" and body["usage"]["total_tokens"] > 0
        gw.advance(0.2)
    rig.fakes["a"].set_behaviour("m", "")
    recovered_at = clock.monotonic()
    while served_by(chat(gw)) != "pa":
        assert clock.monotonic() - recovered_at < 2 + 1.0, "circuit must close within reset timeout + a probe"
        gw.advance(0.1)


@pytest.mark.parametrize("stream", STREAM)
def test_all_rate_limited_gives_429_with_earliest_retry_after(rig: Rig, stream: bool) -> None:
    """RESIL-7: every target 429 → 429, Retry-After = earliest, fallback_exhausted + diagnostics."""
    gw = rig.gateway(chain=("pa", "pb", "pc"))
    for name, secs in (("a", 7), ("b", 4), ("c", 5)):
        rig.fakes[name].set_behaviour("m", f"fail-429-retry-{secs}")
    r = chat(gw, stream=stream)
    assert r.status_code == 429
    assert r.headers["retry-after"] == "4"
    body = r.json()
    assert body["error"]["code"] == "fallback_exhausted"
    attempted = body["diagnostics"]["attempted"]
    assert [a["provider"] for a in attempted] == ["pa", "pb", "pc"]
    assert all(a["status"] == 429 for a in attempted)
    assert body["diagnostics"]["pool_size"] == 3


def test_max_attempts_caps_upstream_calls(rig: Rig) -> None:
    """RESIL-6: max_attempts 3 with four failing targets → exactly 3 upstream calls, then exhaustion."""
    gw = rig.gateway(
        chain=("pa", "pb", "pc", "pd"), resilience={"retries": {"per_target": 0, "max_attempts": 3}}
    )
    for n in ("a", "b", "c", "d"):
        rig.fakes[n].set_behaviour("m", "fail-500")
    r = chat(gw)
    assert r.status_code == 503 and r.json()["error"]["code"] == "fallback_exhausted"
    assert sum(rig.fakes[n].calls() for n in ("a", "b", "c", "d")) == 3
    assert rig.fakes["d"].calls() == 0


def test_concurrent_requests_during_rate_limit_never_see_429(rig: Rig) -> None:
    """RESIL-2: 20 concurrent requests while A is rate-limited (Retry-After 5, then no hint) → no
    client-visible 429 while B is healthy; A's deadline never moves earlier."""
    clock = FakeClock()
    gw = rig.gateway(clock)
    rig.fakes["a"].set_behaviour("m", "fail-429-retry-5")
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        first = list(pool.map(lambda _: chat(gw), range(20)))
    until_1 = raw_cooldown_until(gw, "a1")
    assert until_1 > 0
    gw.advance(max(0.0, until_1 - clock.time()) + 0.05)
    rig.fakes["a"].set_behaviour("m", "fail-429")
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        second = list(pool.map(lambda _: chat(gw), range(20)))
    assert all(r.status_code == 200 for r in first + second)
    assert raw_cooldown_until(gw, "a1") >= until_1


def raw_cooldown_until(gw: GatewayThread, connection: str) -> float:
    """The stored cooldown deadline (epoch s), even when it already passed."""

    async def read(g: Any) -> float:
        recs = await g.state.get_cooldowns([connection])
        return float(recs[connection].until) if connection in recs else 0.0

    return gw.call(read)


def test_bare_id_chain_skips_disabled_entry(rig: Rig, tmp_path: Path) -> None:
    """RESIL-4: gpt-4o with chain openai(0) → anthropic(1, disabled) → mistral(2): openai failing →
    mistral serves; anthropic never called."""
    f = rig.fakes
    cfg = {
        "database_url": f"sqlite:///{tmp_path}/chain.db",
        "providers": [
            {"id": "openai", "base_url": f"{f['a'].base_url}/v1"},
            {"id": "anthropic", "base_url": f["b"].base_url},
            {"id": "mistral", "base_url": f"{f['c'].base_url}/v1"},
        ],
        "connections": [
            {"id": "oa", "provider": "openai", "api_key": "k"},
            {"id": "an", "provider": "anthropic", "api_key": "k"},
            {"id": "mi", "provider": "mistral", "api_key": "k"},
        ],
        "fallback_chains": {
            "gpt-4o": [
                {"provider": "openai", "priority": 0},
                {"provider": "anthropic", "priority": 1, "enabled": False},
                {"provider": "mistral", "priority": 2},
            ]
        },
    }
    gw = GatewayThread(config_from_dict(cfg, env={})).start()
    rig.gateways.append(gw)
    f["a"].set_behaviour("gpt-4o", "fail-500")
    r = chat(gw, model="gpt-4o")
    assert r.status_code == 200 and served_by(r) == "mistral"
    assert f["b"].calls() == 0
    decision = httpx.get(f"{gw.url}/api/routing/decisions/{r.headers['x-request-id']}", timeout=5).json()
    assert any("disabled" in e["reason"] for e in decision["exclusions"])


def test_chain_edit_applies_to_next_request(rig: Rig) -> None:
    """RESIL-4: POST /api/fallback/chains changes routing on the very next request; DELETE removes it."""
    gw = rig.gateway()
    r = httpx.post(
        f"{gw.url}/api/fallback/chains", json={"model": "m", "chain": [{"provider": "pd"}]}, timeout=5
    )
    assert r.status_code == 201
    assert served_by(chat(gw)) == "pd"
    listed = httpx.get(f"{gw.url}/api/fallback/chains", timeout=5).json()["chains"]
    assert [e["provider"] for e in listed["m"]] == ["pd"]
    bad = httpx.post(
        f"{gw.url}/api/fallback/chains", json={"model": "m", "chain": [{"provider": "nope"}]}, timeout=5
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "chain[0].provider"
    assert httpx.delete(f"{gw.url}/api/fallback/chains/m", timeout=5).status_code == 200


def test_client_disconnect_cancels_upstream_and_records_499(rig: Rig) -> None:
    """RESIL-9: the client goes away mid-stream → the upstream request is cancelled within 100 ms,
    nothing is retried, and the usage row says 499."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "stall-after-2")
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    with httpx.Client(timeout=10) as c, c.stream("POST", f"{gw.base_url}/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and "content" in line:
                break
        closed_at = time.monotonic()
    rig.fakes["a"].wait_until(lambda p: bool(p.cancel_times), timeout_s=2)
    assert rig.fakes["a"].cancel_times, "the upstream request must be cancelled"
    assert rig.fakes["a"].cancel_times[0] - closed_at < 0.1
    assert rig.fakes["b"].calls() == 0, "nothing is retried after a client disconnect"
    gw.wait_idle()
    assert usage_rows(gw)[0]["status"] == 499


def test_non_streaming_client_disconnect_cancels_upstream_and_every_later_attempt(rig: Rig) -> None:
    """RESIL-9: a non-streaming client goes away while A has not answered (TTFT timeout 10 s) → A's
    request is cancelled at once, the fallback B is never called, and the usage row says 499."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "stall")
    with pytest.raises(httpx.ReadTimeout):
        chat(gw, timeout=0.5)
    closed_at = time.monotonic()
    rig.fakes["a"].wait_until(lambda p: bool(p.cancel_times), timeout_s=2)
    assert rig.fakes["a"].cancel_times, "the upstream request must be cancelled"
    assert rig.fakes["a"].cancel_times[0] - closed_at < 0.5
    gw.wait_idle()
    assert rig.fakes["b"].calls() == 0, "nothing is tried after a client disconnect"
    assert usage_rows(gw)[0]["status"] == 499


def test_transitions_visible_in_state_and_headers(rig: Rig) -> None:
    """RESIL-1/2/3: each transition appears in /api/resilience events and in the routing headers."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "fail-429-retry-5")
    r = chat(gw)
    assert r.headers["x-omniroute-attempts"] == "2"
    assert "fallback=pa:429>pb:200" in r.headers["x-omniroute-decision"]
    r2 = chat(gw)
    assert "excluded=1" in r2.headers["x-omniroute-decision"]
    kinds = {(e.get("kind"), e.get("subject")) for e in state(gw)["events"]}
    assert any(k[1] == "a1" for k in kinds)


def usage_rows(gw: GatewayThread) -> list[dict[str, Any]]:
    async def rows(g: Any) -> list[dict[str, Any]]:
        await g.usage.flush()
        out: list[dict[str, Any]] = await g.store.recent_usage(limit=20)
        return out

    return gw.call(rows)


def test_retry_after_on_a_5xx_is_honoured_as_a_cooldown(rig: Rig) -> None:
    """RESIL-2 regression: a 504 carrying Retry-After cools the connection for that hint, so later
    requests do not hit the provider before it asked (found with llmock's verdict)."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "fail-504-retry-5")
    assert served_by(chat(gw)) == "pb"
    assert served_by(chat(gw)) == "pb"
    assert rig.fakes["a"].calls() == 1
    assert state(gw)["cooldowns"]["a1"]["reason"].startswith("retry-after requested")


def test_decision_reports_a_stream_that_failed_after_commit(rig: Rig) -> None:
    """OBS-2/RESIL-9 regression: the stored decision shows the committed attempt's later failure
    (stream rescue off, so the failure is the end of the request)."""
    gw = rig.gateway(resilience={"stream_rescue": False})
    rig.fakes["a"].set_behaviour("m", "chunks-6+cut-after-2")
    r = chat(gw, stream=True)
    d = httpx.get(f"{gw.url}/api/routing/decisions/{r.headers['x-request-id']}", timeout=5).json()
    assert d["attempts"][-1]["status"] != 200
    assert "after commit" in d["attempts"][-1]["reason"] and d["stream_error"]


def test_stream_without_upstream_usage_records_an_estimate(rig: Rig) -> None:
    """RESIL-9 regression: usage is recorded for spend even when the upstream sends none."""
    gw = rig.gateway()
    rig.fakes["a"].set_behaviour("m", "usage-missing")
    r = chat(
        gw,
        stream=True,
        content="one two three four five six seven eight",
        stream_options={"include_usage": True},
    )
    final = sse_events(r)[-2]
    assert isinstance(final, dict) and final["usage"]["completion_tokens"] > 0
    row = usage_rows(gw)[0]
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["cost_usd"] > 0


def test_all_candidates_unavailable_behind_an_open_breaker_says_when_to_retry_in_every_format(
    rig: Rig,
) -> None:
    """The only candidate's breaker is open for 8 s: the 503 ``all_candidates_unavailable`` of every
    wire format carries ``Retry-After`` with the seconds until its probe (rounded up)."""
    gw = rig.gateway(
        FakeClock(),
        chain=("pa",),
        resilience={
            "circuit_breaker": {"failure_threshold": 2, "reset_timeout_s": 8},
            "cooldown": {"base_s": 0.01, "max_s": 0.02},
            "retries": {"per_target": 0},
        },
    )
    rig.fakes["a"].set_behaviour("m", "fail-500")
    for _ in range(2):
        assert chat(gw).status_code >= 500
    gw.advance(0.5)  # the connection's cooldown is over; the breaker stays open until its probe
    msgs = [{"role": "user", "content": "hi"}]
    responses = [
        chat(gw),
        httpx.post(f"{gw.base_url}/responses", json={"model": "m", "input": "hi"}, timeout=20),
        httpx.post(
            f"{gw.url}/v1/messages",
            json={"model": "m", "max_tokens": 50, "messages": msgs},
            headers={"x-api-key": "x"},
            timeout=20,
        ),
        httpx.post(
            f"{gw.url}/v1beta/models/m:generateContent",
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            headers={"x-goog-api-key": "x"},
            timeout=20,
        ),
    ]
    for r in responses:
        assert r.status_code == 503 and "No candidate could be attempted" in r.text
        assert r.headers.get("retry-after") == "8", r.request.url
    gw.advance(2.0)
    assert chat(gw).headers.get("retry-after") == "6"
