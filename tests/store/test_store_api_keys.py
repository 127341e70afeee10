"""Client API keys (API-8): hashed at rest, verify, revoke, spend, config precedence."""

from __future__ import annotations

import hashlib

import pytest
from sqlalchemy import text

from omniroute.store import Store, StoreConflict, hash_key


async def test_generated_key_is_shown_once_and_stored_hashed(store: Store) -> None:
    """API-8: only the SHA-256 hash and an 8-char prefix are stored."""
    record, plaintext = await store.create_api_key("ci", allowed_models=["openai/*"], budget_usd=5.0)
    assert plaintext.startswith("sk-or-") and len(plaintext) > 40
    assert record["key_prefix"] == plaintext[:8]
    assert record["allowed_models"] == ["openai/*"] and record["budget_usd"] == 5.0
    async with store.engine.connect() as conn:
        row = (await conn.execute(text("SELECT key_hash, key_prefix FROM api_keys"))).one()
    assert row[0] == hashlib.sha256(plaintext.encode()).hexdigest()
    listed = await store.list_api_keys()
    assert listed == [record]
    assert all(plaintext not in str(v) and "hash" not in k for k, v in listed[0].items())


async def test_verify_accepts_the_key_and_rejects_others(store: Store) -> None:
    record, plaintext = await store.create_api_key("app")
    verified = await store.verify_api_key(plaintext)
    assert verified is not None and verified["id"] == record["id"] and verified["allowed_models"] == ["*"]
    assert await store.verify_api_key(plaintext + "x") is None
    assert await store.verify_api_key("") is None


async def test_revoked_key_no_longer_verifies(store: Store) -> None:
    """API-8: revoking by id or name stops the key at once."""
    rec, k1 = await store.create_api_key("one")
    _, k2 = await store.create_api_key("two")
    assert await store.revoke_api_key(rec["id"]) is True
    assert await store.revoke_api_key("two") is True
    assert await store.revoke_api_key("nope") is False
    assert await store.verify_api_key(k1) is None
    assert await store.verify_api_key(k2) is None
    assert all(r["revoked"] for r in await store.list_api_keys())


async def test_duplicate_name_or_key_conflicts(store: Store) -> None:
    await store.create_api_key("dup", key="sk-fixed-key-aaaaaaaaaaaaaaaa")
    with pytest.raises(StoreConflict):
        await store.create_api_key("dup")
    with pytest.raises(StoreConflict):
        await store.create_api_key("other", key="sk-fixed-key-aaaaaaaaaaaaaaaa")


async def test_add_spend_accumulates_and_stamps_last_use(store: Store) -> None:
    """API-8 budgets: spend is added atomically in USD."""
    rec, k = await store.create_api_key("spender", budget_usd=1.0)
    await store.add_spend(rec["id"], 0.25)
    await store.add_spend(rec["id"], 0.5)
    v = await store.verify_api_key(k)
    assert v is not None and v["spent_usd"] == pytest.approx(0.75) and v["last_used_at"] is not None


async def test_config_key_wins_over_the_stored_copy(store: Store) -> None:
    """API-8: a key declared in config replaces the stored key of the same name (spend kept)."""
    rec, old = await store.create_api_key("svc", allowed_models=["*"])
    await store.add_spend(rec["id"], 0.1)
    await store.revoke_api_key("svc")
    new = "sk-config-key-0123456789abcdef"
    got = await store.upsert_api_key_from_config("svc", new, ["gpt-*"], 2.0)
    assert got["id"] == rec["id"] and got["revoked"] is False and got["allowed_models"] == ["gpt-*"]
    assert got["budget_usd"] == 2.0 and got["spent_usd"] == pytest.approx(0.1)
    assert await store.verify_api_key(old) is None
    assert (await store.verify_api_key(new) or {}).get("name") == "svc"
    # the same key under a new name moves to that name; re-applying is idempotent
    moved = await store.upsert_api_key_from_config("svc2", new, ["*"], None)
    await store.upsert_api_key_from_config("svc2", new, ["*"], None)
    assert [r["name"] for r in await store.list_api_keys()] == ["svc2"]
    assert (await store.verify_api_key(new) or {}).get("id") == moved["id"]


async def test_auth_cache_listing_carries_hashes_of_live_keys_only(store: Store) -> None:
    """API-8: ``api_keys_for_auth`` feeds an in-memory lookup by ``hash_key``; revoked keys are absent."""
    live, k_live = await store.create_api_key("live")
    await store.create_api_key("dead")
    await store.revoke_api_key("dead")
    by_hash = {r["key_hash"]: r for r in await store.api_keys_for_auth()}
    assert list(by_hash) == [hash_key(k_live)]
    assert by_hash[hash_key(k_live)]["id"] == live["id"]
