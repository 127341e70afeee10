"""References between configured and stored objects: combo targets naming providers, models,
connections and other combos; combo mappings naming combos; fallback chains and connections naming
providers.

A dangling reference in the config file stops start-up (and a reload) with the key path, e.g.
``combos[0].targets[1]: unknown connection 'x'``. One in stored data (objects written through the
management API or the CLI, then left dangling by a later delete) cannot be fixed by editing a file, so
it is a loud warning at start and a ``warn`` row of ``omniroute doctor``; the router skips such a
target and records why in the decision.

A ``provider/model`` whose provider is known but whose model the catalog does not list is not a
dangling reference: it is routed with unknown prices (catalogs go stale; OpenRouter-style providers
serve any id).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from omniroute.core.combo import Combo

if TYPE_CHECKING:
    from omniroute.config import Config
    from omniroute.providers.catalog import Catalog
    from omniroute.values import Connection

log = logging.getLogger("omniroute")

__all__ = ["combo_target_problems", "config_problems", "stored_problems", "warn_stored_problems"]


def _model_problem(model: str, catalog: Catalog) -> str | None:
    if "/" in model:
        prefix = model.split("/", 1)[0]
        if catalog.provider(prefix) is None and not catalog.providers_serving(model):
            return f"unknown provider '{prefix}' (model '{model}')"
        return None
    if not catalog.providers_serving(model):
        return f"unknown model '{model}' (no provider lists it; write provider/model)"
    return None


def combo_target_problems(
    combo: Combo,
    catalog: Catalog,
    connection_ids: Collection[str] | None,
    combo_names: Collection[str],
) -> list[tuple[int, str]]:
    """``(target index, problem)`` for each target of ``combo`` naming an unknown provider or bare
    model (per ``catalog``), a connection not in ``connection_ids`` (``None`` skips that check: the
    connections could not be read) or a combo not in ``combo_names``."""
    out: list[tuple[int, str]] = []
    for j, t in enumerate(combo.targets):
        if t.combo_ref is not None and t.combo_ref not in combo_names:
            out.append((j, f"unknown combo '{t.combo_ref}'"))
        if t.model is not None and (problem := _model_problem(t.model, catalog)) is not None:
            out.append((j, problem))
        pin = t.connection_id
        if connection_ids is not None and pin is not None and pin not in connection_ids:
            out.append((j, f"unknown connection '{pin}'"))
    return out


def config_problems(
    config: Config,
    catalog: Catalog,
    *,
    stored_connection_ids: Iterable[str] = (),
    stored_combo_names: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """``(key path, problem)`` for every reference in ``config`` that names nothing: combo targets
    (``combos[i].targets[j]``), ``model_combo_mappings[i].combo`` and
    ``fallback_chains.<model>[i].provider``. Connections and combos may be declared in the file or
    stored (the ``stored_*`` ids and names)."""
    connection_ids = {c.id for c in config.connections} | set(stored_connection_ids)
    combo_names = {c.name for c in config.combos} | set(stored_combo_names)
    errors = [
        (f"combos[{i}].targets[{j}]", problem)
        for i, combo in enumerate(config.combos)
        for j, problem in combo_target_problems(combo, catalog, connection_ids, combo_names)
    ]
    errors += [
        (f"model_combo_mappings[{i}].combo", f"unknown combo '{m.combo}'")
        for i, m in enumerate(config.model_combo_mappings)
        if m.combo not in combo_names
    ]
    errors += [
        (f"fallback_chains.{model}[{i}].provider", f"unknown provider '{e.provider}'")
        for model, entries in config.fallback_chains.items()
        for i, e in enumerate(entries)
        if catalog.provider(e.provider) is None
    ]
    return errors


def stored_problems(
    catalog: Catalog,
    connections: Iterable[Connection] | None,
    combo_rows: Iterable[Mapping[str, Any]],
) -> list[tuple[str, str]]:
    """``(where, problem)`` for stored objects that name nothing: a connection of an unknown provider
    (``connection 'c1'``) and combo targets (``combo 'x' targets[1]``). ``connections`` ``None`` (not
    readable, e.g. the secret key does not open them) skips the connection checks."""
    combos = [Combo.from_row(r) for r in combo_rows]
    names = {c.name for c in combos}
    conns = list(connections) if connections is not None else None
    ids = {c.id for c in conns} if conns is not None else None
    out = [
        (f"connection '{c.id}'", f"unknown provider '{c.provider}'")
        for c in conns or ()
        if catalog.provider(c.provider) is None
    ]
    out += [
        (f"combo '{combo.name}' targets[{j}]", problem)
        for combo in combos
        for j, problem in combo_target_problems(combo, catalog, ids, names)
    ]
    return out


def warn_stored_problems(problems: list[tuple[str, str]]) -> None:
    """Log each stored dangling reference as a warning the operator cannot miss at start."""
    for where, problem in problems:
        log.warning(
            "stored data: %s: %s — it is skipped when routing; fix or delete it "
            "(management API, console or CLI)",
            where,
            problem,
        )
