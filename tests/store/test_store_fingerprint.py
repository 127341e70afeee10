"""The snapshot fingerprint a running gateway polls to notice writes by another process (API-8, OPS-1)."""

from __future__ import annotations

from omniroute.store import Store


async def test_fingerprint_changes_on_key_create_revoke_and_combo_edits(store: Store) -> None:
    """Every write the CLI can make changes the fingerprint; so the gateway refreshes within a poll."""
    seen = [await store.snapshot_fingerprint()]

    async def changed() -> None:  # differs from the previous poll (a create+delete may restore an older one)
        fp = await store.snapshot_fingerprint()
        assert fp != seen[-1]
        seen.append(fp)

    await store.create_api_key("laptop")
    await changed()
    assert await store.revoke_api_key("laptop") is True
    await changed()
    await store.create_combo({"name": "c1", "targets": []})
    await changed()
    await store.update_combo("c1", {"description": "edited"})
    await changed()
    assert await store.delete_combo("c1") is True
    await changed()
    await store.set_chain("m", [{"provider": "p", "priority": 1, "enabled": True}])
    await changed()


async def test_fingerprint_ignores_spend_so_traffic_does_not_trigger_refreshes(store: Store) -> None:
    """Spend is written on every request batch; it must not make the gateway rebuild its snapshot."""
    rec, _ = await store.create_api_key("busy")
    before = await store.snapshot_fingerprint()
    await store.add_spend(rec["id"], 0.25)
    assert await store.snapshot_fingerprint() == before
