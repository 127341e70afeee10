"""``omniroute keys``: create, list and revoke client API keys (API-8) through the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from omniroute.config import Config
from omniroute.store import Store

if TYPE_CHECKING:
    from omniroute.cli.common import LazyConsole


async def _open(cfg: Config) -> Store:
    from omniroute.gateway import data_dir_for

    return await Store.open(cfg.database_url, data_dir=data_dir_for(cfg.database_url))


async def create_key(cfg: Config, name: str, allowed: tuple[str, ...], budget_usd: float | None) -> str:
    """Create a key and return its plaintext (shown once)."""
    store = await _open(cfg)
    try:
        _, plaintext = await store.create_api_key(name, allowed_models=allowed, budget_usd=budget_usd)
        return plaintext
    finally:
        await store.close()


async def list_keys(cfg: Config, console: LazyConsole) -> None:
    store = await _open(cfg)
    try:
        table = Table("id", "name", "prefix", "allowed models", "budget $", "spent $", "revoked")
        for k in await store.list_api_keys():
            table.add_row(
                str(k["id"]),
                k["name"],
                str(k.get("key_prefix", "")),
                ",".join(k.get("allowed_models") or []),
                str(k.get("budget_usd") or "-"),
                f"{float(k.get('spent_usd') or 0):.4f}",
                "yes" if k.get("revoked") else "no",
            )
        console.print(table)
    finally:
        await store.close()


async def revoke_key(cfg: Config, key: str) -> bool:
    store = await _open(cfg)
    try:
        return await store.revoke_api_key(key)
    finally:
        await store.close()
