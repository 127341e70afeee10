"""``omniroute simulate``: replay a workload against a modelled fleet through the real routing engine
on virtual time, and compare strategies side by side (docs/SIMULATOR.md).

- :mod:`~omniroute.simulate.fleet` — the fleet model (YAML, validated);
- :mod:`~omniroute.simulate.workload` — traces (JSONL) and synthetic workloads;
- :mod:`~omniroute.simulate.upstream` — the simulated upstream client injected into the gateway;
- :mod:`~omniroute.simulate.run` — one run through ``Gateway.execute`` on a ``FakeClock``, the oracle;
- :mod:`~omniroute.simulate.report` — figures, ratios to the oracle, text/JSON/HTML reports;
- :mod:`~omniroute.simulate.compare` — the shipped scenarios and the whole pipeline.
"""

from typing import Final

__all__ = ["MAX_SEED"]

MAX_SEED: Final = 2**31 - 1
"""Largest seed the simulator takes (the CLI and the console alike; seeds are 0 … 2**31 - 1, the range
of a signed 32-bit integer every random generator it seeds accepts)."""
