"""Options of an auto plan: which variant a bare ``auto`` means, the effective scoring weights
(AUTO-4, AUTO-7), the SLA policy of ``sla-aware`` (AUTO-5) and numeric config values.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from omniroute.errors import InvalidRequest
from omniroute.routing.auto import packs
from omniroute.routing.auto import scoring as sc
from omniroute.routing.auto.routers import SlaPolicy
from omniroute.routing.auto.variants import AutoVariant, parse_auto_id
from omniroute.routing.services import RoutingServices

__all__ = ["positive", "resolve_variant", "sla_policy", "weights_for"]

log = logging.getLogger("omniroute.auto")


def resolve_variant(gw: RoutingServices, requested: str) -> AutoVariant:
    """Parse ``requested``; bare ``auto`` uses ``auto.default_variant`` when that is a valid id."""
    if requested.strip().lower() == "auto" and gw.config.auto.default_variant:
        dv = gw.config.auto.default_variant
        try:
            return parse_auto_id(dv if dv.lower().startswith("auto") else f"auto/{dv}")
        except InvalidRequest:
            log.warning("auto.default_variant %r is not a valid auto id; using plain auto", dv)
    return parse_auto_id(requested)


def weights_for(
    mode: str | None, options: Mapping[str, Any], variant_pack: str | None
) -> tuple[dict[str, float], str]:
    """Effective weights and their source name: header mode > combo ``modePack`` > combo ``weights`` >
    the variant's pack > ``DEFAULT_WEIGHTS`` (AUTO-4, AUTO-7)."""
    if mode == packs.DEFAULT_MODE:
        return dict(sc.DEFAULT_WEIGHTS), "default"
    if mode is not None:
        return dict(packs.MODE_PACKS[mode]), mode
    stored = packs.resolve_mode(str(options.get("modePack") or "")) if options.get("modePack") else None
    if stored is not None and stored != packs.DEFAULT_MODE:
        return dict(packs.MODE_PACKS[stored]), stored
    if isinstance(options.get("weights"), Mapping) and options["weights"]:
        return sc.normalize_scoring_weights(options["weights"]), "custom"
    if variant_pack is not None:
        return dict(packs.MODE_PACKS[variant_pack]), variant_pack
    return dict(sc.DEFAULT_WEIGHTS), "default"


_DEFAULT_SLA = SlaPolicy()


def sla_policy(options: Mapping[str, Any]) -> SlaPolicy:
    """SLA fields of a combo config (top level or nested ``sla``) (AUTO-5)."""
    if not options:
        return _DEFAULT_SLA
    nested = options.get("sla") if isinstance(options.get("sla"), Mapping) else {}
    assert isinstance(nested, Mapping)

    def pick(flat: str, inner: str) -> Any:
        return options.get(flat, nested.get(inner))

    cap = pick("slaMaxCostPer1MTokens", "maxCostPer1MTokens")
    return SlaPolicy(
        target_p95_ms=float(pick("slaTargetP95Ms", "targetP95Ms") or 2000.0),
        max_error_rate=float(pick("slaMaxErrorRate", "maxErrorRate") or 0.05),
        max_cost_per_1m=float(cap) if cap else None,
        hard=bool(pick("slaHardConstraints", "hardConstraints") or False),
    )


def positive(value: Any) -> float | None:
    """``value`` as a float when it is a number > 0, else ``None``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None
