"""Combos (COMBO-1) and model→combo mappings (COMBO-2) in the store."""

from __future__ import annotations

import pytest

from omniroute.store import Store, StoreConflict, StoreNotFound

TARGETS = [{"model": "openai/gpt-4o"}, {"model": "anthropic/claude-sonnet-4", "weight": 2}]


async def test_create_get_list_combo(store: Store) -> None:
    """COMBO-1: a combo round-trips and is found by id or by name."""
    c = await store.create_combo(
        {"name": "fast", "strategy": "weighted", "targets": TARGETS, "config": {"timeout_ms": 500}}
    )
    assert len(c["id"]) == 32 and c["enabled"] is True and c["description"] == ""
    assert c["targets"] == TARGETS and c["config"] == {"timeout_ms": 500}
    assert await store.get_combo(c["id"]) == c
    assert await store.get_combo("fast") == c
    assert await store.get_combo("slow") is None
    await store.create_combo({"name": "a-first", "sort_order": -1})
    assert [x["name"] for x in await store.list_combos()] == ["a-first", "fast"]


async def test_duplicate_combo_name_conflicts(store: Store) -> None:
    """COMBO-1: unique names (the API answers 400)."""
    await store.create_combo({"name": "dup"})
    with pytest.raises(StoreConflict):
        await store.create_combo({"name": "dup"})
    other = await store.create_combo({"name": "other"})
    with pytest.raises(StoreConflict):
        await store.update_combo(other["id"], {"name": "dup"})
    assert isinstance(StoreConflict("x"), ValueError)


async def test_update_combo_is_partial(store: Store) -> None:
    c = await store.create_combo({"name": "x", "targets": TARGETS, "description": "d"})
    up = await store.update_combo(c["id"], {"strategy": "round-robin", "enabled": False, "id": "ignored"})
    assert up is not None
    assert (up["strategy"], up["enabled"], up["targets"], up["description"]) == (
        "round-robin",
        False,
        TARGETS,
        "d",
    )
    assert up["updated_at"] >= c["updated_at"] and up["id"] == c["id"]
    assert await store.update_combo("missing", {"strategy": "priority"}) is None
    with pytest.raises(ValueError, match="unknown combo field"):
        await store.update_combo(c["id"], {"stratgy": "typo"})
    with pytest.raises(ValueError):
        await store.create_combo({"strategy": "priority"})


async def test_upsert_combo_by_name_keeps_the_id(store: Store) -> None:
    """Config load: re-declaring a combo updates it in place."""
    first = await store.upsert_combo_by_name({"name": "cfg", "targets": TARGETS})
    second = await store.upsert_combo_by_name({"name": "cfg", "strategy": "random"})
    assert second["id"] == first["id"] and second["strategy"] == "random" and second["targets"] == TARGETS
    assert len(await store.list_combos()) == 1


async def test_mapping_requires_an_existing_combo(store: Store) -> None:
    """COMBO-2: a mapping must point at a combo (by id or name)."""
    with pytest.raises(StoreNotFound):
        await store.create_mapping({"pattern": "gpt-*", "combo_id": "nope"})
    c = await store.create_combo({"name": "target"})
    m = await store.create_mapping({"pattern": "gpt-*", "combo": "target", "priority": 10})
    assert (m["combo_id"], m["combo_name"], m["priority"], m["enabled"]) == (c["id"], "target", 10, True)
    assert await store.get_mapping(m["id"]) == m
    with pytest.raises(StoreNotFound):
        await store.update_mapping(m["id"], {"combo_id": "nope"})


async def test_mappings_are_listed_highest_priority_first(store: Store) -> None:
    """RES step 3: highest ``priority`` first."""
    await store.create_combo({"name": "c"})
    for pattern, prio in (("a*", 1), ("b*", 20), ("c*", 5)):
        await store.create_mapping({"pattern": pattern, "combo": "c", "priority": prio})
    assert [m["pattern"] for m in await store.list_mappings()] == ["b*", "c*", "a*"]


async def test_update_and_delete_mapping(store: Store) -> None:
    await store.create_combo({"name": "c1"})
    c2 = await store.create_combo({"name": "c2"})
    m = await store.create_mapping({"pattern": "x*", "combo": "c1"})
    up = await store.update_mapping(m["id"], {"combo": "c2", "enabled": False, "description": "off"})
    assert (
        up is not None
        and up["combo_id"] == c2["id"]
        and up["enabled"] is False
        and up["description"] == "off"
    )
    assert await store.update_mapping("missing", {"enabled": True}) is None
    again = await store.upsert_mapping_by_pattern({"pattern": "x*", "combo": "c1", "priority": 3})
    assert again["id"] == m["id"] and again["priority"] == 3
    cfg = await store.upsert_mapping_from_config("x*", "c2", 7, True, "from config")
    assert (cfg["id"], cfg["combo_name"], cfg["priority"], cfg["description"]) == (
        m["id"],
        "c2",
        7,
        "from config",
    )
    assert len(await store.list_mappings()) == 1
    assert await store.delete_mapping(m["id"]) is True
    assert await store.delete_mapping(m["id"]) is False


async def test_deleting_a_combo_cascades_to_its_mappings(store: Store) -> None:
    """COMBO-2: ``ON DELETE CASCADE`` removes the combo's mappings (SQLite foreign keys are on)."""
    await store.create_combo({"name": "gone"})
    keep = await store.create_combo({"name": "kept"})
    await store.create_mapping({"pattern": "a*", "combo": "gone"})
    await store.create_mapping({"pattern": "b*", "combo": "gone"})
    await store.create_mapping({"pattern": "c*", "combo_id": keep["id"]})
    assert await store.delete_combo("gone") is True
    assert [m["pattern"] for m in await store.list_mappings()] == ["c*"]
    assert await store.delete_combo("gone") is False


async def test_combo_without_description_upserts_from_config(store: Store) -> None:
    """Regression: a config combo with no description (None) is stored, not reported as vanished."""
    saved = await store.upsert_combo_by_name(
        {
            "name": "nodesc",
            "strategy": "priority",
            "description": None,
            "targets": [{"model": "a/b"}],
            "config": {},
        }
    )
    assert saved["description"] == ""
    again = await store.upsert_combo_by_name(
        {"name": "nodesc", "strategy": "priority", "description": None, "targets": [], "config": {}}
    )
    assert again["id"] == saved["id"]
