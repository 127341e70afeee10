"""Simulate page: run one of the simulator's shipped scenarios against chosen strategies and show the
comparison (success rate, errors, latency percentiles, cost, cost per success, fallbacks, quality,
each as a ratio to the oracle) and, with matplotlib installed, the HTML report's plots
(docs/SIMULATOR.md).

The run is the ``omniroute simulate`` pipeline (:class:`~omniroute.simulate.compare.Simulation`): a
real gateway per variant on its own :class:`~omniroute.clock.FakeClock` and its own event loop, so it
runs in a worker thread (``asyncio.run`` there, as the CLI does) and never blocks the console's loop.
One simulation runs at a time per gateway process; a second request while one runs gets a message.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends
from starlette.responses import Response

from omniroute.config import ConfigError
from omniroute.dashboard.web import Page, console_page
from omniroute.simulate import MAX_SEED

router = APIRouter()
PageDep = Annotated[Page, Depends(console_page)]

DEFAULT_LIMIT: Final = 200
"""Requests replayed when the form does not say: a few seconds of CPU for four variants (the
simulator's measured speed, docs/SIMULATOR.md)."""
MAX_LIMIT: Final = 5000
"""Most requests one console run may replay (the CLI has no cap; a console request should end in
well under a minute)."""
MAX_VARIANTS: Final = 8
CHOICES: Final = (
    "priority",
    "weighted",
    "round-robin",
    "p2c",
    "least-used",
    "cost-optimized",
    "auto",
    "auto/cheap",
    "auto/fast",
    "auto/smart",
)
"""The variants offered as checkboxes (combo strategies and auto variants); others go in the text
field."""
DEFAULT_VARIANTS: Final = ("priority", "weighted", "auto", "auto/cheap")
"""Checked on a fresh form: the shipped fleets' own ``compare`` default (:mod:`.simulate.fleet`)."""


class SimulationInputError(ValueError):
    """A form value that cannot be used: ``field`` names the form field, the message says why."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


@dataclass(slots=True)
class SimulationForm:
    """The parsed form: a shipped ``scenario``, the ``variants`` to compare (checkboxes then the
    comma-separated text field, duplicates dropped), the ``seed`` and the request ``limit``."""

    scenario: str = "steady"
    variants: list[str] = field(default_factory=lambda: list(DEFAULT_VARIANTS))
    extra: str = ""
    seed: int = 1
    limit: int = DEFAULT_LIMIT

    @property
    def checked(self) -> set[str]:
        """The variants ticked among :data:`CHOICES`."""
        return {v for v in self.variants if v in CHOICES}


def _int(page: Page, name: str, default: int, low: int, high: int) -> int:
    raw = page.field(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SimulationInputError(name, f"{name}: {raw!r} is not a whole number") from None
    if not low <= value <= high:
        raise SimulationInputError(name, f"{name}: must be between {low} and {high} (got {value})")
    return value


def parse_form(page: Page) -> SimulationForm:
    """The :class:`SimulationForm` of a POST; raises :class:`SimulationInputError` naming the field
    (unknown scenario, no or too many variants, seed or limit not a whole number or out of range)."""
    from omniroute.simulate.compare import SCENARIOS

    assert page.form is not None
    scenario = page.field("scenario") or "steady"
    ticked = [v.strip() for v in page.form.getlist("variant") if isinstance(v, str) and v.strip()]
    extra = page.field("extra")
    variants = list(dict.fromkeys([*ticked, *(v.strip() for v in extra.split(",") if v.strip())]))
    form = SimulationForm(scenario, variants, extra)
    if scenario not in SCENARIOS:
        raise SimulationInputError(
            "scenario", f"scenario: unknown scenario {scenario!r} (one of: {', '.join(SCENARIOS)})"
        )
    if not variants:
        raise SimulationInputError("variant", "variant: choose at least one strategy to compare")
    if len(variants) > MAX_VARIANTS:
        raise SimulationInputError("extra", f"variant: at most {MAX_VARIANTS} variants per run")
    form.seed = _int(page, "seed", 1, 0, MAX_SEED)
    form.limit = _int(page, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    return form


def check_variant(variant: str, pool: tuple[str, ...], combos: set[str]) -> None:
    """Raise :class:`SimulationInputError` (field ``extra``) unless the simulation can run ``variant``
    (:func:`omniroute.simulate.variants.check_variant`, the check ``omniroute simulate`` uses too)."""
    from omniroute.simulate.variants import UnknownVariant
    from omniroute.simulate.variants import check_variant as check

    try:
        check(variant, pool, combos)
    except UnknownVariant as exc:
        raise SimulationInputError("extra", str(exc)) from None


@dataclass(slots=True)
class Outcome:
    """A finished run: the report mapping (:func:`omniroute.simulate.report.build_report`), the plots
    as base64 PNGs by name (``None`` without matplotlib), the scenario's description and the real
    seconds the replay took."""

    report: dict[str, Any]
    images: dict[str, str] | None
    description: str
    wall_s: float


def run_simulation(form: SimulationForm) -> Outcome:
    """Load the scenario, check the variants, run them and the oracle, draw the plots. Blocking (its
    own event loop on virtual time): call it in a worker thread. Raises :class:`SimulationInputError`
    for a variant the scenario cannot run."""
    from omniroute.simulate.compare import Simulation
    from omniroute.simulate.fleet import FleetError
    from omniroute.simulate.report import plots

    try:
        sim = Simulation.load(scenario=form.scenario, seed=form.seed, limit=form.limit)
    except FleetError as exc:
        raise SimulationInputError("scenario", str(exc)) from None
    combos = {c.name for c in sim.fleet.config.combos}
    for v in form.variants:
        check_variant(v, sim.fleet.pool, combos)
    try:
        report, runs, _ = asyncio.run(sim.run(list(form.variants), seed=form.seed))
    except ConfigError as exc:
        raise SimulationInputError("extra", f"variant: {exc}") from None
    images = plots(runs, report)
    description = sim.fleet.doc.description.strip()
    return Outcome(report, images, description, sum(r.wall_s for r in runs))


def _render(page: Page, form: SimulationForm, status: int = 200, **extra: Any) -> Response:
    from omniroute.simulate.compare import SCENARIOS

    template = "partials/simulate_live.html" if page.htmx else "simulate.html"
    context: dict[str, Any] = {"outcome": None, "error": None, "field": None, **extra}
    raw = {name: page.field(name) for name in ("seed", "limit")} if page.form is not None else {}
    return page.render(
        template,
        status=status,
        scenarios=SCENARIOS,
        choices=CHOICES,
        form=form,
        max_limit=MAX_LIMIT,
        raw=raw,
        **context,
    )


@router.get("/simulate")
async def simulate_page(page: PageDep) -> Response:
    """The form, with a small default run (``steady``, four variants, 200 requests)."""
    return _render(page, SimulationForm())


@router.post("/simulate")
async def simulate(page: PageDep) -> Response:
    """Run the form's simulation in a worker thread and show its report; bad input → 422 with the
    message on the page, a run already going → 409 with a message."""
    try:
        form = parse_form(page)
    except SimulationInputError as exc:
        return _render(page, _echo(page), status=422, error=str(exc), field=exc.field)
    lock: asyncio.Lock = page.request.app.state.simulation_lock  # made by dashboard.install
    if lock.locked():  # htmx swaps a 200 in (its config does not swap a 409)
        msg = "A simulation is already running; run this one when it has finished."
        return _render(page, form, status=200 if page.htmx else 409, error=msg, field=None)
    async with lock:
        try:
            outcome = await asyncio.to_thread(run_simulation, form)
        except SimulationInputError as exc:
            return _render(page, form, status=422, error=str(exc), field=exc.field)
    return _render(page, form, outcome=outcome)


def _echo(page: Page) -> SimulationForm:
    """The submitted values as they were typed, for redisplaying a form with an error."""
    assert page.form is not None
    ticked = [v for v in page.form.getlist("variant") if isinstance(v, str)]
    return SimulationForm(page.field("scenario") or "steady", ticked, page.field("extra"))
