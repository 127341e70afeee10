"""Key budgets, periods, expiry, rate limits and key edits as a client sees them (API-8).

One gateway on a :class:`~omniroute.clock.FakeClock` in front of the fake providers. The fake ``o``
reports 1,000,000 prompt tokens for ``model-o`` (``prompt-1000000``), so each call costs $1.00 at its
$1/M input price, far over the $0.50 daily budget: the first call is admitted on its small estimate,
the second is refused until the UTC day turns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from omniroute.clock import FakeClock
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

START = datetime(2026, 12, 2, 23, 50, tzinfo=UTC).timestamp()  # ten minutes before a UTC midnight
DAILY = "sk-budget-daily-0123456789abcdef"
ANTH = "sk-budget-anthropic-0123456789ab"
GEM = "sk-budget-gemini-0123456789abcde"
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture
def gt(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> Iterator[GatewayThread]:
    fakes["o"].set_behaviour("model-o", "prompt-1000000")
    keys: list[dict[str, Any]] = [
        {"name": n, "key": k, "budget_usd": 0.5, "budget_period": "daily"}
        for n, k in (("daily", DAILY), ("anthropic", ANTH), ("gemini", GEM))
    ]
    keys += [
        {"name": "rpm-openai", "key": "sk-rpm-openai-0123456789abcdef", "rpm": 1},
        {"name": "rpm-anthropic", "key": "sk-rpm-anthropic-0123456789abcd", "rpm": 1},
        {"name": "rpm-gemini", "key": "sk-rpm-gemini-0123456789abcdefg", "rpm": 1},
        {"name": "tpm", "key": "sk-tpm-0123456789abcdefghijklmn", "tpm": 50},
    ]
    yield make_gateway({"api_keys": keys}, clock=FakeClock(START))
    fakes["o"].set_behaviour("model-o", "")  # the fakes are shared by the whole session
    fakes["c"].set_behaviour("model-c", "")


def chat(gt: GatewayThread, key: str, **extra: Any) -> httpx.Response:
    body = {"model": "local-o/model-o", "messages": MSG, "max_tokens": 10, **extra}
    return httpx.post(
        f"{gt.base_url}/chat/completions", json=body, headers={"authorization": f"Bearer {key}"}, timeout=10
    )


def messages(gt: GatewayThread, key: str) -> httpx.Response:
    body = {"model": "local-o/model-o", "max_tokens": 10, "messages": MSG}
    return httpx.post(
        f"{gt.url}/v1/messages",
        json=body,
        headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
        timeout=10,
    )


def gemini(gt: GatewayThread, key: str) -> httpx.Response:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"maxOutputTokens": 10},
    }
    return httpx.post(
        f"{gt.url}/v1beta/models/local-o/model-o:generateContent",
        json=body,
        headers={"x-goog-api-key": key},
        timeout=10,
    )


def spend_one_dollar(gt: GatewayThread, send: Callable[[], httpx.Response]) -> None:
    """One admitted $1.00 call, then its usage row written (the writer runs on the fake clock)."""
    first = send()
    assert first.status_code == 200, first.text
    gt.advance(1.0)


def test_daily_budget_refuses_with_402_until_the_utc_day_turns(gt: GatewayThread) -> None:
    spend_one_dollar(gt, lambda: chat(gt, DAILY))
    over = chat(gt, DAILY)
    assert over.status_code == 402
    err = over.json()["error"]
    assert err["code"] == "budget_exceeded" and err["type"] == "insufficient_quota"
    assert "spent $1.0" in err["message"] and "of its $0.5 daily budget" in err["message"]
    assert "resets at 2026-12-03T00:00:00Z" in err["message"]
    budget = over.json()["budget"]
    assert budget["spent_usd"] == pytest.approx(1.0, rel=1e-3) and budget["budget_usd"] == 0.5
    assert budget["resets_at"] == "2026-12-03T00:00:00Z"
    gt.advance(9 * 60)  # 23:59:01: still the same day
    assert chat(gt, DAILY).status_code == 402
    gt.advance(60)  # 00:00:01 UTC
    listed = {k["name"]: k for k in httpx.get(f"{gt.url}/api/keys", timeout=5).json()["data"]}
    assert listed["daily"]["spent_usd"] == 0 and listed["daily"]["resets_at"] == "2026-12-04T00:00:00Z"
    assert listed["rpm-openai"]["resets_at"] is None  # no budget period: a total never resets
    assert chat(gt, DAILY).status_code == 200


def test_402_comes_in_the_anthropic_and_gemini_shapes(gt: GatewayThread) -> None:
    spend_one_dollar(gt, lambda: messages(gt, ANTH))
    a = messages(gt, ANTH)
    assert a.status_code == 402
    assert a.json()["type"] == "error" and a.json()["error"]["type"] == "billing_error"
    assert "resets at 2026-12-03T00:00:00Z" in a.json()["error"]["message"]
    spend_one_dollar(gt, lambda: gemini(gt, GEM))
    g = gemini(gt, GEM)
    assert g.status_code == 402
    assert g.json()["error"]["code"] == 402 and g.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert "0.5 daily budget" in g.json()["error"]["message"]


def _assert_rate_limited(
    r: httpx.Response, kind: str = "requests", limit: str = "1", remaining: str = "0"
) -> None:
    assert r.status_code == 429, r.text
    assert int(r.headers["retry-after"]) >= 1
    assert r.headers[f"x-ratelimit-limit-{kind}"] == limit
    assert r.headers[f"x-ratelimit-remaining-{kind}"] == remaining
    assert r.headers[f"x-ratelimit-reset-{kind}"].endswith("s")


def test_rpm_over_the_limit_is_429_with_openai_rate_limit_headers_in_each_shape(gt: GatewayThread) -> None:
    key = "sk-rpm-openai-0123456789abcdef"
    assert chat(gt, key).status_code == 200
    o = chat(gt, key)
    _assert_rate_limited(o)
    assert o.json()["error"]["code"] == "rate_limit_exceeded" and o.json()["error"]["type"] == "requests"
    assert "requests per minute" in o.json()["error"]["message"]
    key = "sk-rpm-anthropic-0123456789abcd"
    assert messages(gt, key).status_code == 200
    a = messages(gt, key)
    _assert_rate_limited(a)
    assert a.json()["error"]["type"] == "rate_limit_error"
    key = "sk-rpm-gemini-0123456789abcdefg"
    assert gemini(gt, key).status_code == 200
    g = gemini(gt, key)
    _assert_rate_limited(g)
    assert g.json()["error"]["status"] == "RESOURCE_EXHAUSTED"


def test_openai_sdk_reads_the_429_as_a_rate_limit_error(gt: GatewayThread) -> None:
    import openai

    client = openai.OpenAI(base_url=gt.base_url, api_key="sk-rpm-openai-0123456789abcdef", max_retries=0)
    client.chat.completions.create(model="local-o/model-o", messages=MSG, max_tokens=10)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as exc:
        client.chat.completions.create(model="local-o/model-o", messages=MSG, max_tokens=10)  # type: ignore[arg-type]
    assert exc.value.response.headers["x-ratelimit-remaining-requests"] == "0"


def test_a_call_over_the_tokens_per_minute_limit_is_429_naming_the_tpm(gt: GatewayThread) -> None:
    key = "sk-tpm-0123456789abcdefghijklmn"
    assert chat(gt, key, max_tokens=20).status_code == 200  # 4 estimated prompt tokens + 20: fits 50
    r = chat(gt, key, max_tokens=40)  # 24 used + 44 > 50
    _assert_rate_limited(r, "tokens", "50", remaining="26")
    assert r.json()["error"]["type"] == "tokens" and "tokens per minute" in r.json()["error"]["message"]


def test_a_stream_the_client_leaves_is_charged_for_what_it_received(
    gt: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    fakes["c"].set_behaviour("model-c", "answer-" + "word_" * 200 + "+chunks-20+stall-after-3")
    body = {"model": "local-c/model-c", "messages": MSG, "stream": True}
    with (
        httpx.Client(timeout=10) as c,
        c.stream(
            "POST", f"{gt.base_url}/chat/completions", json=body, headers={"authorization": f"Bearer {DAILY}"}
        ) as r,
    ):
        for line in r.iter_lines():
            if line.startswith("data: ") and "content" in line:
                break
    gt.wait_idle()
    gt.advance(1.0)
    rows = httpx.get(f"{gt.url}/api/usage", params={"limit": 10}, timeout=5).json()["data"]
    row = next(x for x in rows if x["model"] == "model-c")
    assert row["status"] == 499
    assert row["completion_tokens"] > 0 and row["prompt_tokens"] > 0
    # prompt and streamed text at model-c's $0.5/M input and $1/M output
    expected = (row["prompt_tokens"] * 0.5 + row["completion_tokens"] * 1.0) / 1e6
    assert row["cost_usd"] == pytest.approx(expected) and row["cost_usd"] > 0
    keys = httpx.get(f"{gt.url}/api/keys", timeout=5).json()["data"]
    spent = next(k for k in keys if k["name"] == "daily")["spent_usd"]
    assert spent == pytest.approx(row["cost_usd"])
    assert next(k for k in keys if k["name"] == "daily")["reserved_usd"] == 0


def test_an_expired_key_is_refused_with_401(gt: GatewayThread) -> None:
    keys = httpx.get(f"{gt.url}/api/keys", timeout=5).json()["data"]
    kid = next(k["id"] for k in keys if k["name"] == "daily")
    r = httpx.patch(f"{gt.url}/api/keys/{kid}", json={"expires_at": "2026-12-02T23:55:00Z"}, timeout=5)
    assert (
        r.status_code == 200
        and r.json()["expires_at"] == datetime(2026, 12, 2, 23, 55, tzinfo=UTC).timestamp()
    )
    assert chat(gt, DAILY).status_code == 200
    gt.advance(5 * 60)
    r = chat(gt, DAILY)
    assert r.status_code == 401 and r.json()["error"]["code"] == "api_key_expired"
    assert "expired at 2026-12-02T23:55:00Z" in r.json()["error"]["message"]


def test_patch_changes_budget_period_and_limits_and_they_apply_at_once(gt: GatewayThread) -> None:
    spend_one_dollar(gt, lambda: chat(gt, DAILY))
    assert chat(gt, DAILY).status_code == 402
    r = httpx.patch(f"{gt.url}/api/keys/daily", json={"budget_usd": 5, "rpm": 1}, timeout=5)
    assert r.status_code == 200, r.text
    assert r.json()["budget_usd"] == 5 and r.json()["rpm"] == 1 and r.json()["budget_period"] == "daily"
    assert chat(gt, DAILY).status_code == 200
    assert chat(gt, DAILY).status_code == 429
    r = httpx.patch(f"{gt.url}/api/keys/daily", json={"budget_usd": None, "rpm": None}, timeout=5)
    assert r.json()["budget_usd"] is None and r.json()["rpm"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"budget_usd": -1}, "budget_usd"),
        ({"budget_usd": "lots"}, "budget_usd"),
        ({"budget_period": "hourly"}, "budget_period"),
        ({"budget_period": None}, "budget_period"),
        ({"allowed_models": []}, "allowed_models"),
        ({"allowed_models": None}, "allowed_models"),
        ({"rpm": 0}, "rpm"),
        ({"tpm": 1.5}, "tpm"),
        ({"expires_at": "tomorrow"}, "expires_at"),
        ({"spent_usd": 0}, "spent_usd"),
    ],
)
def test_patch_key_validation_errors_are_400_naming_the_field(
    gt: GatewayThread, body: dict[str, Any], field: str
) -> None:
    r = httpx.patch(f"{gt.url}/api/keys/daily", json=body, timeout=5)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field
    assert r.json()["error"]["message"].startswith(field)


def test_patch_of_an_unknown_key_is_404(gt: GatewayThread) -> None:
    r = httpx.patch(f"{gt.url}/api/keys/nope", json={"rpm": 5}, timeout=5)
    assert r.status_code == 404 and "nope" in r.json()["error"]["message"]


def test_rate_limit_reset_text_is_openai_style() -> None:
    from omniroute.accounting.ratelimit import reset_text

    assert [reset_text(s) for s in (0.2, 1, 59.5, 60, 361, 3723)] == [
        "1s",
        "1s",
        "1m0s",
        "1m0s",
        "6m1s",
        "1h2m3s",
    ]


def test_keys_update_cli_changes_a_key_and_names_a_bad_option(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from omniroute.cli.main import app as cli_app

    cfg = tmp_path / "cli.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/cli.db'\n")
    run = CliRunner().invoke
    assert run(cli_app, ["keys", "create", "laptop", "--config", str(cfg)]).exit_code == 0
    out = run(
        cli_app,
        [
            "keys",
            "update",
            "laptop",
            "--budget",
            "2.5",
            "--period",
            "weekly",
            "--rpm",
            "30",
            "--config",
            str(cfg),
        ],
    )
    assert out.exit_code == 0, out.output
    assert "budget_period" in out.output and "rpm" in out.output
    listed = run(cli_app, ["keys", "list", "--config", str(cfg)])
    assert "2.5/weekly" in listed.output
    bad = run(cli_app, ["keys", "update", "laptop", "--period", "hourly", "--config", str(cfg)])
    assert bad.exit_code == 2 and "--period" in bad.output
    bad = run(cli_app, ["keys", "update", "laptop", "--expires", "soon", "--config", str(cfg)])
    assert bad.exit_code == 2 and "--expires" in bad.output
    missing = run(cli_app, ["keys", "update", "nobody", "--rpm", "3", "--config", str(cfg)])
    assert missing.exit_code == 1 and "nobody" in missing.output


def test_embeddings_count_against_the_key_rate_limit(gt: GatewayThread) -> None:
    key = "sk-rpm-openai-0123456789abcdef"
    body = {"model": "local-o/model-o", "input": ["hello"]}
    auth = {"authorization": f"Bearer {key}"}
    assert httpx.post(f"{gt.base_url}/embeddings", json=body, headers=auth, timeout=10).status_code == 200
    r = httpx.post(f"{gt.base_url}/embeddings", json=body, headers=auth, timeout=10)
    _assert_rate_limited(r)
    assert r.json()["error"]["code"] == "rate_limit_exceeded"


def test_402_on_the_responses_route_comes_in_the_openai_error_shape(gt: GatewayThread) -> None:
    def responses() -> httpx.Response:
        body = {"model": "local-o/model-o", "input": "hi", "max_output_tokens": 16}
        return httpx.post(
            f"{gt.base_url}/responses", json=body, headers={"authorization": f"Bearer {DAILY}"}, timeout=10
        )

    spend_one_dollar(gt, responses)
    r = responses()
    assert r.status_code == 402
    assert r.json()["error"]["code"] == "budget_exceeded" and r.json()["budget"]["budget_period"] == "daily"
