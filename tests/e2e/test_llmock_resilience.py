"""The unchanged gateway against llmock 0.2.2, an independent fake provider with fault injection that
judges its client (SPEC RESIL-2, RESIL-6, RESIL-9).

llmock journals every request it serves and groups attempts into *calls* by fingerprint (method, path
and canonical JSON body): an attempt that resends the body of an attempt that had already failed
is a retry of it. ``GET /_llmock/verdict`` then judges the client, here the gateway, with no per-client
key or header. The checks this file relies on (``findings[].code``, severity ``error``):

- ``retry_storm``: more than 10 attempts in one call;
- ``retry_after_ignored``: an attempt started sooner after an error carrying ``Retry-After`` /
  ``retry-after-ms`` than the hint asked (5 % + 50 ms slack);
- ``truncated_stream_accepted``: the last attempt of a call was a stream cut with no finish reason and
  no ``[DONE]``, and nobody resent it.

Faults are queued with ``POST /_llmock/scenario`` ``{"behaviors": [{"type": ..., "match": {...}}]}``:
each behaviour has its own ``match`` filter (model, path, stream) and fires ``times`` times
(``null``: until cleared).

Because client requests with the same body look to llmock like retries of one call, sending the same
prompt several times through the gateway makes the verdict judge the gateway's *aggregate* pressure on
the upstream: a gateway that kept hitting a rate-limited connection before its Retry-After, or kept
hammering a failing provider, is flagged even though each single client request made few attempts.
A stream cut after commit cannot be retried by the gateway (the client already has part of the
answer): what the gateway owes is an error the client can see, so the client here resends exactly
when it was told the stream failed, and llmock sees that as the retry. A gateway that passed the
truncated stream off as complete would get no resend and be flagged.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from llmock.simulation import MockResponseSettings
from llmock.testing import LLMockServer

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MODEL = "mock-model"  # served by both llmock and local-c; its fallback chain is llmock → local-c
CHAT_PATH = "/v1/chat/completions"
# The static style answers "Mock response from mock-model." in 4 content chunks. With the
# include_usage the gateway always asks upstream for, llmock streams: #0 role chunk, #1-#4 text,
# #5 finish "stop", #6 usage, #7 [DONE].
ANSWER = f"Mock response from {MODEL}."
JUDGED = ("retry_storm", "retry_after_ignored", "truncated_stream_accepted")


# -- fixtures and helpers ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Iterator[LLMockServer]:
    """One real llmock server (uvicorn in a thread, free port on 127.0.0.1) for this module."""
    with LLMockServer(responses=MockResponseSettings(response_style="static")) as server:
        yield server


@pytest.fixture
def mock(upstream: LLMockServer) -> Iterator[httpx.Client]:
    """An HTTP client on llmock's control API (``/_llmock``), journal and queue reset."""
    with httpx.Client(base_url=upstream.url, timeout=10) as c:
        c.post("/_llmock/reset").raise_for_status()
        yield c


@pytest.fixture
def gw(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], upstream: LLMockServer
) -> GatewayThread:
    """Provider ``llmock`` (OpenAI format, connection m1) then the healthy fake ``local-c`` (c1), with
    stream rescue off: a stream cut after commit reaches the client as the failure it is."""
    return make_gateway(_llmock_config(fakes, upstream, {"stream_rescue": False}))


def _llmock_config(
    fakes: dict[str, FakeProviderThread], upstream: LLMockServer, resilience: dict[str, Any]
) -> dict[str, Any]:
    return {
        "providers": [
            {
                "id": "llmock",
                "format": "openai",
                "base_url": upstream.base_url("openai"),
                "models": [{"id": MODEL}],
            },
            {
                "id": "local-c",
                "format": "openai",
                "base_url": f"{fakes['c'].base_url}/v1",
                "models": [{"id": MODEL}, {"id": "model-c"}],
            },
        ],
        "connections": [
            {"id": "m1", "provider": "llmock", "api_key": "sk-m1", "priority": 1, "default_model": MODEL},
            {
                "id": "c1",
                "provider": "local-c",
                "api_key": "sk-c1",
                "priority": 2,
                "default_model": "model-c",
            },
        ],
        "fallback_chains": {MODEL: [{"provider": "llmock"}, {"provider": "local-c"}]},
        "resilience": resilience,
    }


@pytest.fixture
def gw_rescue(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], upstream: LLMockServer
) -> GatewayThread:
    """As ``gw``, with stream rescue on (the default)."""
    return make_gateway(_llmock_config(fakes, upstream, {}))


