"""In-memory snapshot of what routing reads on the hot path: catalog, connections, fallback chains,
combos and mappings (DESIGN: no DB access per request). Combos and model→combo mappings are the typed
schema of :mod:`omniroute.core.combo` (COMBO-1, COMBO-2), built once per snapshot.

The snapshot is rebuilt from the store after every management edit (``Gateway.refresh``), so an edit
applies to the very next request (COMBO-1) while requests never touch the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from omniroute.config import ModelAliasConfig
from omniroute.core.combo import Combo, ComboMapping
from omniroute.providers.catalog import Catalog
from omniroute.values import Connection, ModelInfo, ProviderInfo


@dataclass(frozen=True, slots=True)
class ChainEntry:
    """One RESIL-4 fallback-chain entry: provider, priority (lower first), enabled."""

    provider: str
    priority: int = 0
    enabled: bool = True


@dataclass
class Registry:
    """Routing's read model. ``connections`` is keyed by provider id, each list sorted by priority;
    ``combos`` holds the enabled combos by name (``combos_lower``: lower-case name → name);
    ``mappings`` the enabled model→combo mappings, highest priority first; ``aliases`` the config's
    ``model_aliases`` in file order (SPEC §4)."""

    catalog: Catalog
    connections: dict[str, list[Connection]] = field(default_factory=dict)
    connections_by_id: dict[str, Connection] = field(default_factory=dict)
    chains: dict[str, list[ChainEntry]] = field(default_factory=dict)
    combos: dict[str, Combo] = field(default_factory=dict)
    combos_lower: dict[str, str] = field(default_factory=dict)
    mappings: list[ComboMapping] = field(default_factory=list)
    aliases: tuple[ModelAliasConfig, ...] = ()
    version: int = 0
    # Read models derived from this snapshot (e.g. expanded combo targets), dropped with it.
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def build(
        catalog: Catalog,
        connections: Iterable[Connection],
        chains: Mapping[str, list[dict[str, Any]]] | None = None,
        combos: Iterable[Combo] = (),
        mappings: Iterable[ComboMapping] = (),
        version: int = 0,
        aliases: Iterable[ModelAliasConfig] = (),
    ) -> Registry:
        """Assemble a snapshot; connections of each provider ordered by ``priority`` then id (PROV-3)."""
        by_provider: dict[str, list[Connection]] = {}
        by_id: dict[str, Connection] = {}
        for c in connections:
            by_id[c.id] = c
            by_provider.setdefault(c.provider, []).append(c)
        for conns in by_provider.values():
            conns.sort(key=lambda c: (c.priority, c.id))
        chain_map = {
            model: sorted(
                (
                    ChainEntry(e["provider"], int(e.get("priority", i)), bool(e.get("enabled", True)))
                    for i, e in enumerate(entries)
                ),
                key=lambda e: e.priority,
            )
            for model, entries in (chains or {}).items()
        }
        combo_map = {c.name: c for c in combos if c.enabled}
        return Registry(
            catalog=catalog,
            connections=by_provider,
            connections_by_id=by_id,
            chains=chain_map,
            combos=combo_map,
            combos_lower={name.lower(): name for name in combo_map},
            mappings=sorted((m for m in mappings if m.enabled), key=lambda m: -m.priority),
            aliases=tuple(aliases),
            version=version,
        )

    def active_connections(self, provider: str) -> list[Connection]:
        """Active connections of ``provider`` in priority order (PROV-3 ``is_active``)."""
        return [c for c in self.connections.get(provider, ()) if c.is_active]

    def is_connected(self, provider: str) -> bool:
        """True when the provider has at least one active connection."""
        return any(c.is_active for c in self.connections.get(provider, ()))

    def model_info(self, provider: ProviderInfo, model_id: str) -> ModelInfo:
        """The catalog entry, or a bare entry for a model the catalog lacks: free on a local
        provider, with unknown prices elsewhere."""
        known = provider.model(model_id)
        if known is not None:
            return known
        if provider.local:
            return ModelInfo(id=model_id, input_price=0.0, output_price=0.0, price_source="local")
        return ModelInfo(id=model_id, price_source="unknown")

    def routable_models(self) -> list[tuple[ProviderInfo, ModelInfo]]:
        """Every connected ``provider/model`` pair in catalog order (API-2)."""
        out: list[tuple[ProviderInfo, ModelInfo]] = []
        for p in self.catalog.providers:
            if self.is_connected(p.id):
                out.extend((p, m) for m in p.models)
        return out
