"""JSON nested deeper than the gateway accepts (``MAX_JSON_DEPTH``, e.g. in a tool schema) is a 400
in the client's own wire format naming the problem, never a 500 when the body is rebuilt for the
upstream; a body exactly at the limit is served."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from omniroute.api.asgi import MAX_JSON_DEPTH
from omniroute.testing.gateway import GatewayThread

MODEL = "local-o/model-o"
MSGS = [{"role": "user", "content": "hi"}]


def schema(levels: int) -> dict[str, Any]:
    """A JSON schema that is ``levels`` objects deep."""
    inner: dict[str, Any] = {"type": "string"}
    for _ in range(levels - 1):
        inner = {"x": inner}
    return inner


def request(route: str, levels: int) -> tuple[str, dict[str, Any]]:
    """(path, body) whose deepest point is ``levels`` deep counting the body object itself."""
    if route == "chat":  # body > tools[] > tool > function > parameters…
        tool = {"type": "function", "function": {"name": "f", "parameters": schema(levels - 4)}}
        return "/v1/chat/completions", {"model": MODEL, "messages": MSGS, "tools": [tool]}
    if route == "responses":  # body > tools[] > tool > parameters…
        tool = {"type": "function", "name": "f", "parameters": schema(levels - 3)}
        return "/v1/responses", {"model": MODEL, "input": "hi", "tools": [tool]}
    if route == "messages":  # body > tools[] > tool > input_schema…
        tool = {"name": "f", "input_schema": schema(levels - 3)}
        return "/v1/messages", {"model": MODEL, "max_tokens": 20, "messages": MSGS, "tools": [tool]}
    # gemini: body > tools[] > tool > functionDeclarations[] > declaration > parameters…
    tool = {"functionDeclarations": [{"name": "f", "parameters": schema(levels - 5)}]}
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "tools": [tool]}
    return f"/v1beta/models/{MODEL}:generateContent", body


ROUTES = ["chat", "responses", "messages", "gemini"]


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 255])
@pytest.mark.parametrize("route", ROUTES)
def test_too_deep_json_is_a_400_in_the_clients_format(
    gateway: GatewayThread, route: str, levels: int
) -> None:
    path, body = request(route, levels)
    r = httpx.post(f"{gateway.url}{path}", json=body, timeout=10)
    assert r.status_code == 400, r.text
    data = r.json()
    if route == "messages":
        assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"
    elif route == "gemini":
        assert data["error"]["status"] == "INVALID_ARGUMENT"
    else:
        assert data["error"]["param"] == "body"
    assert f"deeper than {MAX_JSON_DEPTH} levels" in r.text


@pytest.mark.parametrize("route", ROUTES)
def test_json_at_the_depth_limit_is_served(gateway: GatewayThread, route: str) -> None:
    path, body = request(route, MAX_JSON_DEPTH)
    r = httpx.post(f"{gateway.url}{path}", json=body, timeout=10)
    assert r.status_code == 200, r.text


def test_too_deep_embeddings_input_is_a_400(gateway: GatewayThread) -> None:
    r = httpx.post(
        f"{gateway.url}/v1/embeddings", json={"model": MODEL, "input": "x", "extra": schema(300)}, timeout=10
    )
    assert r.status_code == 400 and "deeper than" in r.text
