"""Combos (COMBO-1) and model→combo glob mappings (COMBO-2).

The store only persists: a combo row is the JSON of the shared schema
(:meth:`omniroute.core.combo.Combo.to_json`) plus ``sort_order``, ``id`` and timestamps, and routing
reads it back with :meth:`~omniroute.core.combo.Combo.from_row`; validation (strategies, targets,
combo-ref cycles) belongs to the edges that write it. Dicts in and out; read-only keys (``id``,
``created_at``, ``updated_at``) in input are ignored so a client can send back what it read.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

from sqlalchemy import delete, or_, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from omniroute.core.combo import DEFAULT_STRATEGY, Combo
from omniroute.store import models
from omniroute.store.errors import StoreConflict, StoreNotFound
from omniroute.store.repos._base import RepoBase

_combo = models.combos
_map = models.model_combo_mappings

_READ_ONLY: Final = frozenset({"id", "created_at", "updated_at"})
_COMBO_FIELDS: Final = frozenset({*Combo.model_fields, "sort_order"})
_MAPPING_DEFAULTS: Final[Mapping[str, Any]] = {"priority": 0, "enabled": True, "description": ""}
_MAPPING_FIELDS: Final = frozenset({"pattern", "combo_id", *_MAPPING_DEFAULTS})


def _combo_defaults() -> dict[str, Any]:
    return {
        "strategy": DEFAULT_STRATEGY,
        "targets": [],
        "config": {},
        "description": "",
        "enabled": True,
        "sort_order": 0,
    }


def _fields(data: Mapping[str, Any], allowed: frozenset[str], what: str) -> dict[str, Any]:
    unknown = set(data) - allowed - _READ_ONLY - {"combo", "combo_name"}
    if unknown:
        raise ValueError(f"unknown {what} field(s): {', '.join(sorted(unknown))}")
    out = {k: v for k, v in data.items() if k in allowed}
    if "description" in out and out["description"] is None:
        out["description"] = ""  # the column is NOT NULL; "no description" is stored as ""
    return out


def _combo_dict(r: RowMapping) -> dict[str, Any]:
    d = dict(r)
    d["enabled"] = bool(d["enabled"])
    return d


class CombosRepo(RepoBase):
    """Persisted combos and mappings; combo lookups accept an id or a name."""

    # combos --------------------------------------------------------------------------------------

    async def list_combos(self) -> list[dict[str, Any]]:
        """Every combo ``{id, name, strategy, targets, config, description, enabled, sort_order,
        created_at, updated_at}``, by ``sort_order`` then name (COMBO-1)."""
        async with self._engine.connect() as conn:
            rows = (
                await conn.execute(select(_combo).order_by(_combo.c.sort_order, _combo.c.name))
            ).mappings()
            return [_combo_dict(r) for r in rows]

    async def get_combo(self, id_or_name: str) -> dict[str, Any] | None:
        """One combo by id, else by exact name; ``None`` when neither matches."""
        async with self._engine.connect() as conn:
            row = await self._find_combo(conn, id_or_name)
        return _combo_dict(row) if row is not None else None

    async def create_combo(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Insert a combo from ``data`` (``name`` required; other fields default) and return it.

        An ``id`` in ``data`` is ignored; a fresh uuid hex is assigned. Raises :class:`StoreConflict` on a
        duplicate name (COMBO-1: 400) and ``ValueError`` on a missing name or unknown fields.
        """
        fields = _fields(data, _COMBO_FIELDS, "combo")
        name = fields.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("combo needs a non-empty 'name'")
        ts = self._now()
        values = {**_combo_defaults(), **fields, "id": uuid.uuid4().hex, "created_at": ts, "updated_at": ts}
        try:
            async with self._engine.begin() as conn:
                await self._check_name_free(conn, name, None)
                await conn.execute(_combo.insert(), values)
                row = (await conn.execute(select(_combo).where(_combo.c.id == values["id"]))).mappings().one()
        except IntegrityError as exc:  # a concurrent writer took the name between check and insert
            raise StoreConflict(f"a combo named {name!r} already exists") from exc
        return _combo_dict(row)

    async def update_combo(self, id_or_name: str, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """Apply the given fields to a combo and return it; ``None`` when it does not exist.

        Raises :class:`StoreConflict` when renaming onto another combo's name.
        """
        fields = _fields(data, _COMBO_FIELDS, "combo")
        if "name" in fields and (not isinstance(fields["name"], str) or not fields["name"]):
            raise ValueError("combo 'name' must be a non-empty string")
        async with self._engine.begin() as conn:
            row = await self._find_combo(conn, id_or_name)
            if row is None:
                return None
            if "name" in fields:
                await self._check_name_free(conn, fields["name"], row["id"])
            try:
                await conn.execute(
                    update(_combo).where(_combo.c.id == row["id"]).values(**fields, updated_at=self._now())
                )
            except IntegrityError as exc:
                raise StoreConflict(f"a combo named {fields.get('name')!r} already exists") from exc
            new = (await conn.execute(select(_combo).where(_combo.c.id == row["id"]))).mappings().one()
        return _combo_dict(new)

    async def delete_combo(self, id_or_name: str) -> bool:
        """Delete a combo and, by ``ON DELETE CASCADE``, its mappings; ``False`` when it did not exist."""
        async with self._engine.begin() as conn:
            res = await conn.execute(
                delete(_combo).where(or_(_combo.c.id == id_or_name, _combo.c.name == id_or_name))
            )
        return bool(res.rowcount)

    async def upsert_combo_by_name(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Create the combo ``data["name"]`` or overwrite the given fields of the existing one (config load).

        The id of an existing combo is kept, so its mappings stay attached.
        """
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("combo needs a non-empty 'name'")
        async with self._engine.connect() as conn:
            exists = await conn.scalar(select(_combo.c.id).where(_combo.c.name == name))
        if exists is None:
            try:
                return await self.create_combo(data)
            except StoreConflict:
                pass  # another replica created it meanwhile; fall through to the update
        updated = await self.update_combo(name, data)
        if updated is None:
            raise StoreNotFound(f"combo {name!r} vanished during upsert")
        return updated

    async def _find_combo(self, conn: AsyncConnection, id_or_name: str) -> RowMapping | None:
        row = (await conn.execute(select(_combo).where(_combo.c.id == id_or_name))).mappings().first()
        if row is None:
            row = (await conn.execute(select(_combo).where(_combo.c.name == id_or_name))).mappings().first()
        return row

    async def _check_name_free(self, conn: AsyncConnection, name: str, own_id: str | None) -> None:
        other = await conn.scalar(select(_combo.c.id).where(_combo.c.name == name))
        if other is not None and other != own_id:
            raise StoreConflict(f"a combo named {name!r} already exists")

    # mappings ------------------------------------------------------------------------------------

    async def list_mappings(self) -> list[dict[str, Any]]:
        """Every mapping ``{id, pattern, combo_id, combo_name, priority, enabled, description, created_at,
        updated_at}``, highest ``priority`` first (COMBO-2, RES step 3)."""
        async with self._engine.connect() as conn:
            rows = (
                await conn.execute(
                    self._mapping_select().order_by(_map.c.priority.desc(), _map.c.created_at, _map.c.id)
                )
            ).mappings()
            return [_mapping_dict(r) for r in rows]

    async def get_mapping(self, id: str) -> dict[str, Any] | None:
        """One mapping, or ``None``."""
        async with self._engine.connect() as conn:
            row = (await conn.execute(self._mapping_select().where(_map.c.id == id))).mappings().first()
        return _mapping_dict(row) if row is not None else None

    async def create_mapping(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Insert a mapping ``{pattern, combo_id | combo (id or name), priority, enabled, description}``.

        Raises :class:`StoreNotFound` when the combo does not exist, ``ValueError`` without a pattern.
        """
        fields = _fields(data, _MAPPING_FIELDS, "mapping")
        pattern = fields.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("mapping needs a non-empty 'pattern'")
        ts = self._now()
        mapping_id = uuid.uuid4().hex
        async with self._engine.begin() as conn:
            fields["combo_id"] = await self._combo_id_for(conn, data)
            values = {**_MAPPING_DEFAULTS, **fields, "id": mapping_id, "created_at": ts, "updated_at": ts}
            await conn.execute(_map.insert(), values)
            row = (await conn.execute(self._mapping_select().where(_map.c.id == mapping_id))).mappings().one()
        return _mapping_dict(row)

    async def update_mapping(self, id: str, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """Apply the given fields to a mapping and return it; ``None`` when it does not exist.

        Raises :class:`StoreNotFound` when a new combo reference does not exist.
        """
        fields = _fields(data, _MAPPING_FIELDS, "mapping")
        async with self._engine.begin() as conn:
            exists = await conn.scalar(select(_map.c.id).where(_map.c.id == id))
            if exists is None:
                return None
            if "combo_id" in data or "combo" in data:
                fields["combo_id"] = await self._combo_id_for(conn, data)
            await conn.execute(update(_map).where(_map.c.id == id).values(**fields, updated_at=self._now()))
            row = (await conn.execute(self._mapping_select().where(_map.c.id == id))).mappings().one()
        return _mapping_dict(row)

    async def delete_mapping(self, id: str) -> bool:
        """Delete a mapping; ``False`` when it did not exist."""
        async with self._engine.begin() as conn:
            res = await conn.execute(delete(_map).where(_map.c.id == id))
        return bool(res.rowcount)

    async def upsert_mapping_by_pattern(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Create the mapping for ``data["pattern"]`` or update the existing one (config load, idempotent)."""
        pattern = data.get("pattern")
        async with self._engine.connect() as conn:
            existing = await conn.scalar(select(_map.c.id).where(_map.c.pattern == pattern))
        if existing is not None:
            updated = await self.update_mapping(existing, data)
            if updated is not None:
                return updated
        return await self.create_mapping(data)

    async def upsert_mapping_from_config(
        self, pattern: str, combo: str, priority: int = 0, enabled: bool = True, description: str = ""
    ) -> dict[str, Any]:
        """Config form of :meth:`upsert_mapping_by_pattern`; ``combo`` is a combo id or name (COMBO-2)."""
        return await self.upsert_mapping_by_pattern(
            {
                "pattern": pattern,
                "combo": combo,
                "priority": priority,
                "enabled": enabled,
                "description": description,
            }
        )

    @staticmethod
    def _mapping_select() -> Any:
        return select(_map, _combo.c.name.label("combo_name")).join(_combo, _combo.c.id == _map.c.combo_id)

    async def _combo_id_for(self, conn: AsyncConnection, data: Mapping[str, Any]) -> str:
        ref = data.get("combo_id") or data.get("combo")
        if not isinstance(ref, str) or not ref:
            raise StoreNotFound("mapping needs 'combo_id' (or 'combo': a combo id or name)")
        row = await self._find_combo(conn, ref)
        if row is None:
            raise StoreNotFound(f"combo {ref!r} does not exist")
        return str(row["id"])


def _mapping_dict(r: RowMapping) -> dict[str, Any]:
    d = dict(r)
    d["enabled"] = bool(d["enabled"])
    return d
