"""``omniroute providers list|add`` and ``omniroute connections list|add``: what the gateway would
route to, from the same catalog and store the gateway uses (secrets masked), and additions through the
same checks as the management API (:mod:`omniroute.inventory`). Secrets are read from an environment
variable or a hidden prompt, never from the command line."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from omniroute.cli.common import ConfigOpt, console, err_console, load_or_exit
from omniroute.config import Config
from omniroute.errors import InvalidRequest

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


def _fail(what: str, exc: Exception) -> NoReturn:
    err_console.print(f"[red]Cannot add the {what}:[/red] {exc}", markup=True, highlight=False)
    raise typer.Exit(2)


def _secret(env_name: str | None, prompt: bool) -> str | None:
    """The API key from ``$env_name``, else from a hidden prompt when ``prompt``; never from argv."""
    if env_name is not None:
        value = os.environ.get(env_name, "")
        if not value:
            raise InvalidRequest(
                f"api_key: the environment variable {env_name} is not set or empty.", param="api_key"
            )
        return value
    if prompt:
        value = typer.prompt("API key (input hidden)", hide_input=True, default="", show_default=False)
        return value or None
    return None


async def _open_for_edit(cfg: Config) -> tuple[Any, Any]:
    from omniroute.bootstrap import build_catalog, load_config_into_store
    from omniroute.gateway import data_dir_for
    from omniroute.store import Store

    store = await Store.open(cfg.database_url, data_dir=data_dir_for(cfg.database_url))
    try:
        await load_config_into_store(cfg, store)
        return store, build_catalog(cfg, await store.list_provider_nodes(), None)
    except BaseException:
        await store.close()
        raise


async def _add_connection(cfg: Config, data: dict[str, Any], env_name: str | None, prompt: bool) -> str:
    from omniroute.core.egress import EgressPolicy
    from omniroute.inventory import ConnectionIn, add_connection, needs_api_key, parse

    body = parse(ConnectionIn, data)
    store, catalog = await _open_for_edit(cfg)
    try:
        if catalog.provider(body.provider) is not None:
            key = _secret(env_name, prompt and needs_api_key(body, catalog))
            body = body.model_copy(update={"api_key": key})
        conn = await add_connection(store, catalog, body, EgressPolicy.from_config(cfg.security))
    finally:
        await store.close()
    return "with an API key" if conn.api_key else "without an API key"


@connections_app.command("add")
def connections_add(
    conn_id: Annotated[str, typer.Argument(metavar="ID", help="Connection id, e.g. openai-main.")],
    provider: Annotated[str, typer.Option(help="Provider id (catalog, config or stored).")],
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env", metavar="NAME", help="Read the API key from this environment variable."
        ),
    ] = None,
    prompt: Annotated[
        bool,
        typer.Option(
            "--prompt/--no-prompt",
            help="Ask for the API key (hidden) when no --api-key-env is given and the endpoint is not local.",
        ),
    ] = True,
    base_url: Annotated[
        str | None, typer.Option(help="Endpoint of this connection (default: the provider's).")
    ] = None,
    default_model: Annotated[
        str | None, typer.Option(help="Model used when a request names only the provider.")
    ] = None,
    priority: Annotated[str, typer.Option(help="Lower is tried first.")] = "1",
    name: Annotated[str | None, typer.Option(help="Display name (default: the id).")] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="A tag for tag routing (repeatable).")
    ] = None,
    max_concurrent: Annotated[str | None, typer.Option(help="Cap on requests in flight.")] = None,
    inactive: Annotated[bool, typer.Option("--inactive", help="Store it disabled.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Add a connection (an account of a provider) to the store. The API key is read from the
    environment variable --api-key-env names, or asked for without echo; it is never taken from the
    command line. A local endpoint (Ollama, llama.cpp, vLLM) needs no key. A running gateway picks the
    connection up within seconds."""
    from omniroute.errors import InvalidRequest as Invalid

    data: dict[str, Any] = {
        "id": conn_id,
        "provider": provider,
        "name": name,
        "base_url": base_url,
        "default_model": default_model,
        "priority": priority,
        "tags": list(tag or ()),
        "is_active": not inactive,
    }
    if max_concurrent is not None:
        data["max_concurrent"] = max_concurrent
    cfg = load_or_exit(config)
    try:
        how = asyncio.run(_add_connection(cfg, data, api_key_env, prompt))
    except Invalid as exc:
        _fail("connection", exc)
    console.print(f"Added connection '{conn_id}' to provider '{provider}' {how}.")


def _model(spec: str) -> dict[str, Any]:
    """``"id[,input_price=0.5][,output_price=1.5][,context_window=8192]…"`` → a model dict."""
    head, *rest = [p.strip() for p in spec.split(",")]
    out: dict[str, Any] = {"id": head}
    for part in rest:
        key, sep, val = part.partition("=")
        if not sep:
            raise typer.BadParameter(f"'{part}' in '{spec}' is not key=value", param_hint="--model")
        out[key.strip()] = val.strip().split("|") if key.strip() == "capabilities" else val.strip()
    return out


async def _add_provider(cfg: Config, data: dict[str, Any]) -> None:
    from omniroute.bootstrap import build_catalog
    from omniroute.core.egress import EgressPolicy
    from omniroute.inventory import ProviderIn, add_provider, parse

    body = parse(ProviderIn, data)
    store, catalog = await _open_for_edit(cfg)

    async def validate() -> None:
        build_catalog(cfg, await store.list_provider_nodes(), None)

    try:
        await add_provider(store, catalog, body, validate, policy=EgressPolicy.from_config(cfg.security))
    finally:
        await store.close()


@providers_app.command("add")
def providers_add(
    provider_id: Annotated[str, typer.Argument(metavar="ID", help="Provider id, e.g. ollama.")],
    base_url: Annotated[str | None, typer.Option(help="Endpoint, e.g. http://127.0.0.1:11434/v1.")] = None,
    wire_format: Annotated[
        str | None, typer.Option("--format", help="Wire format it speaks (default openai).")
    ] = None,
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            help="A model: 'id[,input_price=USD per 1M][,output_price=…][,context_window=N]"
            "[,max_output_tokens=N][,capabilities=tools|vision][,tier=free]' (repeatable).",
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Display name.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Add a custom provider (any OpenAI-, Anthropic- or Gemini-compatible server) or override fields
    of a catalog one, in the store; then add a connection to it with 'omniroute connections add'."""
    from omniroute.errors import InvalidRequest as Invalid

    data: dict[str, Any] = {
        "id": provider_id,
        "base_url": base_url,
        "format": wire_format,
        "name": name,
        "models": [_model(m) for m in model or ()],
    }
    cfg = load_or_exit(config)
    try:
        asyncio.run(_add_provider(cfg, data))
    except Invalid as exc:
        _fail("provider", exc)
    console.print(f"Added provider '{provider_id}' ({len(data['models'])} model(s)).")
