"""Start-up wiring: config objects into the store (OPS-2: config wins over stored copies of the same
id), the catalog with overrides and custom providers (PROV-2) whose wire formats the registry knows
(PROV-1), and the resilience ladder from ``resilience`` settings (RESIL-1 … RESIL-3).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from omniroute import wire
from omniroute.clock import Clock
from omniroute.config import Config, ConfigError, ProviderConfig
from omniroute.core.combo import missing_targets
from omniroute.providers.catalog import Catalog, ModelOverride, ProviderOverride
from omniroute.providers.prices import with_library_prices
from omniroute.resilience.breaker import BreakerSettings
from omniroute.resilience.cooldown import CooldownSettings
from omniroute.resilience.ladder import Resilience
from omniroute.resilience.lockout import LockoutSettings
from omniroute.state.base import RoutingState
from omniroute.values import Connection
from omniroute.wire.base import WireFormat

if TYPE_CHECKING:
    from omniroute.simulated import SimulatedFleet
    from omniroute.store import Store

log = logging.getLogger("omniroute")


def check_provider_formats(config: Config, formats: Sequence[WireFormat] = wire.FORMATS) -> None:
    """Every ``providers[].format`` is a wire format providers speak (PROV-1; the registry,
    :mod:`omniroute.wire`, which the config layer cannot see). Raises :class:`ConfigError` naming each
    bad key, e.g. ``providers[0].format: unknown wire format 'foo' (known: anthropic, gemini, openai)``."""
    errors = [
        (f"providers[{i}].format", problem)
        for i, p in enumerate(config.providers)
        if p.format is not None and (problem := wire.unknown_upstream_format(p.format, formats)) is not None
    ]
    if errors:
        raise ConfigError(errors, source=config.source_path)


def config_reference_errors(
    config: Config,
    catalog: Catalog,
    *,
    stored_connection_ids: Iterable[str] = (),
    stored_combo_names: Iterable[str] = (),
) -> list[tuple[str, str]]:
    """Checks the config schema cannot make (OPS-2), as ``(key, problem)`` pairs: every connection
    names a provider ``catalog`` knows, every non-auto combo has targets, and every combo target,
    combo mapping and fallback chain names a known provider, model, connection or combo (declared in
    the file or stored: ``stored_*``; see :func:`omniroute.references.config_problems`)."""
    from omniroute.references import config_problems

    errors = [
        (
            f"connections[{i}].provider",
            f"unknown provider '{c.provider}' (not in the catalog, the config's providers or the "
            "stored providers)",
        )
        for i, c in enumerate(config.connections)
        if catalog.provider(c.provider) is None
    ]
    errors += [
        (f"combos[{i}].targets", f"combo '{combo.name}': {missing}")
        for i, combo in enumerate(config.combos)
        if (missing := missing_targets(combo)) is not None
    ]
    errors += config_problems(
        config, catalog, stored_connection_ids=stored_connection_ids, stored_combo_names=stored_combo_names
    )
    return errors


def build_resilience(config: Config, state: RoutingState, clock: Clock) -> Resilience:
    """The ladder with the configured RESIL-1/2/3 settings, on ``clock`` (the gateway's)."""
    r = config.resilience
    return Resilience(
        state,
        clock,
        BreakerSettings(
            failure_threshold=r.circuit_breaker.failure_threshold,
            reset_timeout_s=r.circuit_breaker.reset_timeout_s,
            half_open_probes=r.circuit_breaker.half_open_probes,
            max_reset_timeout_s=r.circuit_breaker.max_reset_timeout_s,
        ),
        CooldownSettings(
            base_s=r.cooldown.base_s,
            max_s=r.cooldown.max_s,
            max_hint_s=r.cooldown.max_hint_s,
            server_error_max_s=r.cooldown.server_error_max_s,
        ),
        LockoutSettings(base_s=r.lockout.base_s, max_s=r.lockout.max_s),
    )


def provider_override(p: ProviderConfig) -> ProviderOverride:
    """Config provider → catalog override (PROV-2)."""
    return ProviderOverride(
        id=p.id,
        format=p.format,
        base_url=p.base_url,
        name=p.name,
        aliases=p.aliases,
        models=tuple(
            ModelOverride(
                id=m.id,
                input_price=m.input_price,
                output_price=m.output_price,
                context_window=m.context_window,
                max_output_tokens=m.max_output_tokens,
                capabilities=tuple(sorted(m.capabilities)) if m.capabilities is not None else None,
                tier=m.tier,
                name=m.name,
            )
            for m in p.models
        ),
    )


def _node_override(node: dict[str, Any]) -> ProviderOverride:
    models = tuple(
        ModelOverride(
            id=m["id"],
            input_price=m.get("input_price"),
            output_price=m.get("output_price"),
            context_window=m.get("context_window"),
            max_output_tokens=m.get("max_output_tokens"),
            capabilities=tuple(m["capabilities"]) if m.get("capabilities") is not None else None,
            tier=m.get("tier"),
            name=m.get("name"),
        )
        for m in node.get("models") or ()
    )
    return ProviderOverride(
        id=node["id"],
        format=node.get("format"),
        base_url=node.get("base_url"),
        name=node.get("name"),
        aliases=tuple(node.get("aliases") or ()),
        models=models,
    )


def build_catalog(
    config: Config,
    nodes: Iterable[dict[str, Any]],
    simulated: SimulatedFleet | None,
    formats: Sequence[WireFormat] = wire.FORMATS,
) -> Catalog:
    """Built-in catalog (or the config's ``catalog_file``) priced by genai-prices + stored provider
    nodes + config providers (config wins) + simulated ones.

    Raises :class:`ConfigError` naming ``catalog_file`` when that file cannot be read or is invalid,
    and ``ValueError`` naming the provider when the catalog rejects a value (see
    :class:`~omniroute.providers.catalog.Catalog`) or a provider's ``format`` is not a wire format
    providers speak (PROV-1).
    """
    if config.catalog_file is None:
        base = Catalog.builtin()
    else:
        try:
            base = Catalog.load(config.catalog_file)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"catalog_file: cannot load {config.catalog_file}: {exc}") from None
    cat = with_library_prices(base)
    by_id = {n["id"]: _node_override(n) for n in nodes}
    for p in config.providers:
        by_id[p.id] = provider_override(p)
    if by_id:
        cat = cat.with_overrides(by_id.values())
    if simulated is not None:
        cat = Catalog([*cat.providers, *simulated.providers])
    for prov in cat.providers:
        if wire.unknown_upstream_format(prov.format, formats) is not None:
            known = ", ".join(wire.upstream_formats(formats))
            raise ValueError(f"provider {prov.id!r}: format {prov.format!r} is not one of {known}")
    return cat


