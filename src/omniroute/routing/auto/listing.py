"""What the gateway advertises about auto ids: ``/v1/models`` entries and ``GET /api/combos/auto``
(API-2, AUTO-1, AUTO-2).

Each advertised id reports ``context_length`` and ``max_output_tokens`` = the MAX over its pool (after
its fail-open filter), never 0: a pool without catalog limits reports the largest window among
connected models, else 4096 (the same floor as combos). Advertising the MAX is safe because the
pre-call check (RESIL-8) steers oversized prompts to the large-window candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from omniroute.routing.auto.factory import auto_config, combo_pool, filter_variant, virtual_pool
from omniroute.routing.auto.variants import ADVERTISED_IDS, parse_auto_id
from omniroute.routing.decision import Decision
from omniroute.routing.services import RoutingServices
from omniroute.values import Candidate

__all__ = ["FLOOR_TOKENS", "auto_models", "auto_variants", "pool_limits"]

FLOOR_TOKENS: Final = 4096


def pool_limits(gw: RoutingServices, pool: Sequence[Candidate]) -> tuple[int, int]:
    """``(context_length, max_output_tokens)`` = MAX over ``pool``, never 0 (API-2)."""
    ctx = max((c.model.context_window for c in pool), default=0)
    mo = max((c.model.max_output_tokens for c in pool), default=0)
    if not ctx or not mo:
        known = [m for _, m in gw.registry.routable_models()]
        ctx = ctx or max((m.context_window for m in known), default=0) or FLOOR_TOKENS
        mo = mo or max((m.max_output_tokens for m in known), default=0) or FLOOR_TOKENS
    return ctx, mo


def auto_variants(gw: RoutingServices, *, include_combos: bool = True) -> list[dict[str, Any]]:
    """Every advertised auto id — and, with ``include_combos``, every persisted ``strategy: "auto"``
    combo — with its pool and limits (``GET /api/combos/auto``, AUTO-2)."""
    now = gw.clock.time()
    base = virtual_pool(gw.registry, now)
    out: list[dict[str, Any]] = []
    for vid in ADVERTISED_IDS:
        variant = parse_auto_id(vid)
        pool, note = filter_variant(base, variant)
        ctx, mo = pool_limits(gw, pool)
        out.append(
            {
                "id": vid,
                "channel": variant.channel,
                "weights": variant.pack or "default",
                "router": "lkgp",
                "exploration_rate": variant.exploration
                if variant.exploration is not None
                else gw.config.auto.exploration_rate,
                "filter": note,
                "context_length": ctx,
                "max_output_tokens": mo,
                "pool": [_member(c) for c in pool],
            }
        )
    if include_combos:
        out.extend(_persisted(gw, now))
    return out


def _persisted(gw: RoutingServices, now: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, combo in gw.registry.combos.items():
        if combo.strategy != "auto":
            continue
        pool = combo_pool(gw, combo, Decision(request_id="", requested_model=name), now)
        ctx, mo = pool_limits(gw, pool)
        opts = auto_config(combo)
        out.append(
            {
                "id": name,
                "channel": name,
                "persisted": True,
                "weights": opts.get("modePack") or ("custom" if opts.get("weights") else "default"),
                "router": opts.get("routerStrategy") or "rules",
                "context_length": ctx,
                "max_output_tokens": mo,
                "pool": [_member(c) for c in pool],
            }
        )
    return out


def _member(c: Candidate) -> dict[str, Any]:
    return {
        "key": c.key,
        "provider": c.provider.id,
        "model": c.model.id,
        "connection": c.connection.id,
        "context_length": c.model.context_window,
        "max_output_tokens": c.model.max_output_tokens,
    }


def auto_models(gw: RoutingServices) -> list[dict[str, Any]]:
    """``/v1/models`` entries for ``auto`` and the advertised variants (API-2, AUTO-1)."""
    return [
        {
            "id": v["id"],
            "object": "model",
            "created": 0,
            "owned_by": "auto",
            "context_length": v["context_length"],
            "max_output_tokens": v["max_output_tokens"],
        }
        for v in auto_variants(gw, include_combos=False)
    ]
