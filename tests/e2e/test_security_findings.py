"""The security review's findings replayed, one test each, against the fake providers.

Findings with a module of their own are replayed there: secret leaks (``test_secret_redaction``),
upstream size limits (``test_upstream_limits``), DNS rebinding and non-ASCII credentials
(``test_management_guard``), database file modes (``store/test_file_modes``), deep JSON
(``test_deep_json``), path injection and ``base_url`` policy (``test_security_egress``), the
management surface (``test_security_surface``), permissions on the served model
(``test_security_permissions``), health attribution (``test_health_attribution``) and lost usage
rows (``test_durable_accounting``). This module replays the rest and checks the index above stays
true.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MSGS = [{"role": "user", "content": "hi"}]
HERE = Path(__file__).parent
REPLAYED_ELSEWHERE = [
    "test_secret_redaction.py",
    "test_upstream_limits.py",
    "test_management_guard.py",
    "../store/test_file_modes.py",
    "test_deep_json.py",
    "test_security_egress.py",
    "test_security_surface.py",
    "test_security_permissions.py",
    "test_health_attribution.py",
    "test_durable_accounting.py",
    "test_fuzz.py",
]


def test_every_finding_has_its_replay() -> None:
    missing = [name for name in REPLAYED_ELSEWHERE if not (HERE / name).is_file()]
    assert missing == []


@pytest.fixture(autouse=True)
def restore_behaviours(fakes: dict[str, FakeProviderThread]) -> Iterator[None]:
    yield
    for name, fake in fakes.items():
        fake.set_behaviour(f"model-{name}", f"model-{name}")


@pytest.mark.parametrize(
    ("method", "path", "shape"),
    [
        ("GET", "/v1/messages", "anthropic"),
        ("PUT", "/v1/messages/count_tokens", "anthropic"),
        ("GET", "/v1beta/models/gemini-x:generateContent", "gemini"),
        ("DELETE", "/v1/chat/completions", "openai"),
        ("GET", "/v1/responses", "openai"),
    ],
)
def test_a_405_comes_in_the_routes_own_error_shape(
    gateway: GatewayThread, method: str, path: str, shape: str
) -> None:
    r = httpx.request(method, f"{gateway.url}{path}", timeout=10)
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    body = r.json()
    if shape == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    elif shape == "gemini":
        assert body["error"]["code"] == 405 and body["error"]["status"]
    else:
        assert (
            body["error"]["type"] == "invalid_request_error" and body["error"]["code"] == "method_not_allowed"
        )


@pytest.mark.parametrize("stream", [False, True])
def test_a_malformed_successful_upstream_answer_is_a_clean_failure_and_recorded(
    make_gateway: Callable[..., GatewayThread], fakes: dict[str, FakeProviderThread], stream: bool
) -> None:
    """A 200 whose body is not the promised shape is a failed attempt (falls back), never a 500."""
    gw = make_gateway()
    fakes["o"].set_behaviour("model-o", "malformed-at-1")
    r = httpx.post(
        f"{gw.url}/v1/chat/completions",
        json={"model": "local-o/model-o", "messages": MSGS, "stream": stream},
        timeout=10,
    )
    assert r.status_code != 500 and "Traceback" not in r.text
    if r.status_code >= 400:
        assert r.json()["error"]["message"]
    gw.wait_idle()
    rid = r.headers["x-request-id"]
    decision = httpx.get(f"{gw.url}/api/routing/decisions/{rid}", timeout=10)
    assert decision.status_code == 200, "the request was recorded"
