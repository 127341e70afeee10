"""Combo target expansion (COMBO-1, COMBO-4): a :class:`~omniroute.core.combo.Combo` → the
:class:`ComboTarget` list strategies order.

* ``combo_ref`` steps expand inline (depth ≤ :data:`MAX_COMBO_DEPTH`, cycles and unknown refs
  skipped with an exclusion); a nested combo's targets inherit the top-level step index and weight;
* ``provider/model`` steps (provider id or alias) and bare catalog model ids (every connected
  provider serving it) become targets with their active connections; inactive or missing
  connections are recorded as exclusions;
* tag routing (:func:`apply_tags`) and per-connection expansion (:func:`per_connection`).

The expansion of a registered combo depends only on the registry snapshot, so it is memoised on it
(``Registry.memo``); a management edit builds a new snapshot and with it a fresh expansion.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from omniroute.core.combo import MAX_COMBO_DEPTH, Combo
from omniroute.errors import ExclusionRecord
from omniroute.routing.decision import Decision
from omniroute.routing.registry import Registry
from omniroute.routing.resolve import PlanTarget
from omniroute.routing.services import RoutingServices
from omniroute.routing.strategies import ComboTarget
from omniroute.values import ProviderInfo

__all__ = ["apply_tags", "combo_targets", "expand_targets", "per_connection"]


def combo_targets(
    gw: RoutingServices,
    combo: Combo,
    decision: Decision,
    *,
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
) -> list[ComboTarget]:
    """Flatten ``combo`` into targets in definition order, ``index`` = position (step 1 of the
    module docstring); skipped refs, unknown providers and unusable connections become exclusions."""
    reg = gw.registry
    if depth == 0 and not seen:
        targets, skipped = _expansion(reg, combo)
        decision.exclusions.extend(skipped)
        return list(targets)
    out: list[ComboTarget] = []
    _expand(reg, combo, decision, out, depth, seen, None, None)
    return out


def _expansion(reg: Registry, combo: Combo) -> tuple[tuple[ComboTarget, ...], tuple[ExclusionRecord, ...]]:
    """The expansion of a registered combo, memoised on the registry snapshot (it depends on nothing
    else, and a management edit builds a new snapshot). Unregistered combos are not memoised."""
    name = combo.name
    memo: dict[str, Any] = reg.memo.setdefault("combo-targets", {})
    hit = memo.get(name)
    if hit is not None and hit[0] is combo:
        return hit[1], hit[2]
    scratch = Decision(request_id="", requested_model=name)
    out: list[ComboTarget] = []
    _expand(reg, combo, scratch, out, 0, frozenset(), None, None)
    result = (tuple(out), tuple(scratch.exclusions))
    if reg.combos.get(name) is combo:
        memo[name] = (combo, *result)
    return result


def _expand(
    reg: Registry,
    combo: Combo,
    decision: Decision,
    out: list[ComboTarget],
    depth: int,
    seen: frozenset[str],
    step: int | None,
    weight: float | None,
) -> None:
    # ``step``/``weight``: the top-level step index and weight a nested combo's targets inherit
    seen = seen | {combo.name}
    default_ms = combo.config.get("targetTimeoutMs")
    default_s = float(default_ms) / 1000.0 if isinstance(default_ms, int | float) and default_ms > 0 else None
    for i, t in enumerate(combo.targets):
        top = i if step is None else step
        w = float(t.weight or 0) if weight is None else weight
        ref = t.combo_ref
        if ref:
            sub = reg.combos.get(ref)
            if sub is None or ref in seen or depth + 1 > MAX_COMBO_DEPTH:
                why = (
                    "unknown combo"
                    if sub is None
                    else ("cycle" if ref in seen else f"depth > {MAX_COMBO_DEPTH}")
                )
                decision.exclusions.append(ExclusionRecord("combo", ref, f"combo_ref skipped: {why}"))
                continue
            _expand(reg, sub, decision, out, depth + 1, seen, top, w)
            continue
        model = t.model or ""
        providers: list[ProviderInfo] = []
        model_id = model
        if "/" in model:
            prefix, rest = model.split("/", 1)
            p = reg.catalog.provider(prefix)
            if p is not None:
                providers, model_id = [p], rest
        if not providers:
            providers = [p for p in reg.catalog.providers_serving(model) if reg.is_connected(p.id)]
            if not providers:
                what = "unknown provider" if "/" in model else "no connected provider serves this model"
                decision.exclusions.append(ExclusionRecord(model.split("/", 1)[0] or "?", model, what))
                continue
        pin = t.connection_id
        timeout = t.timeout
        timeout_s = default_s if timeout is None else timeout
        for p in providers:
            conns = reg.connections.get(p.id, ())
            if pin:
                conns = [c for c in conns if c.id == pin]
            mid = reg.model_info(p, model_id)
            active = tuple(c for c in conns if c.is_active)
            if len(active) < len(conns):
                decision.exclusions.extend(
                    ExclusionRecord(p.id, mid.id, "connection inactive", c.id)
                    for c in conns
                    if not c.is_active
                )
            if not active:
                if not conns:
                    why = f"connection {pin} not found" if pin else "no connection"
                    decision.exclusions.append(ExclusionRecord(p.id, mid.id, why, pin))
                continue
            out.append(
                ComboTarget(
                    p,
                    mid,
                    active,
                    len(out),
                    top,
                    w,
                    t.priority,
                    timeout_s,
                    bool(pin),
                    t.tags,
                )
            )


def expand_targets(
    gw: RoutingServices,
    combo: Combo,
    decision: Decision,
    *,
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
) -> list[PlanTarget]:
    """The combo's targets as plan targets (pinned targets keep their connection)."""
    return [
        PlanTarget(
            t.provider,
            t.model,
            connection_id=t.connections[0].id if t.pinned else None,
            weight=t.weight,
            timeout_s=t.timeout_s,
            step=t.step,
        )
        for t in combo_targets(gw, combo, decision, depth=depth, seen=seen)
    ]


