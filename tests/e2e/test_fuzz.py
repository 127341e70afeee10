"""Fuzzing every client route and every management operation with hypothesis (bounded: 50 examples
per client route, 10 per management operation, seeded): no 500, no traceback, and every error in
the route's own wire shape (OpenAI, Anthropic or Gemini error body)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from omniroute.app import create_app
from omniroute.config import Config, config_from_dict
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MSGS = [{"role": "user", "content": "hi"}]
CLIENT_ROUTES: dict[str, tuple[str, dict[str, Any]]] = {
    "/v1/chat/completions": ("openai", {"model": "p/m", "messages": MSGS, "max_tokens": 5}),
    "/v1/responses": ("openai", {"model": "p/m", "input": "hi"}),
    "/v1/embeddings": ("openai", {"model": "p/m", "input": "hi"}),
    "/v1/messages": ("anthropic", {"model": "p/m", "max_tokens": 5, "messages": MSGS}),
    "/v1/messages/count_tokens": ("anthropic", {"model": "p/m", "messages": MSGS}),
    "/v1beta/models/p/m:generateContent": (
        "gemini",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
}


def _management_operations() -> list[tuple[str, str, bool]]:
    """``(method, path template, has a JSON body)`` of every operation the OpenAPI document lists."""
    spec = create_app(Config()).admin.openapi()
    return sorted(
        (method.upper(), path, "requestBody" in op)
        for path, item in spec["paths"].items()
        for method, op in item.items()
        if method in ("get", "post", "put", "delete", "patch")
    )


OPERATIONS = _management_operations()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> Any:
    """A body near ``base``: one field replaced, removed or added, or something else entirely."""
    how = draw(st.sampled_from(["replace", "drop", "add", "whole"]))
    body = dict(base)
    if how == "whole":
        return draw(json_values)
    key = draw(st.sampled_from(sorted(base)))
    if how == "replace":
        body[key] = draw(json_values)
    elif how == "drop":
        body.pop(key)
    else:
        body[draw(st.text(max_size=12))] = draw(json_values)
    return body


def assert_error_shape(r: httpx.Response, shape: str) -> None:
    assert r.status_code != 500 and r.status_code < 600, r.text[:300]
    assert "Traceback" not in r.text
    if r.status_code < 400:
        return
    body = r.json()
    if shape == "anthropic":
        assert body["type"] == "error" and isinstance(body["error"]["message"], str), body
    elif shape == "gemini":
        assert body["error"]["code"] == r.status_code and isinstance(body["error"]["message"], str), body
    else:
        assert isinstance(body["error"]["message"], str) and "type" in body["error"], body


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    with FakeProviderThread(name="fuzz") as fake:
        data = {
            "database_url": f"sqlite:///{tmp}/gw.db",
            "providers": [{"id": "p", "base_url": f"{fake.base_url}/v1", "models": [{"id": "m"}]}],
            "connections": [{"id": "c", "provider": "p", "api_key": "k"}],
        }
        gateway = GatewayThread(config_from_dict(data, env={})).start()
        yield gateway
        gateway.stop()


@pytest.fixture(scope="module")
def http(gw: GatewayThread) -> Iterator[httpx.Client]:
    """One kept-alive client for every example."""
    with httpx.Client(base_url=gw.url, timeout=30) as c:
        yield c


FUZZ = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], database=None
)


@pytest.mark.parametrize("path", sorted(CLIENT_ROUTES))
def test_client_routes_never_500(http: httpx.Client, path: str) -> None:
    shape, base = CLIENT_ROUTES[path]

    @seed(20260)
    @FUZZ
    @given(body=mutated(base))
    def run(body: Any) -> None:
        r = http.post(path, content=json.dumps(body))
        assert_error_shape(r, shape)

    run()


path_values = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)


@pytest.mark.parametrize(("method", "template", "has_body"), OPERATIONS)
def test_management_operations_never_500(
    http: httpx.Client, method: str, template: str, has_body: bool
) -> None:
    @seed(20261)
    @settings(FUZZ, max_examples=10)
    @given(params=st.lists(path_values, min_size=4, max_size=4), body=json_values)
    def run(params: list[str], body: Any) -> None:
        path = template
        for value in params:
            if "{" not in path:
                break
            start, end = path.index("{"), path.index("}")
            path = path[:start] + quote(value, safe="") + path[end + 1 :]
        content = json.dumps(body) if has_body else None
        r = http.request(method, path, content=content)
        assert_error_shape(r, "openai")

    run()
