"""Key edits, field types, rate-limit headers and usage sums as an operator and a client see them (API-8).

One gateway on a :class:`~omniroute.clock.FakeClock` in front of the fake providers, as in
``test_key_budgets``: the fake ``o`` reports 1,000,000 prompt tokens for ``model-o``, so each call
costs $1.00 at its $1/M input price.
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
TOTAL = "sk-budget-total-0123456789abcdef"
BOTH = "sk-rpm-and-tpm-0123456789abcdef"
TOKENS = "sk-tokens-first-0123456789abcde"
SMALL = "sk-tpm-small-0123456789abcdefgh"
RPM1 = "sk-rpm-one-0123456789abcdefghij"
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture
def gt(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread]
) -> Iterator[GatewayThread]:
    fakes["o"].set_behaviour("model-o", "prompt-1000000")
    keys: list[dict[str, Any]] = [
        {"name": "total", "key": TOTAL, "budget_usd": 0.5},
        {"name": "both", "key": BOTH, "rpm": 1, "tpm": 1000},
        {"name": "tokens-first", "key": TOKENS, "rpm": 100, "tpm": 50},
        {"name": "small", "key": SMALL, "tpm": 100},
        {"name": "rpm1", "key": RPM1, "rpm": 1},
    ]
    yield make_gateway({"api_keys": keys}, clock=FakeClock(START))
    fakes["o"].set_behaviour("model-o", "")  # the fakes are shared by the whole session


def chat(gt: GatewayThread, key: str, **extra: Any) -> httpx.Response:
    body = {"model": "local-o/model-o", "messages": MSG, "max_tokens": 10, **extra}
    return httpx.post(
        f"{gt.base_url}/chat/completions", json=body, headers={"authorization": f"Bearer {key}"}, timeout=10
    )


def listed(gt: GatewayThread, name: str) -> dict[str, Any]:
    keys = httpx.get(f"{gt.url}/api/keys", timeout=5).json()["data"]
    return next(k for k in keys if k["name"] == name)


def test_changing_the_budget_period_keeps_the_spend_of_the_new_current_period(gt: GatewayThread) -> None:
    assert chat(gt, TOTAL).status_code == 200  # $1.00 today, over the $0.50 total
    gt.advance(1.0)
    assert chat(gt, TOTAL).status_code == 402
    r = httpx.patch(f"{gt.url}/api/keys/total", json={"budget_period": "daily"}, timeout=5)
    assert r.status_code == 200, r.text
    patched = r.json()
    assert patched["spent_usd"] == pytest.approx(1.0, rel=1e-3)
    assert patched["resets_at"] == "2026-12-03T00:00:00Z"
    got = listed(gt, "total")
    assert got["spent_usd"] == patched["spent_usd"] and got["resets_at"] == patched["resets_at"]
    assert chat(gt, TOTAL).status_code == 402  # the spend happened today: still over the daily cap
    gt.advance(10 * 60)  # 00:00:01 UTC: a new day
    assert listed(gt, "total")["spent_usd"] == 0
    assert chat(gt, TOTAL).status_code == 200


def test_changing_the_budget_period_drops_spend_from_before_the_new_period(gt: GatewayThread) -> None:
    assert chat(gt, TOTAL).status_code == 200  # $1.00 on 2 December
    gt.advance(11 * 60)  # 3 December
    r = httpx.patch(f"{gt.url}/api/keys/total", json={"budget_period": "daily"}, timeout=5)
    assert r.status_code == 200 and r.json()["spent_usd"] == 0
    assert chat(gt, TOTAL).status_code == 200
    gt.advance(1.0)
    r = httpx.patch(f"{gt.url}/api/keys/total", json={"budget_period": "total"}, timeout=5)
    assert r.json()["spent_usd"] == pytest.approx(2.0, rel=1e-3) and r.json()["resets_at"] is None
    assert listed(gt, "total")["spent_usd"] == r.json()["spent_usd"]


@pytest.mark.parametrize(
    ("method", "body", "field"),
    [
        ("PATCH", {"rpm": True}, "rpm"),
        ("PATCH", {"tpm": "5"}, "tpm"),
        ("PATCH", {"budget_usd": True}, "budget_usd"),
        ("PATCH", {"budget_usd": "5"}, "budget_usd"),
        ("POST", {"name": "x2", "rpm": "5"}, "rpm"),
        ("POST", {"name": "x3", "budget_usd": False}, "budget_usd"),
        ("POST", {"name": "   "}, "name"),
        ("POST", {"name": 5}, "name"),
    ],
)
def test_key_fields_of_the_wrong_json_type_or_a_blank_name_are_400_naming_the_field(
    gt: GatewayThread, method: str, body: dict[str, Any], field: str
) -> None:
    url = f"{gt.url}/api/keys" + ("/total" if method == "PATCH" else "")
    r = httpx.request(method, url, json=body, timeout=5)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == field and r.json()["error"]["message"].startswith(field)


def test_integer_budgets_are_still_accepted(gt: GatewayThread) -> None:
    r = httpx.post(f"{gt.url}/api/keys", json={"name": "int-budget", "budget_usd": 3, "rpm": 5}, timeout=5)
    assert r.status_code == 201, r.text
    assert r.json()["budget_usd"] == 3 and r.json()["rpm"] == 5


def test_a_429_of_a_key_with_rpm_and_tpm_carries_both_header_trios(gt: GatewayThread) -> None:
    assert chat(gt, BOTH).status_code == 200
    r = chat(gt, BOTH)  # over the rpm
    assert r.status_code == 429 and r.json()["error"]["type"] == "requests"
    assert (
        r.headers["x-ratelimit-limit-requests"] == "1" and r.headers["x-ratelimit-remaining-requests"] == "0"
    )
    assert r.headers["x-ratelimit-limit-tokens"] == "1000"
    assert int(r.headers["x-ratelimit-remaining-tokens"]) < 1000
    assert r.headers["x-ratelimit-reset-tokens"].endswith("s")
    assert chat(gt, TOKENS, max_tokens=30).status_code == 200
    r = chat(gt, TOKENS, max_tokens=30)  # over the tpm, within the rpm
    assert r.status_code == 429 and r.json()["error"]["type"] == "tokens"
    assert r.headers["x-ratelimit-limit-tokens"] == "50"
    assert r.headers["x-ratelimit-limit-requests"] == "100"
    assert r.headers["x-ratelimit-remaining-requests"] == "98"  # a refused call still counts a request


def test_a_request_larger_than_the_tpm_says_not_to_retry_and_the_openai_sdk_does_not(
    gt: GatewayThread,
) -> None:
    import openai

    r = chat(gt, SMALL, max_tokens=4096)
    assert r.status_code == 429 and "Request too large" in r.json()["error"]["message"]
    assert "retry-after" not in r.headers and r.headers["x-should-retry"] == "false"
    sent: list[httpx.Request] = []
    with httpx.Client(event_hooks={"request": [sent.append]}) as http:
        client = openai.OpenAI(base_url=gt.base_url, api_key=SMALL, max_retries=3, http_client=http)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="local-o/model-o", messages=MSG, max_tokens=4096)  # type: ignore[arg-type]
    assert len(sent) == 1


def test_a_call_over_the_rpm_still_tells_the_client_when_to_retry(gt: GatewayThread) -> None:
    assert chat(gt, RPM1).status_code == 200
    r = chat(gt, RPM1)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "x-should-retry" not in r.headers


def test_token_counts_are_not_rate_limited_and_carry_no_rate_limit_headers(gt: GatewayThread) -> None:
    body = {"model": "local-o/model-o", "messages": MSG}
    headers = {"x-api-key": RPM1, "anthropic-version": "2023-06-01"}
    for _ in range(3):
        r = httpx.post(f"{gt.url}/v1/messages/count_tokens", json=body, headers=headers, timeout=10)
        assert r.status_code == 200, r.text
        assert not any(h.startswith("x-ratelimit-") for h in r.headers)
    assert chat(gt, RPM1).status_code == 200  # the counts used none of the key's one request


def test_a_key_expiring_in_the_past_is_refused_on_create_and_update(gt: GatewayThread, tmp_path: Any) -> None:
    past = "2026-12-02T23:00:00Z"  # fifty minutes before the gateway's clock
    r = httpx.post(f"{gt.url}/api/keys", json={"name": "late", "expires_at": past}, timeout=5)
    assert r.status_code == 400 and r.json()["error"]["param"] == "expires_at"
    assert "already in the past" in r.json()["error"]["message"]
    r = httpx.patch(f"{gt.url}/api/keys/total", json={"expires_at": past}, timeout=5)
    assert r.status_code == 400 and r.json()["error"]["param"] == "expires_at"
    assert "already in the past" in r.json()["error"]["message"]
    r = httpx.patch(f"{gt.url}/api/keys/total", json={"expires_at": "2026-12-03T01:00:00Z"}, timeout=5)
    assert r.status_code == 200

    from typer.testing import CliRunner

    from omniroute.cli.main import app as cli_app

    cfg = tmp_path / "cli.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/cli.db'\n")
    run = CliRunner().invoke
    assert run(cli_app, ["keys", "create", "laptop", "--config", str(cfg)]).exit_code == 0
    bad = run(cli_app, ["keys", "update", "laptop", "--expires", "2001-01-01", "--config", str(cfg)])
    assert bad.exit_code == 2 and "--expires" in bad.output and "already in the past" in bad.output


def test_usage_summary_with_until_before_since_is_400_naming_until(gt: GatewayThread) -> None:
    r = httpx.get(f"{gt.url}/api/usage/summary", params={"since": 10, "until": 5}, timeout=5)
    assert r.status_code == 400 and r.json()["error"]["param"] == "until"
    assert r.json()["error"]["message"].startswith("until")


def test_summed_costs_are_rounded_per_group_and_in_the_busiest_keys(
    gt: GatewayThread, fakes: dict[str, FakeProviderThread]
) -> None:
    # three small calls (63 prompt tokens at $1/M plus the answer): their sum is float noise unrounded
    fakes["o"].set_behaviour("model-o", "prompt-63")
    for _ in range(3):
        assert chat(gt, TOTAL).status_code == 200
    gt.advance(1.0)
    r = httpx.get(f"{gt.url}/api/usage/summary", params={"group_by": "key", "since": 0}, timeout=5)
    assert r.status_code == 200, r.text
    group = next(g for g in r.json()["data"] if g["requests"] == 3)
    assert repr(group["cost_usd"]) == repr(round(group["cost_usd"], 9))
    assert group["cost_usd"] == r.json()["total"]["cost_usd"]
    traffic = httpx.get(f"{gt.url}/api/usage/traffic", params={"window": "1h"}, timeout=5).json()
    top = next(k for k in traffic["top_keys"] if k["requests"] == 3)
    assert top["cost_usd"] == group["cost_usd"]
