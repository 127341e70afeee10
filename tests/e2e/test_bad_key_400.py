"""Which 400 marks a connection's credentials invalid: Gemini's bad-key 400 does (the connection is
skipped and the fallback serves); a 400 from an OpenAI-format upstream is the request's fault and is
returned as is, whatever its wording."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_stream_rescue import Rig

from omniroute.testing.gateway import GatewayThread


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def chat(gw: GatewayThread) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=20)


def test_a_gemini_bad_key_400_marks_the_connection_invalid_and_falls_back(rig: Rig) -> None:
    gw = rig.gateway("gemini", "openai")
    rig.a.set_behaviour("m", "fail-400+msg-API_key_not_valid._Please_pass_a_valid_API_key.")
    r = chat(gw)
    assert r.status_code == 200 and r.headers["x-omniroute-provider"] == "pb"
    calls = rig.a.calls("m")
    assert chat(gw).status_code == 200 and rig.a.calls("m") == calls, "the invalid connection is skipped"


def test_an_openai_format_400_worded_like_a_bad_key_is_returned_as_is(rig: Rig) -> None:
    gw = rig.gateway("openai", "openai")
    rig.a.set_behaviour("m", "fail-400+msg-Incorrect_API_key_provided")
    r = chat(gw)
    assert r.status_code == 400 and "Incorrect API key" in r.text
    assert rig.b.calls() == 0
    assert chat(gw).status_code == 400 and rig.a.calls("m") == 2, "the connection is not marked invalid"
