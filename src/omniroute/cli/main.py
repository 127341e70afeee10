"""``omniroute`` command line (OPS-1): a thin shell over the same services the management API uses
(DESIGN house style 13). Command groups live in their own modules and are attached here."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from omniroute.cli.combos import app as combos_app
from omniroute.cli.common import ConfigOpt, console, err_console, load_or_exit
from omniroute.cli.inventory import connections_app, providers_app
from omniroute.cli.simulate import simulate, usage_app
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
app.add_typer(usage_app, name="usage")
app.command()(simulate)
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


def _setup_logging(fmt: str | None = None) -> None:
    """Logs to stderr off the event loop, ``text`` or ``json`` (default ``$OMNIROUTE_LOG_FORMAT``),
    level ``$OMNIROUTE_LOG_LEVEL`` (:mod:`omniroute.observe.logs`)."""
    from omniroute.observe.logs import setup_logging

    try:
        setup_logging(fmt)
    except ValueError as exc:  # OMNIROUTE_LOG_FORMAT set to something else
        err_console.print(f"[red]Invalid OMNIROUTE_LOG_FORMAT:[/red] {exc}")
        raise typer.Exit(2) from None


class LogFormat(StrEnum):
    """``--log-format`` values."""

    text = "text"
    json = "json"


@app.command()
def serve(
    config: ConfigOpt = None,
    host: Annotated[str | None, typer.Option(help="Bind address (overrides server.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (overrides server.port).")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (overrides server.workers).")] = None,
    log_format: Annotated[
        LogFormat | None,
        typer.Option("--log-format", help="Log lines as text or JSON (overrides server.log_format)."),
    ] = None,
) -> None:
    """Run the gateway. With no config it serves built-in simulated providers (offline, no keys)."""
    import uvicorn

    from omniroute.api.protocol import HeaderDeadlineProtocol

    flag = log_format.value if log_format is not None else None
    _setup_logging(flag)
    cfg = _load(config)
    try:
        cfg = cfg.with_overrides(host=host, port=port, workers=workers)
    except ConfigError as exc:
        err_console.print(f"[red]Invalid option:[/red] {exc}")
        raise typer.Exit(2) from None
    fmt = flag or os.environ.get("OMNIROUTE_LOG_FORMAT") or cfg.server.log_format
    os.environ["OMNIROUTE_LOG_FORMAT"] = fmt  # the workers log the same way
    _setup_logging(fmt)
    if cfg.server.workers > 1:
        from omniroute.observe.metrics import prepare_multiprocess_dir

        prepare_multiprocess_dir()  # one /metrics scrape sums every worker
    if cfg.source_path is not None:
        os.environ["OMNIROUTE_CONFIG"] = str(cfg.source_path)
    os.environ["OMNIROUTE_HOST"], os.environ["OMNIROUTE_PORT"] = cfg.server.host, str(cfg.server.port)
    starting = (
        f"OmniRoute starting on http://{cfg.server.host}:{cfg.server.port}/v1 "
        f"(config: {cfg.source_path or 'none — simulated providers when nothing is configured'}); "
        f"console: http://{cfg.server.host}:{cfg.server.port}/dashboard"
    )
    if fmt == "json":  # every line a JSON object: the line goes through the log setup like the rest
        logging.getLogger("omniroute").info(starting)
    else:
        typer.echo(starting)  # plain: the serving process need not load rich for one line (PERF-5)
    from omniroute.observe.lifecycle import exit_quietly_on_sigterm

    exit_quietly_on_sigterm()  # SIGTERM drains, then the process exits 0
    uvicorn.run(
        "omniroute.cli.main:app_factory",
        factory=True,
        host=cfg.server.host,
        port=cfg.server.port,
        workers=cfg.server.workers,
        log_level="warning",
        log_config=None,  # uvicorn's own lines go through the gateway's log setup (text or JSON)
        access_log=False,  # the gateway writes its own access line (omniroute.observe.access)
        loop="uvloop",
        http=HeaderDeadlineProtocol,
        timeout_keep_alive=cfg.server.header_timeout_s,
        lifespan="on",
        timeout_graceful_shutdown=math.ceil(cfg.server.drain_timeout_s),  # uvicorn takes whole seconds
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
    from omniroute.cli.keys import create_key, key_create_fields
    from omniroute.store.errors import StoreConflict

    if not name.strip():
        err_console.print("[red]The key name must not be empty.[/red]")
        raise typer.Exit(2)
    try:
        fields = key_create_fields(name, tuple(allowed_models or ["*"]), budget_usd)
    except ValueError as exc:
        err_console.print(f"[red]Cannot create key:[/red] {exc}")
        raise typer.Exit(2) from None
    cfg = _load(config)
    try:
        plaintext = asyncio.run(create_key(cfg, name, fields["allowed_models"], fields["budget_usd"]))
    except StoreConflict as exc:
        err_console.print(f"[red]Cannot create key:[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(f"Created key '{name}'. It is shown once; store it now:")
    print(plaintext)


@keys_app.command("update")
def keys_update(
    key: Annotated[str, typer.Argument(help="Key id or name.")],
    config: ConfigOpt = None,
    allowed_models: Annotated[
        list[str] | None, typer.Option("--allow", help="Glob of allowed models (repeat; replaces the list).")
    ] = None,
    budget_usd: Annotated[float | None, typer.Option("--budget", help="Spend cap in USD per period.")] = None,
    no_budget: Annotated[bool, typer.Option("--no-budget", help="Remove the spend cap.")] = False,
    period: Annotated[
        str | None, typer.Option("--period", help="Budget period: daily, weekly, monthly or total (UTC).")
    ] = None,
    expires: Annotated[
        str | None, typer.Option("--expires", help="Expiry: ISO 8601 date-time, epoch seconds, or 'never'.")
    ] = None,
    rpm: Annotated[int | None, typer.Option("--rpm", help="Requests per minute (0: default).")] = None,
    tpm: Annotated[int | None, typer.Option("--tpm", help="Tokens per minute (0: default).")] = None,
) -> None:
    """Change a key's budget, budget period, allowed models, rate limits or expiry."""
    from omniroute.cli.keys import key_changes, update_key

    try:
        changes = key_changes(
            allowed=allowed_models,
            budget_usd=budget_usd,
            no_budget=no_budget,
            period=period,
            expires=expires,
            rpm=rpm,
            tpm=tpm,
        )
    except ValueError as exc:
        err_console.print(f"[red]Cannot update key:[/red] {exc}")
        raise typer.Exit(2) from None
    rec = asyncio.run(update_key(_load(config), key, changes))
    if rec is None:
        err_console.print(f"[red]No key '{key}'.[/red]")
        raise typer.Exit(1)
    console.print(f"Updated '{rec['name']}': {', '.join(sorted(changes)) or 'nothing changed'}.")


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

    outcome = asyncio.run(revoke_key(_load(config), key))
    if outcome == "missing":
        err_console.print(f"[red]No key '{key}'.[/red]")
        raise typer.Exit(1)
    if outcome == "already revoked":
        err_console.print(f"[yellow]Key '{key}' was already revoked.[/yellow]")
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
