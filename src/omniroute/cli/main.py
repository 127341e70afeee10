"""``omniroute`` command line (OPS-1): a thin shell over the same services the management API uses
(DESIGN house style 13). Command groups live in their own modules and are attached here."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from omniroute.cli.combos import app as combos_app
from omniroute.cli.common import ConfigOpt, console, err_console, load_or_exit
from omniroute.cli.inventory import connections_app, providers_app
from omniroute.config import ConfigError, load_config

app = typer.Typer(help="OmniRoute: a self-hosted AI gateway.", no_args_is_help=True, add_completion=False)
keys_app = typer.Typer(help="Client API keys.", no_args_is_help=True)
catalog_app = typer.Typer(help="The provider/model catalog.", no_args_is_help=True)
secrets_app = typer.Typer(help="The key that encrypts stored connection secrets.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")
app.add_typer(secrets_app, name="secrets")
app.add_typer(catalog_app, name="catalog")
app.add_typer(combos_app, name="combos")
app.add_typer(providers_app, name="providers")
app.add_typer(connections_app, name="connections")
_load = load_or_exit


def _print_version(value: bool) -> None:
    if value:
        from omniroute import __version__

        typer.echo(f"omniroute {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", callback=_print_version, is_eager=True),
    ] = False,
) -> None:
    """OmniRoute: a self-hosted AI gateway."""


def _setup_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("OMNIROUTE_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)  # migration chatter on every start


@app.command()
def serve(
    config: ConfigOpt = None,
    host: Annotated[str | None, typer.Option(help="Bind address (overrides server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (overrides server.port).")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (overrides server.workers).")] = None,
) -> None:
    """Run the gateway. With no config it serves built-in simulated providers (offline, no keys)."""
    import uvicorn

    from omniroute.api.protocol import HeaderDeadlineProtocol

    _setup_logging()
    cfg = _load(config)
    try:
        cfg = cfg.with_overrides(host=host, port=port, workers=workers)
    except ConfigError as exc:
        err_console.print(f"[red]Invalid option:[/red] {exc}")
        raise typer.Exit(2) from None
    if cfg.source_path is not None:
        os.environ["OMNIROUTE_CONFIG"] = str(cfg.source_path)
    os.environ["OMNIROUTE_HOST"], os.environ["OMNIROUTE_PORT"] = cfg.server.host, str(cfg.server.port)
    typer.echo(  # plain: the serving process need not load rich for one line (PERF-5)
        f"OmniRoute starting on http://{cfg.server.host}:{cfg.server.port}/v1 "
        f"(config: {cfg.source_path or 'none — simulated providers when nothing is configured'}); "
        f"console: http://{cfg.server.host}:{cfg.server.port}/dashboard"
    )
    uvicorn.run(
        "omniroute.cli.main:app_factory",
        factory=True,
        host=cfg.server.host,
        port=cfg.server.port,
        workers=cfg.server.workers,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http=HeaderDeadlineProtocol,
        timeout_keep_alive=cfg.server.header_timeout_s,
        lifespan="on",
    )


def app_factory() -> object:
    """uvicorn factory: builds the app from ``$OMNIROUTE_CONFIG`` in each worker process."""
    from omniroute.app import create_app

    _setup_logging()
    cfg = load_config(os.environ.get("OMNIROUTE_CONFIG") or None)
    host, port = os.environ.get("OMNIROUTE_HOST"), os.environ.get("OMNIROUTE_PORT")
    cfg = cfg.with_overrides(host=host, port=int(port) if port else None)
    return create_app(cfg, tune_gc=True, reload_on_sighup=True)


@app.command()
def demo(
    port: Annotated[int, typer.Option(help="Gateway port.")] = 20128,
    host: Annotated[str, typer.Option(help="Bind address.")] = "127.0.0.1",
) -> None:
    """Run the gateway with simulated providers and a sample combo, and print a working curl line."""
    from omniroute.cli.demo import run_demo

    _setup_logging()
    run_demo(host, port)


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Argument(help="A name for the key.")],
    config: ConfigOpt = None,
    allowed_models: Annotated[
        list[str] | None, typer.Option("--allow", help="Glob of allowed models.")
    ] = None,
    budget_usd: Annotated[float | None, typer.Option("--budget", help="Spend cap in USD.")] = None,
) -> None:
    """Create a client API key and print it once (it is stored hashed)."""
    from omniroute.cli.keys import create_key
    from omniroute.store.errors import StoreConflict

    if not name.strip():
        err_console.print("[red]The key name must not be empty.[/red]")
        raise typer.Exit(2)
    cfg = _load(config)
    try:
        plaintext = asyncio.run(create_key(cfg, name, tuple(allowed_models or ["*"]), budget_usd))
    except StoreConflict as exc:
        err_console.print(f"[red]Cannot create key:[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(f"Created key '{name}'. It is shown once; store it now:")
    print(plaintext)


@keys_app.command("list")
def keys_list(config: ConfigOpt = None) -> None:
    """List keys (prefix only)."""
    from omniroute.cli.keys import list_keys

    asyncio.run(list_keys(_load(config), console))


@keys_app.command("revoke")
def keys_revoke(
    key: Annotated[str, typer.Argument(help="Key id or name.")], config: ConfigOpt = None
) -> None:
    """Revoke a key by id or name."""
    from omniroute.cli.keys import revoke_key

    if not asyncio.run(revoke_key(_load(config), key)):
        err_console.print(f"[red]No key '{key}'.[/red]")
        raise typer.Exit(1)
    console.print(f"Revoked '{key}'.")


@secrets_app.command("rotate")
def secrets_rotate(config: ConfigOpt = None) -> None:
    """Re-encrypt every stored connection secret with a new key: OMNIROUTE_NEW_SECRET_KEY, or a
    generated key that replaces the key file (printed once)."""
    from omniroute.cli.secrets import rotate_secrets
    from omniroute.store import StoreError

    try:
        asyncio.run(rotate_secrets(_load(config), console))
    except (StoreError, ValueError) as exc:
        err_console.print(f"[red]Cannot rotate the secret key:[/red] {exc}")
        raise typer.Exit(1) from None


@catalog_app.command("list")
def catalog_list(config: ConfigOpt = None) -> None:
    """Print the catalog's providers and models with their prices and where each price comes from."""
    from rich.table import Table

    from omniroute.bootstrap import build_catalog

    try:
        cat = build_catalog(_load(config), (), None)
    except ConfigError as exc:
        err_console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from None
    table = Table("provider", "format", "model", "in $/1M", "out $/1M", "context", "tier", "price from")
    for p in cat.providers:
        for m in p.models:
            table.add_row(
                p.id,
                p.format,
                m.id,
                _price(m.input_price),
                _price(m.output_price),
                f"{m.context_window:,}",
                m.tier,
                m.price_source,
            )
    console.print(table)


def _price(v: float | None) -> str:
    return "?" if v is None else f"{v:g}"


@catalog_app.command("refresh")
def catalog_refresh(
    models_dev_json: Annotated[Path, typer.Argument(help="A models.dev-style JSON file.")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where to write the refreshed catalog.")
    ] = Path("catalog.json"),
) -> None:
    """Add models, limits and capabilities from a models.dev-style JSON file to a copy of the
    built-in catalog; set catalog_file in the config to serve it. Prices of models the price
    library knows still come from the library."""
    from omniroute.providers.catalog import Catalog

    try:
        cat = Catalog.builtin().refreshed_from_models_dev(models_dev_json)
    except (OSError, ValueError) as exc:
        err_console.print(f"[red]Cannot refresh:[/red] {exc}")
        raise typer.Exit(1) from None
    cat.write_json(output)
    console.print(f"Wrote {output} ({len(cat)} providers). Serve it with: catalog_file: {output}")


@app.command()
def doctor(config: ConfigOpt = None) -> None:
    """Check the config, the database and upstream reachability."""
    from omniroute.cli.doctor import run_doctor

    ok = asyncio.run(run_doctor(_load(config), console))
    raise typer.Exit(0 if ok else 1)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
