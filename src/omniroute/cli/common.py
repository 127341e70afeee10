"""Shared pieces of the CLI command groups: consoles, the ``--config`` option and config loading that
turns a bad file into a message naming the key and exit code 2 (OPS-1, OPS-2)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from omniroute.config import Config, ConfigError, load_config

console = Console()
err_console = Console(stderr=True)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (or $OMNIROUTE_CONFIG).")
]


def load_or_exit(config: Path | None) -> Config:
    """Load the config; on an invalid or missing file print why and exit with status 2."""
    try:
        return load_config(config)
    except ConfigError as exc:
        err_console.print(f"[red]Invalid configuration:[/red]\n{exc}")
        raise typer.Exit(2) from None
    except FileNotFoundError as exc:
        err_console.print(f"[red]Config file not found:[/red] {exc.filename or exc}")
        raise typer.Exit(2) from None