def connection_from_config(c: Any) -> Connection:
    """Config connection → value object (PROV-3)."""
    return Connection(
        id=c.id,
        provider=c.provider,
        name=c.name or c.id,
        auth_type=c.auth_type,
        api_key=c.api_key,
        access_token=c.access_token,
        expires_at=c.expires_at,
        base_url=c.base_url,
        default_model=c.default_model,
        priority=c.priority,
        is_active=c.is_active,
        account_tier=c.account_tier,
        max_concurrent=c.max_concurrent,
        tags=tuple(c.tags),
    )


async def load_config_into_store(config: Config, store: Store) -> None:
    """Write config-declared objects into the store; config wins over stored copies (OPS-2)."""
    for p in config.providers:
        await store.upsert_provider_node(
            {
                "id": p.id,
                "format": p.format,
                "base_url": p.base_url,
                "name": p.name,
                "aliases": list(p.aliases),
                "models": [
                    {
                        k: (sorted(v) if isinstance(v, frozenset) else v)
                        for k, v in (
                            ("id", m.id),
                            ("name", m.name),
                            ("input_price", m.input_price),
                            ("output_price", m.output_price),
                            ("context_window", m.context_window),
                            ("max_output_tokens", m.max_output_tokens),
                            ("capabilities", m.capabilities),
                            ("tier", m.tier),
                        )
                    }
                    for m in p.models
                ],
            }
        )
    for c in config.connections:
        await store.upsert_connection(connection_from_config(c))
    for k in config.api_keys:
        if k.key:
            await store.upsert_api_key_from_config(
                k.name,
                k.key,
                list(k.allowed_models),
                k.budget_usd,
                budget_period=k.budget_period,
                expires_at=k.expires_at,
                rpm=k.rpm,
                tpm=k.tpm,
            )
    for combo in config.combos:
        await store.upsert_combo_by_name(combo.to_json())
    for m in config.model_combo_mappings:
        await store.upsert_mapping_from_config(m.pattern, m.combo, m.priority, m.enabled, m.description or "")
    for model, entries in config.fallback_chains.items():
        await store.set_chain(
            model, [{"provider": e.provider, "priority": e.priority, "enabled": e.enabled} for e in entries]
        )