@pytest.fixture
def gw_failover(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], upstream: LLMockServer
) -> GatewayThread:
    """As ``gw``, with ``max_hint_wait_s: 0``: every upstream wait hint fails over at once."""
    return make_gateway(
        {
            "providers": [
                {
                    "id": "llmock",
                    "format": "openai",
                    "base_url": upstream.base_url("openai"),
                    "models": [{"id": MODEL}],
                },
                {
                    "id": "local-c",
                    "format": "openai",
                    "base_url": f"{fakes['c'].base_url}/v1",
                    "models": [{"id": MODEL}, {"id": "model-c"}],
                },
            ],
            "connections": [
                {"id": "m1", "provider": "llmock", "api_key": "sk-m1", "priority": 1, "default_model": MODEL},
                {
                    "id": "c1",
                    "provider": "local-c",
                    "api_key": "sk-c1",
                    "priority": 2,
                    "default_model": "model-c",
                },
            ],
            "fallback_chains": {MODEL: [{"provider": "llmock"}, {"provider": "local-c"}]},
            "resilience": {"retries": {"max_hint_wait_s": 0}},
        }
    )


def client(gw: GatewayThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="unused", max_retries=0, timeout=10)


def scenario(mock: httpx.Client, *behaviors: dict[str, Any]) -> None:
    r = mock.post("/_llmock/scenario", json={"behaviors": list(behaviors)})
    assert r.status_code == 201, r.text


def chat_attempts(mock: httpx.Client) -> list[dict[str, Any]]:
    """Every chat request llmock served in this test, oldest first."""
    reqs = mock.get("/_llmock/requests").json()["requests"]
    return [r for r in reqs if r["path"] == CHAT_PATH]


def assert_verdict_clean(mock: httpx.Client, evidence: Any = None) -> dict[str, Any]:
    """No retry storm, no ignored Retry-After, no accepted truncated stream; then no error at all."""
    verdict = mock.get("/_llmock/verdict").json()
    report = mock.get("/_llmock/verdict", params={"format": "text"}).text
    errors = {f["code"] for f in verdict["findings"] if f["severity"] == "error"}
    assert not errors & set(JUDGED), f"{report}\n{verdict}\nevidence: {evidence}"
    assert verdict["passed"], f"{report}\n{verdict}\nevidence: {evidence}"
    return verdict


def decision(gw: GatewayThread, request_id: str) -> dict[str, Any]:
    return httpx.get(f"{gw.url}/api/routing/decisions/{request_id}", timeout=10).json()


def usage_row(gw: GatewayThread, request_id: str) -> dict[str, Any]:
    rows = httpx.get(f"{gw.url}/api/usage", timeout=10).json()["data"]
    return next(r for r in rows if r["request_id"] == request_id)


# -- (a) 429 with Retry-After --------------------------------------------------------------------


def test_rate_limit_cools_the_connection_for_the_hint_and_serves_elsewhere(
    gw_failover: GatewayThread, mock: httpx.Client
) -> None:
    """RESIL-2 (hints fail over at once: ``max_hint_wait_s: 0``): a 429 with Retry-After 1 s cools
    llmock's only connection for 1 s; meanwhile the same prompt is served by local-c without touching
    llmock, and llmock is used again once the hint ran out. The two 429s are the only faults llmock
    sees; no attempt lands inside a Retry-After window."""
    scenario(
        mock,
        {
            "type": "fail",
            "status": 429,
            "retry_after": 1.0,
            "times": 2,
            "match": {"path": CHAT_PATH, "model": MODEL},
        },
    )
    c = client(gw_failover)
    served: list[tuple[float, str, int]] = []
    t0 = time.monotonic()
    # Bounded: ~0.1 s apart until llmock serves again (~2 s: two 1 s cooldowns), at most 5 s.
    while not served or served[-1][1] != "llmock":
        assert time.monotonic() - t0 < 5.0 and len(served) < 60, served
        raw = c.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "rate limited prompt"}]
        )
        assert raw.http_response.status_code == 200
        served.append(
            (
                time.monotonic() - t0,
                raw.headers["x-omniroute-provider"],
                int(raw.headers["x-omniroute-attempts"]),
            )
        )
        time.sleep(0.1)

    attempts = chat_attempts(mock)
    evidence = {"served": served, "llmock": [(a["seq"], a["status"], a["retry_after"]) for a in attempts]}
    # The first request fell back at once (llmock 429 → local-c), it did not wait in-request.
    assert served[0][1:] == ("local-c", 2), evidence
    # While cooling, requests went straight to local-c (one attempt each): llmock saw only the two
    # 429s and the request it served once the hint ran out, out of the ~20 sent.
    assert sum(1 for _, p, n in served if p == "local-c" and n == 1) >= 5, evidence
    assert [a["status"] for a in attempts] == [429, 429, 200], evidence
    assert served[-1][1:] == ("llmock", 1), evidence  # the connection came back after the hint
    for before, after in itertools.pairwise(attempts):
        if before["status"] == 429:
            assert after["started_at"] - before["ended_at"] >= before["retry_after"], evidence
    assert_verdict_clean(mock, evidence)