def apply_tags(
    targets: Sequence[ComboTarget], tags: Sequence[str], mode: str, decision: Decision
) -> tuple[list[ComboTarget], str]:
    """COMBO-4 tag routing: keep targets whose connection (or target) tags match ``tags`` (``any``
    tag, or ``all`` with mode ``all``), narrowed to the matching connections; when nothing matches,
    keep everything. Removed targets/connections are recorded as exclusions."""
    want = {t.lower() for t in tags}
    if not want:
        return list(targets), ""

    def ok(have: set[str]) -> bool:
        return want <= have if mode == "all" else bool(want & have)

    kept: list[ComboTarget] = []
    dropped: list[tuple[ComboTarget, str]] = []
    for t in targets:
        own = {x.lower() for x in t.tags}
        match = tuple(c for c in t.connections if ok(own | {x.lower() for x in c.tags}))
        dropped.extend((t, c.id) for c in t.connections if c not in match)
        if match:
            kept.append(t if len(match) == len(t.connections) else dataclasses.replace(t, connections=match))
    wanted = ",".join(sorted(want))
    if not kept:
        return list(targets), f"tags [{wanted}] matched no target: all kept"
    for t, cid in dropped:
        decision.exclusions.append(
            ExclusionRecord(t.provider.id, t.model.id, f"tag routing: connection lacks tags [{wanted}]", cid)
        )
    return kept, f"tags [{wanted}] kept {len(kept)}/{len(targets)} targets"


def per_connection(targets: Sequence[ComboTarget]) -> list[ComboTarget]:
    """COMBO-4 ``connectionAwareExpansion``: one pinned target per connection."""
    out: list[ComboTarget] = []
    for t in targets:
        for c in t.connections:
            out.append(dataclasses.replace(t, connections=(c,), pinned=True, index=len(out)))
    return out
