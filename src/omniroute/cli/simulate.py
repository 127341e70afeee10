"""``omniroute simulate`` (replay a workload against a modelled fleet with the real routing engine on
virtual time, comparing strategies) and ``omniroute usage export`` (the usage log as a trace)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from omniroute.cli.common import ConfigOpt, console, err_console, load_or_exit
from omniroute.simulate import MAX_SEED

if TYPE_CHECKING:
    from rich.progress import TaskID

    from omniroute.config import Config
    from omniroute.simulate.compare import Simulation
    from omniroute.simulate.run import RunResult
    from omniroute.simulate.workload import TraceRecord

usage_app = typer.Typer(help="The usage log.", no_args_is_help=True)

PROGRESS_EVERY = 250  # requests between progress-bar refreshes (a refresh per request would cost more)


def _seed(value: int) -> int:
    """The seed's range check, worded as the console words it."""
    if not 0 <= value <= MAX_SEED:
        raise typer.BadParameter(f"must be between 0 and {MAX_SEED} (got {value})")
    return value


def simulate(
    scenario: Annotated[
        str | None,
        typer.Option(
            help="A shipped scenario: steady, outage, rate-limit-storm, quota-exhausted, degradation, "
            "price-change."
        ),
    ] = None,
    fleet: Annotated[Path | None, typer.Option(help="A fleet YAML file (instead of --scenario).")] = None,
    trace: Annotated[
        Path | None, typer.Option(help="A JSONL workload trace (default: the fleet's synthetic workload).")
    ] = None,
    compare: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated variants: combo strategies (priority, weighted, …), auto variants "
            "(auto, auto/cheap, …), combo names or provider/model. Default: the fleet's list; "
            "'trace' replays the trace's own model strings."
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed of the workload and the fleet's draws (0 … 2147483647).", callback=_seed)
    ] = 1,
    limit: Annotated[int | None, typer.Option(help="Replay only the first N requests.", min=1)] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
    html_out: Annotated[Path | None, typer.Option("--html", help="Write the HTML report here.")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Replay a workload against a modelled fleet through the real routing engine on virtual time and
    compare strategies side by side (success, errors, latency, cost, fallbacks, quality), each as a
    ratio to an oracle with perfect knowledge."""
    from omniroute.config import ConfigError
    from omniroute.simulate.compare import Simulation
    from omniroute.simulate.fleet import FleetError
    from omniroute.simulate.report import plots, rich_tables, to_html, to_json

    _check_output("--json", json_out)
    _check_output("--html", html_out)
    try:
        sim = Simulation.load(scenario=scenario, fleet_file=fleet, trace=trace, seed=seed, limit=limit)
    except (FleetError, ConfigError) as exc:
        err_console.print(f"[red]Invalid simulation input:[/red]\n{exc}")
        raise typer.Exit(2) from None
    except FileNotFoundError as exc:
        err_console.print(f"[red]File not found:[/red] {exc.filename or exc}")
        raise typer.Exit(2) from None
    names = [v.strip() for v in compare.split(",") if v.strip()] if compare else list(sim.fleet.doc.compare)
    variants: list[str | None] = [None if v == "trace" else v for v in names]
    _check_variants(sim, variants)
    try:
        report, runs, _ = _run(sim, variants, seed, progress)
    except ConfigError as exc:
        err_console.print(f"[red]Invalid variant:[/red]\n{exc}")
        raise typer.Exit(2) from None
    for table in rich_tables(report):
        console.print(table)
    wall, cpu = sum(r.wall_s for r in runs), sum(r.cpu_s for r in runs)
    total = len(sim.records) * len(runs)
    err_console.print(
        f"{total} simulated requests in {wall:.1f} s of wall time ({_per_minute(total, wall)} per "
        f"minute), {cpu:.1f} s of CPU time ({_per_minute(total, cpu)} per minute of one core)"
    )
    if json_out is not None:
        json_out.write_bytes(to_json(report))
        err_console.print(f"JSON report: {json_out}")
    if html_out is not None:
        images = plots(runs, report)
        if images is None:
            err_console.print(
                "[yellow]matplotlib is not installed: the HTML report has no plots "
                "(pip install 'omniroute\\[simulate]').[/yellow]"
            )
        html_out.write_text(to_html(report, images, sim.fleet.doc.description.strip()), encoding="utf-8")
        err_console.print(f"HTML report: {html_out}")


def _check_output(option: str, path: Path | None) -> None:
    """Exit with status 2 and a one-line error naming ``option`` when the report could not be written
    to ``path`` (no such folder, not writable, or a folder itself), before anything is simulated."""
    if path is None:
        return
    folder = path.parent
    if path.is_dir():
        problem = "is a directory"
    elif not folder.is_dir():
        problem = f"directory {str(folder)!r} does not exist"
    elif not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        problem = "is not writable"
    else:
        return
    err_console.print(f"[red]{option} {str(path)!r}: {problem}.[/red]", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _check_variants(sim: Simulation, variants: list[str | None]) -> None:
    """Exit with status 2 naming the first variant the fleet cannot run (as the console refuses it)."""
    from omniroute.simulate.variants import UnknownVariant, check_variant

    combos = {c.name for c in sim.fleet.config.combos}
    for v in variants:
        if v is None:
            continue
        try:
            check_variant(v, sim.fleet.pool, combos)
        except UnknownVariant as exc:
            err_console.print(f"[red]unknown variant {exc.variant!r}:[/red] {exc.reason}", highlight=False)
            raise typer.Exit(2) from None


def _per_minute(n: int, seconds: float) -> str:
    return f"{n / seconds * 60:,.0f}" if seconds > 0 else "-"


def _run(
    sim: Simulation, variants: list[str | None], seed: int, show: bool
) -> tuple[dict[str, Any], list[RunResult], RunResult]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not show:
        return asyncio.run(sim.run(variants, seed=seed))
    total = len(sim.records)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def tick(name: str, done: int) -> None:
            if done % PROGRESS_EVERY and done != total:
                return
            if name not in tasks:
                tasks[name] = bar.add_task(name, total=total)
            bar.update(tasks[name], completed=done)

        return asyncio.run(sim.run(variants, seed=seed, progress=tick))


@usage_app.command("export")
def usage_export(
    file: Annotated[Path, typer.Argument(help="The JSONL trace to write.")],
    config: ConfigOpt = None,
) -> None:
    """Write the usage log as a JSONL workload trace that `omniroute simulate --trace` replays."""
    from omniroute.simulate.workload import write_trace

    records = asyncio.run(_usage_trace(load_or_exit(config)))
    try:
        n = write_trace(records, file)
    except OSError as exc:
        err_console.print(f"[red]Cannot write {file}:[/red] {exc.strerror or exc}")
        raise typer.Exit(2) from None
    console.print(f"Wrote {n} requests to {file}.")


async def _usage_trace(cfg: Config) -> list[TraceRecord]:
    from omniroute.gateway import data_dir_for
    from omniroute.simulate.workload import trace_from_usage
    from omniroute.store import Store

    store = await Store.open(cfg.database_url, data_dir=data_dir_for(cfg.database_url))
    rows: list[dict[str, Any]] = []
    try:
        page = 5000
        while True:
            batch = await store.recent_usage(page, offset=len(rows))
            rows.extend(batch)
            if len(batch) < page:
                break
    finally:
        await store.close()
    return trace_from_usage(rows)


__all__ = ["simulate", "usage_app", "usage_export"]
