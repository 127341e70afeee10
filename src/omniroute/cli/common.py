"""Shared pieces of the CLI command groups: consoles, the ``--config`` option and config loading that
turns a bad file into a message naming the key and exit code 2 (OPS-1, OPS-2)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from omniroute.config import Config, ConfigError, load_config

if TYPE_CHECKING:
    from rich.console import Console


class LazyConsole:
    """A ``rich`` console built on the first :meth:`print`: ``rich`` costs about 2 MB of resident memory
    and ``serve`` — a long-lived process — prints nothing through it unless start-up fails (PERF-5)."""

    __slots__ = ("_console", "_stderr")

    def __init__(self, *, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """``rich.console.Console.print`` (markup, tables)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr)
        self._console.print(*objects, **kwargs)


console = LazyConsole()
err_console = LazyConsole(stderr=True)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (or $OMNIROUTE_CONFIG).")
]


def load_or_exit(config: Path | None) -> Config:
    """Load the config and check its provider formats against the wire registry (as the gateway does
    at start); on an invalid or missing file print why and exit with status 2."""
    from omniroute.bootstrap import check_provider_formats  # loads the wire formats: only when used

    try:
        cfg = load_config(config)
        check_provider_formats(cfg)
        return cfg
    except ConfigError as exc:
        err_console.print(f"[red]Invalid configuration:[/red]\n{exc}")
        raise typer.Exit(2) from None
    except FileNotFoundError as exc:
        err_console.print(f"[red]Config file not found:[/red] {exc.filename or exc}")
        raise typer.Exit(2) from None