def test_rate_limit_on_the_last_target_waits_the_hint_in_request(
    gw: GatewayThread, mock: httpx.Client
) -> None:
    """RESIL-6: with llmock as the only target, a 429 with retry-after-ms 500 is waited out inside the
    request and the retry succeeds; llmock sees the retry no sooner than the hint."""
    scenario(
        mock,
        {
            "type": "fail",
            "status": 429,
            "retry_after": 0.5,
            "times": 1,
            "match": {"path": CHAT_PATH, "model": MODEL},
        },
    )
    t0 = time.monotonic()
    raw = client(gw).chat.completions.with_raw_response.create(
        model=f"llmock/{MODEL}", messages=[{"role": "user", "content": "wait for me"}]
    )
    elapsed = time.monotonic() - t0
    assert raw.parse().choices[0].message.content == ANSWER
    assert raw.headers["x-omniroute-attempts"] == "2"
    assert elapsed >= 0.5
    first, second = chat_attempts(mock)
    assert (first["status"], second["status"]) == (429, 200)
    assert second["started_at"] - first["ended_at"] >= 0.5
    assert_verdict_clean(mock, decision(gw, raw.headers["x-request-id"]))


# -- (b) 5xx burst -------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_burst_is_bounded_and_falls_back(gw: GatewayThread, mock: httpx.Client, status: int) -> None:
    """RESIL-1/2/6: llmock answers every chat request with ``status`` (as llmock sends it: 503 and 504
    carry its default Retry-After of 1 s). Twelve identical client requests all succeed from local-c;
    the breaker (or the cooldown) stops the gateway from hammering llmock: no retry storm, no attempt
    inside a Retry-After window, and the last requests no longer reach llmock at all."""
    scenario(
        mock, {"type": "fail", "status": status, "times": None, "match": {"path": CHAT_PATH, "model": MODEL}}
    )
    c = client(gw)
    served: list[tuple[str, str]] = []
    for _ in range(12):
        raw = c.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": f"burst of {status}"}]
        )
        assert raw.http_response.status_code == 200
        assert raw.parse().choices[0].message.content == f"Hello from c ({MODEL})."
        served.append((raw.headers["x-request-id"], raw.headers["x-omniroute-decision"]))
    attempts = chat_attempts(mock)
    evidence = {
        "llmock": [
            (a["seq"], a["status"], a["retry_after"], round(a["started_at"], 3), round(a["ended_at"], 3))
            for a in attempts
        ],
        "decisions": [d for _, d in served],
        "first_decision": decision(gw, served[0][0]),
    }
    assert all(a["status"] == status for a in attempts), evidence
    assert len(attempts) <= 10, evidence
    assert all("fallback=" not in d for _, d in served[-3:]), evidence  # llmock no longer tried
    mock.delete("/_llmock/scenario").raise_for_status()
    assert_verdict_clean(mock, evidence)


# -- (c) truncated and dropped streams -------------------------------------------------------------


def read_stream(c: openai.OpenAI, request_id: str) -> tuple[str, list[str], Exception | None]:
    """Read one streamed answer: (text, finish reasons, the error the SDK raised or None)."""
    text, finishes = "", []
    try:
        stream = c.chat.completions.create(
            model=f"llmock/{MODEL}",
            messages=[{"role": "user", "content": "stream me"}],
            stream=True,
            extra_headers={"x-request-id": request_id},
        )
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                if choice.finish_reason:
                    finishes.append(choice.finish_reason)
    except (openai.APIError, httpx.HTTPError) as exc:
        return text, finishes, exc
    return text, finishes, None


