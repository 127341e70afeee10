"""Logs of a serving process: one access line per request, a "ready on" line at start-up, text by
default and JSON on request (flag or config), and no secret in any line."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_support import Served
from typer.testing import CliRunner

from omniroute.cli.main import app as cli_app
from omniroute.observe.logs import JsonFormatter, TextFormatter
from omniroute.resilience.redact import KEY_SHAPED
from omniroute.testing import FakeProviderThread

CLIENT_KEY = "sk-team-CLIENTkey0123456789abcdef"
WRONG_KEY = "sk-wrong-WRONGkey0123456789abcdef"
UPSTREAM_KEY = "sk-proj-UPSTREAMkey0123456789abcd"
OPAQUE_KEY = "opaque-upstream-secret-0042"
MODEL_KEY = "sk-live-MODELkey0123456789abcdef"  # not key-shaped: only the connection-secret pass finds it


@pytest.fixture
def leaky() -> Iterator[FakeProviderThread]:
    fake = FakeProviderThread(name="leaky").start()
    yield fake
    fake.stop()


def config(fake: FakeProviderThread, tmp: Path, **server: Any) -> dict[str, Any]:
    """Two providers on ``fake`` whose failing models echo the key they were sent, a combo, and a
    client key that ``/v1`` requires."""
    return {
        "database_url": f"sqlite:///{tmp}/gw.db",
        "server": {"require_api_key": True, **server},
        "api_keys": [{"name": "team", "key": CLIENT_KEY}],
        "providers": [
            {"id": "up", "format": "openai", "base_url": f"{fake.base_url}/v1", "models": [{"id": "m"}]},
            {"id": "op", "format": "openai", "base_url": f"{fake.base_url}/v1", "models": [{"id": "m"}]},
        ],
        "connections": [
            {"id": "up-1", "provider": "up", "api_key": UPSTREAM_KEY},
            {"id": "op-1", "provider": "op", "api_key": OPAQUE_KEY},
        ],
        "combos": [{"name": "pair", "strategy": "priority", "targets": ["up/m", "op/m"]}],
        "resilience": {"retries": {"per_target": 0}},
    }


def chat(url: str, model: str, key: str | None = CLIENT_KEY, **extra: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}
    return httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=30)


def test_json_logs_have_one_access_line_per_request_a_ready_line_and_no_secret(
    tmp_path: Path, leaky: FakeProviderThread
) -> None:
    leaky.set_behaviour("m", "fail-500+echo-key+msg-bad_key")  # every upstream echoes its key
    served = Served(tmp_path, config(leaky, tmp_path), "--log-format", "json").wait_ready()
    try:
        responses = [
            chat(served.url, "pair"),  # both upstreams fail echoing their keys → 502
            chat(served.url, "up/m", key=WRONG_KEY),  # 401: a key the gateway does not know
            httpx.post(  # the Gemini surface with the client key in the query
                f"{served.url}/v1beta/models/op/m:generateContent?key={CLIENT_KEY}",
                json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
                timeout=30,
            ),
        ]
        leaky.set_behaviour("m", "")
        responses.append(chat(served.url, "pair", stream=True))  # served by up/m
        responses.append(chat(served.url, f"up/{MODEL_KEY}"))  # a key pasted as the model name
    finally:
        assert served.terminate() == 0
    assert [r.status_code for r in responses] == [503, 401, 503, 200, 200]
    lines = served.json_lines()  # every line is one JSON object
    text = served.log_text()
    for secret in (CLIENT_KEY, WRONG_KEY, UPSTREAM_KEY, OPAQUE_KEY, MODEL_KEY):
        assert secret not in text
    assert not KEY_SHAPED.search(text), KEY_SHAPED.search(text)
    assert leaky.calls() >= 3, "the upstreams were reached and echoed their keys"

    ready = [x for x in lines if x["message"].startswith("ready on ")]
    assert len(ready) == 1
    assert ready[0]["message"] == (
        f"ready on {served.url}/v1 — providers: op, up; combos: pair; console: {served.url}/dashboard"
    )
    access = [x for x in lines if x["logger"] == "omniroute.access"]
    assert [a["request_id"] for a in access] == [r.headers["x-request-id"] for r in responses]
    failed, unknown_key, gemini, streamed, pasted = access
    assert failed["status"] == 503 and failed["route"] == "combo" and failed["strategy"] == "priority"
    assert failed["key"] == "team" and failed["requested_model"] == "pair" and failed["attempts"] == 2
    assert "[redacted]" in failed["error"]
    assert unknown_key["status"] == 401 and "key" not in unknown_key
    assert gemini["key"] == "team" and gemini["path"] == "/v1beta/models/op/m:generateContent"
    assert streamed["status"] == 200 and streamed["model"] == "up/m" and streamed["provider"] == "up"
    assert streamed["connection"] == "up-1" and streamed["attempts"] == 1
    assert streamed["ttft_ms"] is not None and streamed["latency_ms"] >= streamed["ttft_ms"]
    assert streamed["prompt_tokens"] > 0 and streamed["completion_tokens"] > 0
    assert streamed["cost_usd"] >= 0 and streamed["message"] == "POST /v1/chat/completions 200"
    assert pasted["requested_model"] == "up/[redacted]" and pasted["model"] == "up/[redacted]"


def test_json_mode_prints_only_json_lines_from_the_first_line_on(
    tmp_path: Path, leaky: FakeProviderThread
) -> None:
    """With --log-format json, everything serve prints (stdout and stderr, the start-up line
    included) is one JSON object per line."""
    served = Served(tmp_path, config(leaky, tmp_path), "--log-format", "json", with_stdout=True)
    served.wait_ready()
    assert served.terminate() == 0
    lines = served.json_lines()
    starting = [x for x in lines if x["message"].startswith("OmniRoute starting on ")]
    assert len(starting) == 1 and lines[0] == starting[0]
    assert starting[0]["message"].startswith(f"OmniRoute starting on {served.url}/v1 (config: ")
    assert starting[0]["message"].endswith(f"console: {served.url}/dashboard")


def test_the_flag_wins_over_the_config_and_text_lines_are_readable(
    tmp_path: Path, leaky: FakeProviderThread
) -> None:
    served = Served(tmp_path, config(leaky, tmp_path, log_format="json"), "--log-format", "text")
    served.wait_ready()
    try:
        rid = chat(served.url, "up/m").headers["x-request-id"]
    finally:
        assert served.terminate() == 0
    text = served.log_text()
    assert not text.lstrip().startswith("{")
    line = next(x for x in text.splitlines() if f"request_id={rid}" in x)
    assert re.search(
        r" INFO omniroute\.access: POST /v1/chat/completions 200 request_id=\S+ latency_ms=[\d.]+"
        r" route=provider/model key=team requested_model=up/m model=up/m provider=up connection=up-1"
        r" strategy=single attempts=1 prompt_tokens=1 completion_tokens=4 cost_usd=0.0$",
        line,
    ), line
    assert "CLIENTkey" not in text


def test_json_logs_from_the_config_key(tmp_path: Path, leaky: FakeProviderThread) -> None:
    served = Served(tmp_path, config(leaky, tmp_path, log_format="json")).wait_ready()
    try:
        chat(served.url, "up/m")
    finally:
        assert served.terminate() == 0
    assert any(x["logger"] == "omniroute.access" for x in served.json_lines())


@pytest.mark.parametrize("formatter", [JsonFormatter(), TextFormatter()], ids=["json", "text"])
def test_a_key_in_any_log_message_or_traceback_is_redacted(formatter: logging.Formatter) -> None:
    try:
        raise ValueError(f"upstream said: invalid key {UPSTREAM_KEY}")
    except ValueError:
        record = logging.LogRecord(
            "omniroute", logging.ERROR, __file__, 1, "sent %s to %s", (CLIENT_KEY, "x"), sys.exc_info()
        )
    out = formatter.format(record)
    assert "sent [redacted] to x" in out and "invalid key [redacted]" in out
    assert "CLIENTkey" not in out and "UPSTREAMkey" not in out


def test_an_unknown_log_format_is_refused_with_a_message() -> None:
    result = CliRunner().invoke(cli_app, ["serve"], env={"OMNIROUTE_LOG_FORMAT": "xml"})
    assert result.exit_code == 2
    assert "OMNIROUTE_LOG_FORMAT" in result.output and "text, json" in result.output
    flag = CliRunner().invoke(cli_app, ["serve", "--log-format", "xml"])
    assert flag.exit_code == 2 and "--log-format" in flag.output
