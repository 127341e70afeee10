"""Combos page: list, create, edit (targets, strategy, every strategy's options), delete, and "try
it" — send a prompt, see the answer and the decision (OPS-3, COMBO-1 … COMBO-6, BEYOND-2).

Data and actions: ``GET/POST /api/combos``, ``GET/PUT/DELETE /api/combos/{id}``, ``POST /api/try``;
validation messages and warnings (including ``COMBO_NAME_SHADOWS_MODEL``) are the API's own. The
options box takes the combo's ``config`` as JSON; :data:`STRATEGY_OPTIONS` lists what each strategy
reads, next to the box.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final

import orjson
from fastapi import APIRouter, Depends
from pydantic import ValidationError
from starlette.responses import Response

from omniroute.api.admin.combos import (
    ComboIn,
    ComboPatch,
    create_combo,
    delete_combo,
    get_combo,
    list_combos,
    update_combo,
)
from omniroute.api.admin.core import list_connections
from omniroute.api.admin.trial import TryIn, try_model
from omniroute.dashboard.web import PREFIX, Page, console_page, form_errors, redirect
from omniroute.errors import GatewayError, InvalidRequest
from omniroute.routing.model_list import model_list

router = APIRouter()
PageDep = Annotated[Page, Depends(console_page)]

COMMON_OPTIONS: Final = (
    ("maxRetries", "transient retries per target (default 1)"),
    ("maxAttempts", "upstream calls per request at most (default 10)"),
    ("targetTimeoutMs", "per-attempt timeout for every target (ms)"),
    ("connectionAwareExpansion", "one target per connection of a provider-level step (default false)"),
    ("promptCacheAffinityEnabled", "keep a prompt-cache key on one connection (default true)"),
    ("tagMatchMode", "X-OmniRoute-Tags matching: any | all"),
)
STRATEGY_OPTIONS: Final[Mapping[str, tuple[tuple[str, str], ...]]] = MappingProxyType(
    {
        "weighted": (("stickyWeightedLimit", "keep the drawn target for N successes (default 1 = off)"),),
        "round-robin": (("stickyRoundRobinLimit", "consecutive successes on one target (default 3)"),),
        "context-relay": (
            ("handoffMaxMessages", "messages summarised when the model changes"),
            ("handoffTtlMinutes", "how long a session's handoff is kept"),
        ),
        "reset-window": (("resetWindowTieBandMs", "resets this close count as a tie and rotate (ms)"),),
        "reset-aware": (("resetWindowTieBandMs", "resets this close count as a tie and rotate (ms)"),),
        "auto": (
            ("auto.candidatePool", "providers or provider/model ids to keep (default: all targets)"),
            ("auto.weights", "factor weights, renormalised to sum 1"),
            (
                "modePack",
                "ship-fast, cost-saver, quality-first, offline-friendly, reliability-first, chaos-mode",
            ),
            ("routerStrategy", "rules (default), score, cost, latency, sla-aware, lkgp"),
            ("explorationRate", "share of requests sent to a random healthy candidate (default 0.05)"),
            ("lkgpEnabled", "lkgp router: stick to the last known good provider (default true)"),
            ("budgetCap", "USD per request at most (estimated)"),
            ("budgetFallback", "cheapest | strict when nothing fits the cap"),
            ("slaTargetP95Ms", "sla-aware: latency target (default 2000)"),
            ("slaMaxErrorRate", "sla-aware: error-rate target (default 0.05)"),
            ("slaHardConstraints", "sla-aware: sort by violations first"),
            ("complexityAwareRouting", "score specificityMatch from the prompt"),
        ),
        "fusion": (
            ("fusionTuning.minPanel", "answers needed before the grace period (default 2)"),
            ("fusionTuning.stragglerGraceMs", "wait after quorum (default 8000)"),
            ("fusionTuning.panelHardTimeoutMs", "panel deadline (default 90000)"),
            ("fusionTuning.maxPanel", "panel members at most (default 40)"),
            ("judgeModel", "model that writes the answer (default: first panel member)"),
        ),
        "pipeline": (
            ("agenticOrchestration.enabled", "planner + executor with tool rounds"),
            ("agenticOrchestration.maxToolRounds", "tool rounds at most, 1–32 (default 8)"),
        ),
    }
)
"""The ``config`` keys each strategy reads beyond :data:`COMMON_OPTIONS` (COMBO-3 … COMBO-6, AUTO-2)."""
TARGET_FIELDS: Final = ("kind", "value", "connection", "weight", "priority", "timeout_ms", "prompt")


def _targets(page: Page) -> list[dict[str, Any]]:
    """Target rows of the form (``target_<field>`` lists) as API targets; empty rows are skipped."""
    assert page.form is not None
    columns = {f: page.form.getlist(f"target_{f}") for f in TARGET_FIELDS}
    out: list[dict[str, Any]] = []
    for i in range(len(columns["value"])):
        row = {f: str(col[i]).strip() if i < len(col) else "" for f, col in columns.items()}
        if not row["value"]:
            continue
        target: dict[str, Any] = {"combo_ref" if row["kind"] == "combo" else "model": row["value"]}
        for name, key in (("connection", "connection_id"), ("prompt", "prompt")):
            if row[name]:
                target[key] = row[name]
        for name in ("weight", "priority", "timeout_ms"):
            if row[name]:
                target[name] = row[name]  # the API's schema parses and checks the number
        out.append(target)
    return out


def _combo_data(page: Page) -> dict[str, Any]:
    """The form as a combo body; 400 naming ``config`` when the options are not a JSON object."""
    raw = page.field("config") or "{}"
    try:
        config = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"config: not valid JSON ({exc})", param="config") from None
    if not isinstance(config, dict):
        raise InvalidRequest("config: must be a JSON object", param="config")
    return {
        "name": page.field("name"),
        "strategy": page.field("strategy") or "priority",
        "description": page.field("description"),
        "enabled": page.field("enabled") == "on",
        "targets": _targets(page),
        "config": config,
    }


async def _editor(page: Page, combo: dict[str, Any] | None, status: int = 200, **extra: Any) -> Response:
    gw = page.gw
    return page.render(
        "combo_edit.html",
        status=status,
        combo=combo or {"strategy": "priority", "enabled": True, "targets": [], "config": {}},
        config_text=orjson.dumps((combo or {}).get("config") or {}, option=orjson.OPT_INDENT_2).decode(),
        strategies=gw.strategies.names(),
        options=STRATEGY_OPTIONS,
        common_options=COMMON_OPTIONS,
        models=[m["id"] for m in model_list(gw) if m.get("owned_by") not in ("combo", "auto")],
        combo_names=sorted(gw.registry.combos),
        connections=[c["id"] for c in (await list_connections(gw))["data"]],
        **extra,
    )


@router.get("/combos")
async def combos_page(page: PageDep) -> Response:
    """Every combo with its strategy and targets, and the "try it" box."""
    combos = (await list_combos(page.gw))["data"]
    names = sorted({*page.gw.registry.combos, *(c["name"] for c in combos)})
    return page.render("combos.html", combos=combos, try_models=names, chosen=None)


@router.get("/combos/new")
async def new_combo(page: PageDep) -> Response:
    """An empty editor."""
    return await _editor(page, None)


@router.get("/combos/options")
async def strategy_options(page: PageDep, strategy: str = "priority") -> Response:
    """The options help of one strategy (the editor swaps it in when the strategy changes)."""
    return page.render(
        "partials/strategy_options.html",
        strategy=strategy,
        options=STRATEGY_OPTIONS,
        common_options=COMMON_OPTIONS,
    )


@router.get("/combos/{combo_id}/edit")
async def edit_combo(combo_id: str, page: PageDep) -> Response:
    """The editor of one combo, with "try it" for it."""
    return await _editor(page, await get_combo(combo_id, page.gw))


async def _save(page: Page, combo_id: str | None) -> Response:
    current = await get_combo(combo_id, page.gw) if combo_id else None
    data: dict[str, Any] = {}
    try:
        data = _combo_data(page)
        if current is None:
            saved = await create_combo(ComboIn.model_validate(data), page.gw)
        else:
            saved = await update_combo(str(current["id"]), ComboPatch.model_validate(data), page.gw)
    except (GatewayError, ValidationError) as exc:
        message, field = form_errors(exc)
        shown = {**(current or {}), **data, "config": data.get("config", (current or {}).get("config"))}
        return await _editor(
            page, shown, status=422, error=message, field=field, raw_config=page.field("config")
        )
    response = await _editor(
        page, saved, saved=True, warning=saved.get("warning"), warnings=saved.get("warnings")
    )
    response.headers["HX-Push-Url"] = f"{PREFIX}/combos/{saved['id']}/edit"
    return response


@router.post("/combos")
async def create_page(page: PageDep) -> Response:
    """Create a combo; the API's validation message comes back on the form."""
    return await _save(page, None)


@router.post("/combos/{combo_id}")
async def update_page(combo_id: str, page: PageDep) -> Response:
    """Save a combo's changes; the API's validation message comes back on the form."""
    return await _save(page, combo_id)


@router.post("/combos/{combo_id}/delete")
async def delete_page(combo_id: str, page: PageDep) -> Response:
    """Delete a combo (its mappings go with it)."""
    await delete_combo(combo_id, page.gw)
    return redirect(f"{PREFIX}/combos", page)


@router.post("/try")
async def try_it(page: PageDep) -> Response:
    """Send the prompt to the chosen model or combo; the answer and its decision."""
    try:
        body = TryIn(model=page.field("model"), prompt=page.field("prompt"))
    except ValidationError as exc:
        message, _ = form_errors(exc)
        return page.render("partials/try_result.html", status=422, result=None, error=message)
    return page.render("partials/try_result.html", result=await try_model(body, page.gw), error=None)
