"""The ``omniroute simulate`` pipeline: a fleet (a shipped scenario or a file), a workload (a trace or
the fleet's synthetic spec), every variant run on both, the oracle, and the report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from omniroute.simulate.fleet import Fleet, FleetError, load_fleet
from omniroute.simulate.report import TIMELINE_BUCKETS, build_report
from omniroute.simulate.run import RunResult, pool_prices, run_oracle, run_variant
from omniroute.simulate.workload import TraceRecord, read_trace, synthetic

SCENARIOS = ("steady", "outage", "rate-limit-storm", "quota-exhausted", "degradation", "price-change")
"""The scenarios shipped in ``omniroute/simulate/scenarios/`` (explained in docs/SIMULATOR.md)."""


def scenario_path(name: str) -> Path:
    """The packaged YAML of scenario ``name``; raises :class:`FleetError` for an unknown name."""
    if name not in SCENARIOS:
        raise FleetError([("--scenario", f"unknown scenario {name!r} (one of: {', '.join(SCENARIOS)})")])
    return Path(str(resources.files("omniroute.simulate") / "scenarios" / f"{name}.yaml"))


@dataclass(slots=True)
class Simulation:
    """A loaded fleet and workload, ready to run: ``name`` labels the report, ``duration_s`` is the
    workload's span in seconds (for the timelines)."""

    name: str
    fleet: Fleet
    records: list[TraceRecord]
    duration_s: float

    @classmethod
    def load(
        cls,
        *,
        scenario: str | None = None,
        fleet_file: Path | None = None,
        trace: Path | None = None,
        seed: int = 1,
        limit: int | None = None,
    ) -> Simulation:
        """Load from a shipped ``scenario`` or a ``fleet_file`` (exactly one), with the ``trace``
        when given else the fleet's ``workload`` spec generated with ``seed``; ``limit`` keeps the
        first requests only. Raises :class:`FleetError` naming the field, ``FileNotFoundError``."""
        if (scenario is None) == (fleet_file is None):
            raise FleetError("give either --scenario or --fleet")
        path = scenario_path(scenario) if scenario is not None else fleet_file
        assert path is not None
        fleet = load_fleet(path)
        if trace is not None:
            records = read_trace(trace)
            duration = records[-1].arrival_s if records else 0.0
        elif fleet.doc.workload is not None:
            spec = synthetic(fleet.doc.workload)
            records, duration = spec.generate(seed), spec.duration_s
        else:
            raise FleetError([("workload", "the fleet has no workload: add one or pass --trace")])
        if limit is not None:
            records = records[:limit]
        return cls(scenario or path.stem, fleet, records, max(duration, 1.0))

    async def run(
        self,
        variants: Sequence[str | None],
        *,
        seed: int,
        progress: Callable[[str, int], None] | None = None,
    ) -> tuple[dict[str, Any], list[RunResult], RunResult]:
        """Run every variant (``None``: the trace's own model strings) and the oracle; returns the
        report mapping, the runs and the oracle run."""
        runs = []
        for v in variants:
            cb = None if progress is None else (lambda n, v=v: progress(v or "trace", n))
            sample_s = self.duration_s / TIMELINE_BUCKETS
            runs.append(
                await run_variant(self.fleet, self.records, v, seed=seed, progress=cb, sample_s=sample_s)
            )
        oracle = run_oracle(self.fleet, self.records, await pool_prices(self.fleet), seed=seed)
        report = build_report(runs, oracle, scenario=self.name, seed=seed, duration_s=self.duration_s)
        return report, runs, oracle


__all__ = ["SCENARIOS", "Simulation", "scenario_path"]