@pytest.mark.parametrize(
    ("kind", "after_chunks", "before_commit"),
    [
        ("truncate", 1, True),  # only the role chunk went out: nothing committed yet
        ("truncate", 3, False),  # cut mid-answer
        ("truncate", 5, False),  # the whole text went out, then the end with no finish and no [DONE]
        ("disconnect", 3, False),  # connection dropped mid-answer
    ],
)
def test_broken_stream_is_never_presented_as_complete(
    gw: GatewayThread, mock: httpx.Client, kind: str, after_chunks: int, before_commit: bool
) -> None:
    """RESIL-9: a stream llmock cuts before the first content chunk is retried invisibly; one cut after
    commit reaches the client as an SDK error after a non-``stop`` finish, and the gateway records the
    request as failed (usage status 502, breaker failure). The client resends only when it was told the
    stream failed, so llmock's verdict sees no accepted truncated stream."""
    scenario(
        mock,
        {
            "type": "stream_fault",
            "kind": kind,
            "after_chunks": after_chunks,
            "times": 1,
            "match": {"path": CHAT_PATH, "model": MODEL, "stream": True},
        },
    )
    c = client(gw)
    rid = f"req_llmock_{kind}_{after_chunks}"
    text, finishes, err = read_stream(c, rid)
    evidence: dict[str, Any] = {
        "text": text,
        "finishes": finishes,
        "error": repr(err),
        "decision": decision(gw, rid),
    }
    if before_commit:
        assert err is None and finishes == ["stop"] and text == ANSWER, evidence
        assert [a["status"] for a in evidence["decision"]["attempts"]] == [502, 200], evidence
    else:
        # Never a clean, complete stream: the SDK raises and no "stop" finish was seen.
        assert err is not None, evidence
        assert "stop" not in finishes, evidence
        assert ANSWER.startswith(text), evidence
        row = usage_row(gw, rid)
        evidence["usage"] = row
        assert row["status"] == 502 and row["error"], evidence
        breaker = httpx.get(f"{gw.url}/api/resilience", timeout=10).json()["breakers"].get("llmock")
        evidence["breaker"] = breaker
        assert breaker is not None and breaker["failures"] >= 1, evidence
        # The client was told: it resends, and this time gets the whole answer.
        text, finishes, err = read_stream(c, f"{rid}_again")
        assert err is None and finishes == ["stop"] and text == ANSWER, evidence
    attempts = chat_attempts(mock)
    evidence["llmock"] = [(a["seq"], a["status"], a["fault"], a["completed"]) for a in attempts]
    assert len(attempts) == 2 and attempts[0]["fault"] == f"stream:{kind}@{after_chunks}", evidence
    assert_verdict_clean(mock, evidence)


@pytest.mark.parametrize(("kind", "after_chunks"), [("truncate", 3), ("truncate", 5), ("disconnect", 3)])
def test_a_stream_broken_after_commit_is_rescued_into_one_whole_answer(
    gw_rescue: GatewayThread, mock: httpx.Client, kind: str, after_chunks: int
) -> None:
    """RESIL-9 with stream rescue on: llmock cuts its stream after commit once; the gateway asks llmock
    again for the rest (the answer it sends in full is joined without repeating the part already
    sent), so the SDK reads the whole answer once with one ``stop`` and no error, and the usage row
    says the stream was rescued after two attempts."""
    scenario(
        mock,
        {
            "type": "stream_fault",
            "kind": kind,
            "after_chunks": after_chunks,
            "times": 1,
            "match": {"path": CHAT_PATH, "model": MODEL, "stream": True},
        },
    )
    rid = f"req_llmock_rescue_{kind}_{after_chunks}"
    text, finishes, err = read_stream(client(gw_rescue), rid)
    evidence: dict[str, Any] = {"text": text, "finishes": finishes, "error": repr(err)}
    assert err is None and finishes == ["stop"] and text == ANSWER, evidence
    row = usage_row(gw_rescue, rid)
    assert row["status"] == 200 and row["rescued"] is True and row["attempts"] == 2, row
    attempts = chat_attempts(mock)
    assert len(attempts) == 2 and attempts[0]["fault"] == f"stream:{kind}@{after_chunks}", attempts
    # The second call asks for the rest: the part already sent rides along as an assistant prefill
    # (llmock's verdict cannot tell such a continuation from an accepted truncation, so it is not read).
    sent = attempts[1]["body"]["messages"][-1]
    assert sent["role"] == "assistant" and sent["content"] and ANSWER.startswith(sent["content"]), attempts
