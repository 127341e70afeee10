"""``omniroute doctor``: config, database and upstream reachability checks (OPS-1)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omniroute.config import Config
from omniroute.errors import UpstreamError

if TYPE_CHECKING:
    from omniroute.cli.common import LazyConsole


async def run_doctor(cfg: Config, console: LazyConsole) -> bool:
    """Print one line per check; True when everything passed."""
    from omniroute.gateway import Gateway

    ok = True
    console.print(f"[green]ok[/green]   config {cfg.source_path or '(defaults)'}")
    gw = Gateway(cfg)
    try:
        await gw.start()
    except Exception as exc:
        console.print(f"[red]fail[/red] database {cfg.database_url}: {exc}")
        return False
    try:
        console.print(f"[green]ok[/green]   database {cfg.database_url}")
        for provider_id, conns in gw.registry.connections.items():
            provider = gw.registry.catalog.provider(provider_id)
            if provider is None:
                console.print(
                    f"[red]fail[/red] connection(s) {', '.join(c.id for c in conns)}: "
                    f"unknown provider '{provider_id}'"
                )
                ok = False
                continue
            for c in conns:
                url = (c.base_url or provider.base_url).rstrip("/") + "/models"
                headers = {"Authorization": f"Bearer {c.secret}"} if c.secret else {}
                try:
                    status, _ = await gw.client.get(url, headers)
                    good = status < 500 and status not in (401, 403)
                    ok = ok and good
                    mark = "[green]ok[/green]  " if good else "[red]fail[/red]"
                    console.print(f"{mark} {provider_id}/{c.id}: GET {url} → {status}")
                except UpstreamError as exc:
                    ok = False
                    console.print(f"[red]fail[/red] {provider_id}/{c.id}: {exc.message}")
    finally:
        await gw.stop()
    return ok
