"""The auto-combo engine (SPEC §7, AUTO-1 … AUTO-8): zero-config ``auto`` ids, the virtual factory,
16-factor scoring, mode packs, router strategies, LKGP, task fitness, per-request controls and
self-healing. :func:`plan_auto` is the entry point the planner calls for ``kind == "auto"`` plans.

Modules: :mod:`.variants` (ids), :mod:`.factory` (pools, exclusions), :mod:`.inputs` (measurements),
:mod:`.statics` (per-candidate statics, cached per registry snapshot),
:mod:`.scoring` (factors, weights), :mod:`.packs`, :mod:`.routers`, :mod:`.fitness`, :mod:`.controls`,
:mod:`.healing`, :mod:`.lkgp`, :mod:`.listing` (advertised ids), :mod:`.options` (weights, SLA),
:mod:`.explain` (the decision record), :mod:`.planner` (the pipeline).
"""

from __future__ import annotations

from omniroute.routing.auto.packs import MODE_PACKS
from omniroute.routing.auto.planner import plan_auto
from omniroute.routing.auto.routers import (
    RouterContext,
    RouterDecision,
    register_router,
    register_strategy,
    select_with_strategy,
)
from omniroute.routing.auto.scoring import DEFAULT_WEIGHTS, FACTORS, normalize_scoring_weights, score_pool
from omniroute.routing.auto.variants import AutoVariant, parse_auto_id

__all__ = [
    "DEFAULT_WEIGHTS",
    "FACTORS",
    "MODE_PACKS",
    "AutoVariant",
    "RouterContext",
    "RouterDecision",
    "normalize_scoring_weights",
    "parse_auto_id",
    "plan_auto",
    "register_router",
    "register_strategy",
    "score_pool",
    "select_with_strategy",
]
