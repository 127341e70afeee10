"""``omniroute combos``: list, show, create and delete combos (COMBO-1) through the store, with the
same validation as the management API (DESIGN house style 13).

The CLI writes the database directly; a running gateway picks the change up on its next snapshot
rebuild (any management-API edit, or a restart). Edit through ``/api/combos`` when the change must
apply to the very next request.

Targets on the command line: ``--target "provider/model[,weight=70][,connection_id=o1][,priority=1]
[,timeout_s=30][,tags=a|b]"`` and ``--ref "combo-name[,weight=30]"``, in the order given (targets
first, then refs, unless ``--json`` gives the whole definition).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from omniroute.cli.common import ConfigOpt, console, err_console, load_or_exit
from omniroute.config import Config

app = typer.Typer(help="Combos: named routing recipes.", no_args_is_help=True)
_load = load_or_exit


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def parse_target(spec: str, *, ref: bool = False) -> dict[str, Any]:
    """``"model,key=value,…"`` → a target dict (``combo_ref`` when ``ref``); ``tags`` split on ``|``."""
    head, *rest = [p.strip() for p in spec.split(",")]
    out: dict[str, Any] = {"combo_ref" if ref else "model": head}
    for part in rest:
        key, sep, val = part.partition("=")
        if not sep:
            raise typer.BadParameter(f"'{part}' in '{spec}' is not key=value")
        out[key.strip()] = [t for t in val.split("|") if t] if key.strip() == "tags" else _value(val)
    return out


async def _open(cfg: Config) -> Any:
    from omniroute.gateway import data_dir_for
    from omniroute.store import Store

    return await Store.open(cfg.database_url, data_dir=data_dir_for(cfg.database_url))


async def _registry(cfg: Config, store: Any) -> Any:
    from omniroute.bootstrap import build_catalog, connection_from_config
    from omniroute.core.combo import Combo
    from omniroute.routing.registry import Registry

    catalog = build_catalog(cfg, await store.list_provider_nodes(), None)
    conns = [*await store.list_connections(), *(connection_from_config(c) for c in cfg.connections)]
    return Registry.build(catalog, conns, combos=[Combo.from_row(r) for r in await store.list_combos()])


async def create(cfg: Config, data: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], Any]:
    """Validate and store a combo; returns ``(row, warnings, shadowed (model, provider) | None)``.
    Raises :class:`~omniroute.core.combo.ComboInvalid` (also for a taken name) or ``StoreConflict``
    (a name taken meanwhile)."""
    from omniroute.routing.combo_validation import check_combo
    from omniroute.routing.combos import shadowed_model

    store = await _open(cfg)
    try:
        reg = await _registry(cfg, store)
        combo, warnings = check_combo(data, await store.list_combos(), reg)
        row = await store.create_combo(combo.to_json())
        return row, warnings, shadowed_model(reg, row["name"])
    finally:
        await store.close()


async def _list(cfg: Config) -> list[dict[str, Any]]:
    store = await _open(cfg)
    try:
        rows: list[dict[str, Any]] = await store.list_combos()
        return rows
    finally:
        await store.close()


async def _get(cfg: Config, name: str) -> dict[str, Any] | None:
    store = await _open(cfg)
    try:
        row: dict[str, Any] | None = await store.get_combo(name)
        return row
    finally:
        await store.close()


async def _delete(cfg: Config, name: str) -> bool:
    store = await _open(cfg)
    try:
        return bool(await store.delete_combo(name))
    finally:
        await store.close()


def _target_text(t: Any) -> str:
    if not isinstance(t, dict):
        return str(t)
    head = f"ref:{t['combo_ref']}" if t.get("combo_ref") else str(t.get("model"))
    extras = [f"{k}={t[k]}" for k in ("weight", "connection_id", "priority") if t.get(k) is not None]
    return head + (f" ({', '.join(extras)})" if extras else "")


@app.command("list")
def list_cmd(config: ConfigOpt = None) -> None:
    """List combos."""
    from rich.table import Table

    table = Table("name", "strategy", "targets", "enabled", "id")
    for c in asyncio.run(_list(_load(config))):
        table.add_row(
            c["name"],
            c["strategy"],
            "\n".join(_target_text(t) for t in c.get("targets") or []),
            "yes" if c.get("enabled", True) else "no",
            c["id"],
        )
    console.print(table)


@app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(help="Combo name or id.")], config: ConfigOpt = None
) -> None:
    """Print one combo as JSON."""
    row = asyncio.run(_get(_load(config), name))
    if row is None:
        err_console.print(f"[red]No combo '{name}'.[/red]")
        raise typer.Exit(1)
    print(json.dumps(row, indent=2, sort_keys=True))


@app.command("create")
def create_cmd(
    name: Annotated[str, typer.Argument(help="Combo name (what clients send as 'model').")],
    config: ConfigOpt = None,
    strategy: Annotated[str, typer.Option("--strategy", "-s", help="One of the 19 strategies.")] = "priority",
    target: Annotated[
        list[str] | None, typer.Option("--target", "-t", help="provider/model[,weight=N][,connection_id=ID]…")
    ] = None,
    ref: Annotated[list[str] | None, typer.Option("--ref", help="Nested combo: name[,weight=N].")] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="config option key=value (JSON value).")
    ] = None,
    description: Annotated[str, typer.Option(help="Free text.")] = "",
    from_json: Annotated[
        Path | None, typer.Option("--json", help="A JSON file with the whole combo (name from the argument).")
    ] = None,
) -> None:
    """Create a combo (validated like POST /api/combos)."""
    from omniroute.core.combo import ComboInvalid
    from omniroute.store.errors import StoreConflict

    if from_json is not None:
        data = _read_json(from_json)
        data["name"] = name
    else:
        cfg_opts: dict[str, Any] = {}
        for o in option or []:
            key, sep, val = o.partition("=")
            if not sep:
                raise typer.BadParameter(f"--option '{o}' is not key=value")
            cfg_opts[key.strip()] = _value(val)
        targets = [parse_target(t) for t in target or []] + [parse_target(r, ref=True) for r in ref or []]
        data = {
            "name": name,
            "strategy": strategy,
            "targets": targets,
            "config": cfg_opts,
            "description": description,
        }
    try:
        row, warnings, shadow = asyncio.run(create(_load(config), data))
    except ComboInvalid as exc:
        err_console.print(f"[red]Invalid combo:[/red] {exc.param}: {exc.message}")
        raise typer.Exit(2) from None
    except StoreConflict as exc:
        err_console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from None
    for w in warnings:
        err_console.print(f"[yellow]warning[/yellow] {w['code']}: {w['param']}: {w['message']}")
    if shadow is not None:
        err_console.print(
            "[yellow]warning[/yellow] COMBO_NAME_SHADOWS_MODEL: "
            f"'{row['name']}' shadows {shadow[1]}/{shadow[0]}"
        )
    console.print(
        f"Created combo '{row['name']}' ({row['strategy']}, {len(row['targets'])} targets), id {row['id']}."
    )


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; an unreadable file, invalid JSON or a non-object prints one line
    and exits with status 2."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        err_console.print(f"[red]Cannot read {path}:[/red] {exc.strerror or exc}")
        raise typer.Exit(2) from None
    except (ValueError, UnicodeDecodeError) as exc:
        err_console.print(f"[red]{path} is not valid JSON:[/red] {exc}")
        raise typer.Exit(2) from None
    if not isinstance(data, dict):
        err_console.print(f"[red]{path} must hold a JSON object (the combo).[/red]")
        raise typer.Exit(2)
    return data


@app.command("delete")
def delete_cmd(
    name: Annotated[str, typer.Argument(help="Combo name or id.")], config: ConfigOpt = None
) -> None:
    """Delete a combo (and its model-combo mappings)."""
    if not asyncio.run(_delete(_load(config), name)):
        err_console.print(f"[red]No combo '{name}'.[/red]")
        raise typer.Exit(1)
    console.print(f"Deleted combo '{name}'.")
