"""``GET /v1/models``: every id a client may send, from the routing snapshot.

Connected ``provider/model`` ids, combos, the auto ids and the ``model_aliases`` matches, each with
``context_length`` / ``max_output_tokens`` (a combo's and an alias's are the MAX over what they route to).
"""

from __future__ import annotations

from typing import Any

from omniroute.errors import ModelNotFound
from omniroute.routing.auto.listing import auto_models
from omniroute.routing.combos import combo_limits
from omniroute.routing.registry import Registry
from omniroute.routing.resolve import resolve_route
from omniroute.routing.services import RoutingServices
from omniroute.simulated import routes_only_to_simulated

__all__ = ["model_list"]


def model_list(svc: RoutingServices) -> list[dict[str, Any]]:
    """Every routable id for ``GET /v1/models`` (API-2): connected ``provider/model`` ids, combos with
    ``context_length``/``max_output_tokens`` = MAX over their targets, and the auto ids."""
    reg = svc.registry
    out: list[dict[str, Any]] = []
    for p, m in reg.routable_models():
        item = {
            "id": f"{p.id}/{m.id}",
            "object": "model",
            "created": 0,
            "owned_by": "simulated" if p.simulated else p.id,
            "context_length": m.context_window,
            "max_output_tokens": m.max_output_tokens,
        }
        if p.simulated:
            item["simulated"] = True
        out.append(item)
    for name, combo in reg.combos.items():
        ctx, mo = combo_limits(svc, combo)
        simulated = routes_only_to_simulated(combo)  # owned and labelled like its targets
        out.append(
            {
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": "simulated" if simulated else "combo",
                "context_length": ctx,
                "max_output_tokens": mo,
                "strategy": combo.strategy,
                **({"simulated": True} if simulated else {}),
            }
        )
    out.extend(auto_models(svc))
    out.extend(_alias_models(svc.registry, out))
    return out


def _alias_models(reg: Registry, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per ``model_aliases`` match (SPEC §4) with ``alias_of`` = its route and the
    ``context_length``/``max_output_tokens`` of what it routes to (``listed``: the other ids). An
    alias whose route stopped resolving (its combo deleted at run time) is left out."""
    by_id = {m["id"]: m for m in listed}
    out: list[dict[str, Any]] = []
    for a in reg.aliases:
        try:
            plan = resolve_route(reg, a.route)
        except ModelNotFound:
            continue
        if plan.targets:
            ctx = max((t.model.context_window or 0 for t in plan.targets), default=0) or None
            mo = max((t.model.max_output_tokens or 0 for t in plan.targets), default=0) or None
        else:
            target = by_id.get(plan.combo.name if plan.combo else plan.requested) or by_id.get("auto", {})
            ctx, mo = target.get("context_length"), target.get("max_output_tokens")
        out.append(
            {
                "id": a.match,
                "object": "model",
                "created": 0,
                "owned_by": "alias",
                "context_length": ctx,
                "max_output_tokens": mo,
                "alias_of": a.route,
            }
        )
    return out
