"""Validation of a combo written through the management API or the CLI (COMBO-1, COMBO-3, SPEC §4).

:func:`check_combo` applies the shared rules of :mod:`omniroute.core.combo` — the schema with the
strategy registry's names, then the rules over the set of stored combos (targets per strategy, fusion
panel size, refs, cycles, depth) and a unique name — and adds what only the routing snapshot knows:
unknown providers, models and connections are warnings, not errors (the catalog may be stale), and a
pinned ``connection_id`` of another provider than the target's is an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from omniroute.core.combo import Combo, ComboInvalid, combo_problems, parse_combo
from omniroute.routing.registry import Registry
from omniroute.routing.strategies import strategy_names

__all__ = ["check_combo"]


def check_combo(
    data: Mapping[str, Any],
    existing: Iterable[Mapping[str, Any]],
    reg: Registry | None,
    *,
    own_id: str | None = None,
    strategies: Sequence[str] | None = None,
) -> tuple[Combo, list[dict[str, Any]]]:
    """Validate a combo definition; returns ``(combo, warnings)`` or raises
    :class:`~omniroute.core.combo.ComboInvalid` naming the field.

    ``existing``: the stored combos as the store lists them (the one being edited, ``own_id``, is
    replaced by ``data``); ``reg``: the routing snapshot for catalog warnings (``None`` skips them);
    ``strategies``: the valid strategy names (default: every registered one). Warnings are
    ``{code, param, message}`` with codes ``UNKNOWN_PROVIDER``, ``UNKNOWN_MODEL``,
    ``PROVIDER_NOT_CONNECTED`` and ``UNKNOWN_CONNECTION``."""
    combo = parse_combo(data, strategy_names() if strategies is None else strategies)
    stored = (Combo.from_row(r) for r in existing if own_id is None or r.get("id") != own_id)
    others = {c.name: c for c in stored}
    problems = combo_problems(combo, others)
    if combo.name in others:
        problems.append(("name", f"a combo named '{combo.name}' already exists"))
    if problems:
        raise ComboInvalid(problems)
    warnings: list[dict[str, Any]] = []
    if reg is not None:
        for i, t in enumerate(combo.targets):
            if t.model is not None:
                _catalog_warnings(f"targets[{i}]", t.model, t.connection_id, reg, warnings)
    return combo, warnings


def _warn(warnings: list[dict[str, Any]], code: str, param: str, message: str) -> None:
    warnings.append({"code": code, "param": param, "message": message})


def _catalog_warnings(
    at: str, model: str, conn: str | None, reg: Registry, warnings: list[dict[str, Any]]
) -> None:
    cat = reg.catalog
    provider = None
    if "/" in model:
        prefix, rest = model.split("/", 1)
        provider = cat.provider(prefix)
        if provider is None and not cat.providers_serving(model):
            _warn(warnings, "UNKNOWN_PROVIDER", f"{at}.model", f"provider '{prefix}' is not in the catalog")
        elif provider is not None and provider.model(rest) is None:
            _warn(
                warnings, "UNKNOWN_MODEL", f"{at}.model", f"'{rest}' is not a known model of '{provider.id}'"
            )
        if provider is not None and not reg.is_connected(provider.id):
            _warn(
                warnings, "PROVIDER_NOT_CONNECTED", f"{at}.model", f"'{provider.id}' has no active connection"
            )
    elif not cat.providers_serving(model):
        _warn(warnings, "UNKNOWN_MODEL", f"{at}.model", f"no catalog provider lists model '{model}'")
    if conn is not None:
        c = reg.connections_by_id.get(conn)
        if c is None:
            _warn(
                warnings, "UNKNOWN_CONNECTION", f"{at}.connection_id", f"connection '{conn}' does not exist"
            )
        elif provider is not None and c.provider != provider.id:
            raise ComboInvalid(
                [
                    (
                        f"{at}.connection_id",
                        f"connection '{conn}' belongs to provider '{c.provider}', not '{provider.id}'",
                    )
                ]
            )
