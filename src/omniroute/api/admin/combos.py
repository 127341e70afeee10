"""Combos (COMBO-1) and model→combo mappings (COMBO-2) in the management API.

``GET/POST /api/combos``, ``GET/PUT/DELETE /api/combos/{id}`` (id or name) and the same for
``/api/model-combo-mappings``. Bodies are the shared combo schema (:mod:`omniroute.core.combo`, the
same as a config-file combo; the request models below derive from it, so ``/openapi.json`` shows it)
and are validated by :func:`~omniroute.routing.combo_validation.check_combo` (schema with the
registered strategy names, targets, refs, cycles, depth, unique name); every failure is a 400 naming
the field. Unknown providers/models/connections come back as ``warnings`` (the catalog may be stale); a
combo whose name equals a catalog model id carries ``warning: {code: "COMBO_NAME_SHADOWS_MODEL",
modelId, providerId}`` on create and rename (SPEC §4). Every edit rebuilds the routing snapshot
(``Gateway.refresh``), so it applies to the very next request.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from omniroute.api.admin.core import Admin
from omniroute.core.combo import (
    DEFAULT_MAPPING_PRIORITY,
    Combo,
    ComboInvalid,
    ComboName,
    ComboTarget,
    MappingPattern,
    OptionsMap,
)
from omniroute.core.fields import Int, NonEmpty
from omniroute.errors import GatewayError, InvalidRequest
from omniroute.gateway import Gateway
from omniroute.routing.auto.listing import auto_variants
from omniroute.routing.combo_validation import check_combo
from omniroute.routing.combos import shadowed_model
from omniroute.store import Store
from omniroute.store.errors import StoreConflict, StoreNotFound

router = APIRouter(tags=["combos"])

_READ_ONLY = frozenset({"id", "created_at", "updated_at"})


class TargetIn(ComboTarget):
    """One combo target (step): exactly one of ``model`` (``provider/model`` or a model id; a bare
    string is a model step) and ``combo_ref`` (another combo's name). The keys are those of a
    config-file target; any other key is a 400 naming it."""


class ComboIn(Combo):
    """``POST /api/combos``: a new combo. ``strategy`` is a registered strategy name (the 19
    built-ins, any case, or one added by an extension)."""

    targets: tuple[TargetIn, ...] = ()
    sort_order: Int = 0
    id: str | None = Field(default=None, description="ignored (read-only)")
    created_at: float | None = Field(default=None, description="ignored (read-only)")
    updated_at: float | None = Field(default=None, description="ignored (read-only)")


class ComboPatch(BaseModel):
    """``PUT /api/combos/{id}``: the fields to change (others keep their value); the result is
    validated as a whole, as on create."""

    model_config = ConfigDict(extra="forbid")

    name: ComboName | None = None
    strategy: NonEmpty | None = None
    targets: tuple[TargetIn, ...] | None = None
    config: OptionsMap | None = None
    description: str | None = None
    enabled: bool | None = None
    sort_order: Int | None = None
    id: str | None = Field(default=None, description="ignored (read-only)")
    created_at: float | None = Field(default=None, description="ignored (read-only)")
    updated_at: float | None = Field(default=None, description="ignored (read-only)")


class MappingIn(BaseModel):
    """``POST /api/model-combo-mappings``: glob ``pattern`` (``*``, ``?``, case-insensitive) → combo
    (``combo_id``, or ``combo`` = id or name); higher ``priority`` first."""

    model_config = ConfigDict(extra="forbid")

    pattern: MappingPattern
    combo_id: str | None = None
    combo: str | None = None
    priority: Int = DEFAULT_MAPPING_PRIORITY
    enabled: bool = True
    description: str = ""
    id: str | None = Field(default=None, description="ignored (read-only)")
    combo_name: str | None = Field(default=None, description="ignored (read-only)")
    created_at: float | None = Field(default=None, description="ignored (read-only)")
    updated_at: float | None = Field(default=None, description="ignored (read-only)")


class MappingPatch(BaseModel):
    """``PUT /api/model-combo-mappings/{id}``: the fields to change."""

    model_config = ConfigDict(extra="forbid")

    pattern: MappingPattern | None = None
    combo_id: str | None = None
    combo: str | None = None
    priority: Int | None = None
    enabled: bool | None = None
    description: str | None = None
    id: str | None = Field(default=None, description="ignored (read-only)")
    combo_name: str | None = Field(default=None, description="ignored (read-only)")
    created_at: float | None = Field(default=None, description="ignored (read-only)")
    updated_at: float | None = Field(default=None, description="ignored (read-only)")


def _store(gw: Gateway) -> Store:
    assert gw.store is not None
    return gw.store


def _not_found(what: str, key: str) -> GatewayError:
    return GatewayError(f"No {what} '{key}'.", status=404, code="not_found")


def _with_warnings(
    gw: Gateway, row: dict[str, Any], warnings: list[dict[str, Any]], *, named: bool
) -> dict[str, Any]:
    out = dict(row)
    if warnings:
        out["warnings"] = warnings
    hit = shadowed_model(gw.registry, str(row["name"])) if named else None
    if hit is not None:
        out["warning"] = {
            "code": "COMBO_NAME_SHADOWS_MODEL",
            "modelId": hit[0],
            "providerId": hit[1],
            "message": f"combo '{row['name']}' shadows model {hit[1]}/{hit[0]}: "
            "requests for that id now use the combo",
        }
    return out


def _checked(
    gw: Gateway, data: dict[str, Any], existing: list[dict[str, Any]], own_id: str | None
) -> tuple[Combo, list[dict[str, Any]]]:
    try:
        return check_combo(data, existing, gw.registry, own_id=own_id, strategies=gw.strategies.names())
    except ComboInvalid as exc:
        raise InvalidRequest(f"{exc.param}: {exc.message}", param=exc.param) from None


async def _write(gw: Gateway, op: Any) -> Any:
    try:
        result = await op
    except StoreConflict as exc:
        raise InvalidRequest(str(exc), param="name") from None
    except StoreNotFound as exc:
        raise GatewayError(str(exc), status=404, code="not_found") from None
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
    await gw.refresh()
    return result


# combos ------------------------------------------------------------------------------------------


@router.get("/api/combos")
async def list_combos(gw: Admin) -> dict[str, Any]:
    """Every combo ``{id, name, strategy, targets, config, description, enabled, sort_order, …}``."""
    return {"data": await _store(gw).list_combos()}


@router.get("/api/combos/auto")
async def list_auto_combos(gw: Admin) -> dict[str, Any]:
    """``auto`` and its advertised variants with their pools and limits (AUTO-1); kept ahead of
    ``/api/combos/{id}`` so the literal path is not read as a combo id."""
    return {"data": auto_variants(gw)}


@router.post("/api/combos", status_code=201)
async def create_combo(body: ComboIn, gw: Admin) -> dict[str, Any]:
    """Create a combo (201). 400 for an invalid or duplicate definition; see the module docstring."""
    store = _store(gw)
    combo, warnings = _checked(gw, body.to_json(), await store.list_combos(), None)
    row = await _write(gw, store.create_combo({**combo.to_json(), "sort_order": body.sort_order}))
    return _with_warnings(gw, row, warnings, named=True)


@router.get("/api/combos/{combo_id:path}")
async def get_combo(combo_id: str, gw: Admin) -> dict[str, Any]:
    """One combo by id or name."""
    row = await _store(gw).get_combo(combo_id)
    if row is None:
        raise _not_found("combo", combo_id)
    return row


@router.put("/api/combos/{combo_id:path}")
async def update_combo(combo_id: str, body: ComboPatch, gw: Admin) -> dict[str, Any]:
    """Change a combo's fields; the whole result is validated as on create."""
    store = _store(gw)
    row = await store.get_combo(combo_id)
    if row is None:
        raise _not_found("combo", combo_id)
    patch = body.model_dump(mode="json", exclude_none=True, exclude={*_READ_ONLY, "sort_order"})
    merged = {**Combo.from_row(row).to_json(), **patch}
    combo, warnings = _checked(gw, merged, await store.list_combos(), str(row["id"]))
    fields = combo.to_json()
    if body.sort_order is not None:
        fields["sort_order"] = body.sort_order
    updated = await _write(gw, store.update_combo(str(row["id"]), fields))
    if updated is None:
        raise _not_found("combo", combo_id)
    return _with_warnings(gw, updated, warnings, named=combo.name != row["name"])


@router.delete("/api/combos/{combo_id:path}")
async def delete_combo(combo_id: str, gw: Admin) -> dict[str, Any]:
    """Delete a combo and its mappings. Combos that referenced it are listed in ``warnings`` (their
    ``combo_ref`` is skipped from now on)."""
    store = _store(gw)
    row = await store.get_combo(combo_id)
    if row is None:
        raise _not_found("combo", combo_id)
    await _write(gw, store.delete_combo(str(row["id"])))
    users = [c["name"] for c in await store.list_combos() if row["name"] in Combo.from_row(c).refs()]
    out: dict[str, Any] = {"deleted": row["id"], "name": row["name"]}
    if users:
        out["warnings"] = [
            {"code": "DANGLING_COMBO_REF", "message": f"combo '{u}' referenced '{row['name']}'", "combo": u}
            for u in users
        ]
    return out


# mappings ----------------------------------------------------------------------------------------


async def _combo_ref_for(store: Store, combo_id: str | None, combo: str | None) -> str:
    ref = combo_id or combo
    if not ref:
        raise InvalidRequest("a mapping needs 'combo_id' (or 'combo': a combo id or name)", param="combo_id")
    row = await store.get_combo(ref)
    if row is None:
        raise InvalidRequest(f"no combo '{ref}'", param="combo_id" if combo_id else "combo")
    return str(row["id"])


@router.get("/api/model-combo-mappings")
async def list_mappings(gw: Admin) -> dict[str, Any]:
    """Every mapping ``{id, pattern, combo_id, combo_name, priority, enabled, description}``,
    highest priority first."""
    return {"data": await _store(gw).list_mappings()}


@router.post("/api/model-combo-mappings", status_code=201)
async def create_mapping(body: MappingIn, gw: Admin) -> dict[str, Any]:
    """Create a mapping (201); 400 when the pattern is empty or the combo does not exist."""
    store = _store(gw)
    data = {
        "pattern": body.pattern,
        "combo_id": await _combo_ref_for(store, body.combo_id, body.combo),
        "priority": body.priority,
        "enabled": body.enabled,
        "description": body.description,
    }
    result: dict[str, Any] = await _write(gw, store.create_mapping(data))
    return result


@router.get("/api/model-combo-mappings/{mapping_id}")
async def get_mapping(mapping_id: str, gw: Admin) -> dict[str, Any]:
    """One mapping."""
    row = await _store(gw).get_mapping(mapping_id)
    if row is None:
        raise _not_found("mapping", mapping_id)
    return row


@router.put("/api/model-combo-mappings/{mapping_id}")
async def update_mapping(mapping_id: str, body: MappingPatch, gw: Admin) -> dict[str, Any]:
    """Change a mapping's fields."""
    store = _store(gw)
    if await store.get_mapping(mapping_id) is None:
        raise _not_found("mapping", mapping_id)
    data = body.model_dump(
        exclude_none=True, exclude={"id", "combo_name", "created_at", "updated_at", "combo"}
    )
    if body.combo_id is not None or body.combo is not None:
        data["combo_id"] = await _combo_ref_for(store, body.combo_id, body.combo)
    updated = await _write(gw, store.update_mapping(mapping_id, data))
    if updated is None:
        raise _not_found("mapping", mapping_id)
    result: dict[str, Any] = updated
    return result


@router.delete("/api/model-combo-mappings/{mapping_id}")
async def delete_mapping(mapping_id: str, gw: Admin) -> dict[str, Any]:
    """Delete a mapping."""
    if not await _write(gw, _store(gw).delete_mapping(mapping_id)):
        raise _not_found("mapping", mapping_id)
    return {"deleted": mapping_id}
