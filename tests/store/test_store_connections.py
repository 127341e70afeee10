"""Connections (PROV-3) and custom provider nodes (PROV-2) in the store."""

from __future__ import annotations

import orjson

from omniroute.store import Store
from omniroute.values import Connection

KEY = "sk-ant-api03-secretsecretsecret-WXYZ"


def _conn(**kw: object) -> Connection:
    base: dict[str, object] = {
        "id": "anthropic-1",
        "provider": "anthropic",
        "name": "main",
        "api_key": KEY,
        "priority": 2,
        "account_tier": "pro",
        "max_concurrent": 4,
        "tags": ("team-a", "prod"),
        "default_model": "claude-sonnet-4",
    }
    base.update(kw)
    return Connection(**base)  # type: ignore[arg-type]


async def test_connection_round_trips_with_decrypted_secret(store: Store) -> None:
    """PROV-3: every field survives the round trip; the secret is decrypted on read."""
    c = _conn()
    await store.upsert_connection(c)
    assert await store.get_connection("anthropic-1") == c
    assert await store.list_connections() == [c]
    assert await store.get_connection("missing") is None


async def test_connections_are_listed_by_priority(store: Store) -> None:
    await store.upsert_connection(_conn(id="b", priority=2))
    await store.upsert_connection(_conn(id="a", priority=3))
    await store.upsert_connection(_conn(id="c", priority=1))
    assert [c.id for c in await store.list_connections()] == ["c", "b", "a"]


async def test_public_listing_masks_secrets(store: Store) -> None:
    """PROV-3: the management listing never carries a plaintext secret."""
    await store.upsert_connection(_conn())
    await store.upsert_connection(
        Connection(id="o", provider="gemini", auth_type="oauth", access_token="ya29.tokentokentoken1234")
    )
    public = await store.list_connections_public()
    dumped = orjson.dumps(public).decode()
    assert KEY not in dumped and "ya29.tokentokentoken1234" not in dumped
    by_id = {p["id"]: p for p in public}
    assert by_id["anthropic-1"]["api_key"] == "sk-ant-…WXYZ"
    assert by_id["o"]["access_token"] == "…1234"
    assert by_id["o"]["api_key"] == ""
    assert by_id["anthropic-1"]["tags"] == ["team-a", "prod"]
    assert by_id["anthropic-1"]["test_status"] == "untested"


async def test_state_update_touches_only_given_fields(store: Store) -> None:
    """PROV-3 runtime state: partial updates; ``None`` clears a nullable field."""
    await store.upsert_connection(_conn())
    await store.update_connection_state("anthropic-1", rate_limited_until=1234.5, backoff_level=2)
    await store.update_connection_state("anthropic-1", test_status="ok", last_error="boom")
    assert await store.connection_state("anthropic-1") == {
        "rate_limited_until": 1234.5,
        "backoff_level": 2,
        "test_status": "ok",
        "last_error": "boom",
    }
    await store.update_connection_state("anthropic-1", last_error=None)
    state = await store.connection_state("anthropic-1")
    assert state["last_error"] is None and state["backoff_level"] == 2
    await store.update_connection_state("missing", backoff_level=1)  # ignored
    assert await store.connection_state("missing") == {}


async def test_upsert_replaces_config_but_keeps_runtime_state(store: Store) -> None:
    await store.upsert_connection(_conn())
    await store.update_connection_state("anthropic-1", backoff_level=3, test_status="failed")
    await store.upsert_connection(_conn(api_key="sk-ant-rotated-key-000000", priority=9, tags=()))
    c = await store.get_connection("anthropic-1")
    assert c is not None and c.api_key == "sk-ant-rotated-key-000000" and c.priority == 9 and c.tags == ()
    assert (await store.connection_state("anthropic-1"))["backoff_level"] == 3


async def test_delete_connection(store: Store) -> None:
    await store.upsert_connection(_conn())
    assert await store.delete_connection("anthropic-1") is True
    assert await store.delete_connection("anthropic-1") is False
    assert await store.list_connections() == []


async def test_provider_nodes_crud(store: Store) -> None:
    """PROV-2: custom providers persist with aliases and models."""
    node = {
        "id": "my-vllm",
        "format": "openai",
        "base_url": "http://127.0.0.1:8000/v1",
        "name": "vLLM",
        "aliases": ["vllm"],
        "models": [{"id": "llama-3-8b", "input_price": 0.1}],
    }
    await store.upsert_provider_node(node)
    await store.upsert_provider_node({**node, "name": "vLLM box"})
    nodes = await store.list_provider_nodes()
    assert len(nodes) == 1
    assert {k: nodes[0][k] for k in node} == {**node, "name": "vLLM box"}
    assert await store.delete_provider_node("my-vllm") is True
    assert await store.delete_provider_node("my-vllm") is False
