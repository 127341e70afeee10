"""Declarative fallback chains (RESIL-4) and per-key auto-combo exclusions (AUTO-2)."""

from __future__ import annotations

import pytest

from omniroute.store import Store


async def test_chains_set_list_replace_delete(store: Store) -> None:
    """RESIL-4: chains persist per model, entries ordered lower priority first."""
    saved = await store.set_chain(
        "gpt-4o",
        [{"provider": "anthropic", "priority": 1, "enabled": False}, {"provider": "openai", "priority": 0}],
    )
    assert saved == [
        {"provider": "openai", "priority": 0, "enabled": True},
        {"provider": "anthropic", "priority": 1, "enabled": False},
    ]
    await store.set_chain("llama", [{"provider": "groq"}, {"provider": "together"}])
    chains = await store.list_chains()
    assert chains["gpt-4o"] == saved
    assert chains["llama"] == [
        {"provider": "groq", "priority": 0, "enabled": True},
        {"provider": "together", "priority": 1, "enabled": True},
    ]
    await store.set_chain("gpt-4o", [{"provider": "azure", "priority": 0}])
    assert (await store.list_chains())["gpt-4o"] == [{"provider": "azure", "priority": 0, "enabled": True}]
    assert await store.delete_chain("gpt-4o") is True
    assert await store.delete_chain("gpt-4o") is False
    assert list(await store.list_chains()) == ["llama"]


async def test_chain_entry_needs_a_provider(store: Store) -> None:
    with pytest.raises(ValueError, match="provider"):
        await store.set_chain("m", [{"priority": 0}])


async def test_exclusions_are_per_key_and_channel(store: Store) -> None:
    """AUTO-2: exclusions are stored per API key and channel; adding twice is harmless."""
    await store.add_exclusion("key1", "auto", "openai/gpt-4o@c1")
    await store.add_exclusion("key1", "auto", "openai/gpt-4o@c1")
    await store.add_exclusion("key1", "auto", "groq/llama@c2")
    await store.add_exclusion("key1", "auto/coding", "groq/llama@c2")
    await store.add_exclusion(None, "auto", "x/y@z")
    assert await store.list_exclusions("key1", "auto") == {"openai/gpt-4o@c1", "groq/llama@c2"}
    assert await store.list_exclusions("key1", "auto/coding") == {"groq/llama@c2"}
    assert await store.list_exclusions("key2", "auto") == set()
    assert await store.list_exclusions(None, "auto") == {"x/y@z"}
    assert await store.remove_exclusion("key1", "auto", "groq/llama@c2") is True
    assert await store.remove_exclusion("key1", "auto", "groq/llama@c2") is False
    assert await store.list_exclusions("key1", "auto") == {"openai/gpt-4o@c1"}
