"""``omniroute providers list`` and ``omniroute connections list`` (OPS-1): what the gateway would
route to, from the same catalog and store the gateway uses; secrets are masked (PROV-3)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from omniroute.cli.common import ConfigOpt, console, load_or_exit

providers_app = typer.Typer(help="Providers of the catalog and config.", no_args_is_help=True)
connections_app = typer.Typer(help="Connections: accounts of providers.", no_args_is_help=True)


async def _rows(config: Path | None) -> tuple[list[list[str]], list[list[str]]]:
    from omniroute.bootstrap import build_catalog, load_config_into_store
    from omniroute.gateway import data_dir_for
    from omniroute.store import Store

    cfg = load_or_exit(config)
    store = await Store.open(cfg.database_url, data_dir=data_dir_for(cfg.database_url))
    try:
        await load_config_into_store(cfg, store)
        conns = await store.list_connections_public()
        catalog = build_catalog(cfg, await store.list_provider_nodes(), None)
    finally:
        await store.close()
    connected = {c["provider"] for c in conns if c.get("is_active")}
    providers = [
        [p.id, p.format, p.base_url, str(len(p.models)), "yes" if p.id in connected else "no"]
        for p in catalog.providers
    ]
    connections = [
        [
            c["id"],
            c["provider"],
            str(c["priority"]),
            "yes" if c["is_active"] else "no",
            c.get("api_key") or c.get("access_token") or "",
            ",".join(c.get("tags") or []),
        ]
        for c in conns
    ]
    return providers, connections


@providers_app.command("list")
def providers_list(config: ConfigOpt = None) -> None:
    """Every provider with its format, base URL, model count and whether it has an active connection."""
    from rich.table import Table

    providers, _ = asyncio.run(_rows(config))
    table = Table("provider", "format", "base_url", "models", "connected")
    for row in providers:
        table.add_row(*row)
    console.print(table)


@connections_app.command("list")
def connections_list(config: ConfigOpt = None) -> None:
    """Every stored connection (config ones included), secrets masked."""
    from rich.table import Table

    _, connections = asyncio.run(_rows(config))
    table = Table("id", "provider", "priority", "active", "secret", "tags")
    for row in connections:
        table.add_row(*row)
    console.print(table)
