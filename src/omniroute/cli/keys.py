"""``omniroute keys``: create, list, update and revoke client API keys (API-8) through the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from omniroute.accounting.budget import Budgets
from omniroute.accounting.budget import update_key as update_stored_key
from omniroute.clock import SystemClock
from omniroute.config import Config
from omniroute.store import Store

if TYPE_CHECKING:
    from omniroute.cli.common import LazyConsole


async def _open(cfg: Config) -> Store:
    from omniroute.gateway import data_dir_for

    return await Store.open(cfg.database_url, data_dir=data_dir_for(cfg.database_url))


async def create_key(cfg: Config, name: str, allowed: tuple[str, ...], budget_usd: float | None) -> str:
    """Create a key and return its plaintext (shown once)."""
    store = await _open(cfg)
    try:
        _, plaintext = await store.create_api_key(name, allowed_models=allowed, budget_usd=budget_usd)
        return plaintext
    finally:
        await store.close()


async def list_keys(cfg: Config, console: LazyConsole) -> None:
    store = await _open(cfg)
    try:
        table = Table("id", "name", "prefix", "allowed models", "budget $", "spent $", "revoked")
        budgets = Budgets(SystemClock(), lambda: store, None)
        for k in map(budgets.current, await store.list_api_keys()):  # spend of the current period
            cap = k.get("budget_usd")
            period = k.get("budget_period") or "total"
            table.add_row(
                str(k["id"]),
                k["name"],
                str(k.get("key_prefix", "")),
                ",".join(k.get("allowed_models") or []),
                "-" if cap is None else (f"{cap:g}" if period == "total" else f"{cap:g}/{period}"),
                f"{float(k.get('spent_usd') or 0):.4f}",
                "yes" if k.get("revoked") else "no",
            )
        console.print(table)
    finally:
        await store.close()


def key_changes(
    *,
    allowed: list[str] | None,
    budget_usd: float | None,
    no_budget: bool,
    period: str | None,
    expires: str | None,
    rpm: int | None,
    tpm: int | None,
) -> dict[str, Any]:
    """The changes the ``keys update`` options ask for, validated by the same rules as
    ``PATCH /api/keys/{id}`` (an ``--expires`` already in the past too); raises ``ValueError``
    naming the option."""
    from pydantic import ValidationError

    from omniroute.api.admin.core import KeyUpdate

    if no_budget and budget_usd is not None:
        raise ValueError("--budget and --no-budget contradict each other")
    raw: dict[str, Any] = {}
    if allowed:
        raw["allowed_models"] = allowed
    if no_budget:
        raw["budget_usd"] = None
    elif budget_usd is not None:
        raw["budget_usd"] = budget_usd
    if period is not None:
        raw["budget_period"] = period
    if expires is not None:
        raw["expires_at"] = None if expires.strip().lower() == "never" else expires
    for name, value in (("rpm", rpm), ("tpm", tpm)):
        if value is not None:
            raw[name] = value or None
    from omniroute.api.admin.core import reject_past_expiry
    from omniroute.errors import InvalidRequest

    try:
        changes = KeyUpdate.model_validate(raw).changes()
        reject_past_expiry(changes.get("expires_at"), SystemClock().time())
    except ValidationError as exc:
        raise ValueError(_option_error(exc)) from None
    except InvalidRequest as exc:
        raise ValueError("--expires" + str(exc.message).removeprefix("expires_at")) from None
    return changes


_OPTIONS = {"budget_usd": "--budget", "budget_period": "--period", "expires_at": "--expires"}


def _option_error(exc: Any) -> str:
    """The first error of a ``KeyCreate``/``KeyUpdate`` ``ValidationError`` as ``--option: message``
    (``--budget: Input should be greater than or equal to 0``), worded as the API words it."""
    from omniroute.core.fields import field_message

    first = exc.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else "body"
    return f"{_OPTIONS.get(field, '--' + field.replace('_models', ''))}: {field_message(first)}"


def key_create_fields(name: str, allowed: tuple[str, ...], budget_usd: float | None) -> dict[str, Any]:
    """The ``keys create`` options validated by the same rules as ``POST /api/keys`` (``KeyCreate``):
    ``{name, allowed_models, budget_usd}``; raises ``ValueError`` naming the option."""
    from pydantic import ValidationError

    from omniroute.api.admin.core import KeyCreate

    try:
        body = KeyCreate.model_validate(
            {"name": name, "allowed_models": list(allowed), "budget_usd": budget_usd}
        )
    except ValidationError as exc:
        raise ValueError(_option_error(exc)) from None
    return {"name": body.name, "allowed_models": tuple(body.allowed_models), "budget_usd": body.budget_usd}


async def update_key(cfg: Config, key: str, changes: dict[str, Any]) -> dict[str, Any] | None:
    """Apply ``changes`` to the key named by id or name; its record, or ``None`` when no such key. A
    running gateway picks the change up within its store poll interval."""
    store = await _open(cfg)
    try:
        return await update_stored_key(store, key, changes, SystemClock().time())
    finally:
        await store.close()


async def revoke_key(cfg: Config, key: str) -> str:
    """Revoke the key named by id or name: ``"revoked"``, ``"already revoked"`` or ``"missing"``."""
    store = await _open(cfg)
    try:
        rec = next((k for k in await store.list_api_keys() if key in (k["id"], k["name"])), None)
        if rec is None:
            return "missing"
        if rec.get("revoked"):
            return "already revoked"
        return "revoked" if await store.revoke_api_key(key) else "missing"
    finally:
        await store.close()
