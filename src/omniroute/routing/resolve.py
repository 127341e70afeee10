"""Model resolution: the model string → a routing :class:`Plan` (SPEC §4).

Known client suffixes are stripped first: Claude Code's ``[1m]`` (asking for the 1M-token context)
leaves the bare id and sets :attr:`Plan.context_1m`. Order: 1. exact combo name; 1a. ``model_aliases``
(exact id or case-insensitive glob, file order) → their ``route``, resolved by the steps below
without aliases; 2. ``combo/<name>``; 3. model→combo glob mappings (case-insensitive,
highest priority first, disabled skipped); 4. ``auto`` and its variants; 5. ``provider/model`` (id or
alias); 6. a bare catalog model id through its fallback chain (RESIL-4), else every connected provider
that serves it in connection-priority order. A case-insensitive combo match is tried last before 404.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field, replace

from omniroute.config import ModelAliasConfig
from omniroute.core.combo import Combo
from omniroute.errors import ModelNotFound
from omniroute.routing.registry import Registry
from omniroute.values import ModelInfo, ProviderInfo


@dataclass(frozen=True, slots=True)
class PlanTarget:
    """A concrete target of a plan: provider + model, optionally pinned to one connection."""

    provider: ProviderInfo
    model: ModelInfo
    connection_id: str | None = None
    weight: float = 0.0
    timeout_s: float | None = None
    step: int = 0
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class Plan:
    """What a model string resolved to.

    ``kind``: ``combo`` | ``auto`` | ``chain`` | ``model`` | ``catalog``; ``requested`` the model
    string actually routed (after an alias and a client suffix); ``route`` is the resolution step that
    matched (for the decision; ``alias`` when a ``model_aliases`` entry did); ``combo`` holds the combo
    definition for ``combo``/``auto`` plans; ``targets`` the concrete targets for the others.
    ``context_1m``: the client asked for the 1M-token context (``[1m]`` suffix).
    """

    kind: str
    requested: str
    route: str
    targets: tuple[PlanTarget, ...] = ()
    combo: Combo | None = None
    variant: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    context_1m: bool = False


CONTEXT_1M_SUFFIX = "[1m]"
"""Claude Code appends this to a model id to ask for the 1M-token context window, which Anthropic
grants with the :data:`CONTEXT_1M_BETA` beta header (Claude Code model configuration docs)."""

CONTEXT_1M_BETA = "context-1m-2025-08-07"
"""The ``anthropic-beta`` value that enables the 1M-token context (Anthropic context-window docs)."""


def not_found(model: str) -> ModelNotFound:
    """404 ``model_not_found`` that points at ``GET /v1/models`` (SPEC §4)."""
    return ModelNotFound(
        f"The model '{model}' does not exist or is not routable on this gateway. "
        "GET /v1/models lists the ids it serves (provider/model, combos, auto variants).",
        param="model",
    )


def _match_mapping(reg: Registry, model: str) -> Combo | None:
    low = model.lower()
    for m in reg.mappings:
        if fnmatch.fnmatchcase(low, m.pattern.lower()):
            combo = reg.combos.get(m.combo)
            if combo is not None:
                return combo
    return None


_MEMO_KEY = "resolve"
MEMO_MAX_MODELS = 1024
"""Model strings whose plan one registry snapshot remembers (client-chosen strings: bounded)."""


def resolve(reg: Registry, model: str) -> Plan:
    """Resolve ``model`` against the registry snapshot. Raises :class:`ModelNotFound` (404).

    A plan depends only on the model string and the snapshot, so it is memoised on the snapshot
    (``Registry.memo``, at most :data:`MEMO_MAX_MODELS` strings; a management edit builds a new
    snapshot and so resolves afresh, COMBO-1). Plans are immutable and shared."""
    memo: dict[str, Plan] | None = reg.memo.get(_MEMO_KEY)
    if memo is None:
        memo = reg.memo[_MEMO_KEY] = {}
    plan = memo.get(model)
    if plan is None:
        plan = _resolve(reg, model)
        if len(memo) < MEMO_MAX_MODELS:
            memo[model] = plan
    return plan


def _resolve(reg: Registry, model: str) -> Plan:
    context_1m = model.lower().endswith(CONTEXT_1M_SUFFIX)
    bare = model[: -len(CONTEXT_1M_SUFFIX)] if context_1m else model
    alias = None if bare in reg.combos else _match_alias(reg.aliases, bare)
    if alias is None:
        plan = resolve_route(reg, bare)
    else:
        plan = replace(resolve_route(reg, alias.route), route="alias")
    return replace(plan, context_1m=True) if context_1m else plan


def with_context_1m_beta(beta: str | None) -> str:
    """The ``anthropic-beta`` header value ``beta`` (comma-separated, or ``None``) with
    :data:`CONTEXT_1M_BETA` added when it is not there yet."""
    betas = [b.strip() for b in (beta or "").split(",") if b.strip()]
    if CONTEXT_1M_BETA not in betas:
        betas.append(CONTEXT_1M_BETA)
    return ",".join(betas)


def _match_alias(aliases: tuple[ModelAliasConfig, ...], model: str) -> ModelAliasConfig | None:
    low = model.lower()
    for a in aliases:
        if a.match == model or fnmatch.fnmatchcase(low, a.match.lower()):
            return a
    return None


def check_alias_routes(reg: Registry) -> list[tuple[str, str]]:
    """``(key, message)`` for every ``model_aliases[i].route`` that does not resolve on ``reg``
    (a config error at start, SPEC §4)."""
    errors: list[tuple[str, str]] = []
    for i, a in enumerate(reg.aliases):
        try:
            resolve_route(reg, a.route)
        except ModelNotFound:
            errors.append(
                (
                    f"model_aliases[{i}].route",
                    f"'{a.route}' is not a routable model (no combo, connected provider/model, auto "
                    "id or catalog model of that name)",
                )
            )
    return errors


def resolve_route(reg: Registry, model: str) -> Plan:
    """Resolve ``model`` by the SPEC §4 steps without aliases or client suffixes (an alias's
    ``route``). Raises :class:`ModelNotFound` (404)."""
    if not model:
        raise not_found(model)
    combo = reg.combos.get(model)
    if combo is not None:
        return _combo_plan(model, combo, "combo")
    if model.startswith("combo/"):
        combo = reg.combos.get(model[6:]) or reg.combos.get(reg.combos_lower.get(model[6:].lower(), ""))
        if combo is not None:
            return _combo_plan(model, combo, "combo-prefix")
    combo = _match_mapping(reg, model)
    if combo is not None:
        return _combo_plan(model, combo, "mapping")
    low = model.lower()
    if low == "auto/":
        raise ModelNotFound(
            f"The model '{model}' names auto routing but no variant after the '/': send 'auto' or "
            "an 'auto/<variant>' id. GET /v1/models lists the ids this gateway serves.",
            param="model",
        )
    if low == "auto" or low.startswith("auto/"):
        return Plan(kind="auto", requested=model, route="auto", variant=model[5:] if "/" in model else "")
    if "/" in model:
        prefix, rest = model.split("/", 1)
        provider = reg.catalog.provider(prefix)
        if provider is not None and not rest:
            raise ModelNotFound(
                f"The model '{model}' names provider '{provider.id}' but no model after the "
                "'/'. GET /v1/models lists the ids this gateway serves.",
                param="model",
            )
        if provider is not None:
            if not reg.is_connected(provider.id):
                raise ModelNotFound(
                    f"The model '{model}' names provider '{provider.id}', which has no active connection "
                    "on this gateway. GET /v1/models lists the ids it serves.",
                    param="model",
                )
            return Plan(
                kind="model",
                requested=model,
                route="provider/model",
                targets=(PlanTarget(provider, reg.model_info(provider, rest)),),
            )
    plan = _bare_model(reg, model)
    if plan is not None:
        return plan
    name = reg.combos_lower.get(low)
    if name is not None:
        return _combo_plan(model, reg.combos[name], "combo-case-insensitive")
    raise not_found(model)


def _combo_plan(model: str, combo: Combo, route: str) -> Plan:
    kind = "auto" if combo.strategy == "auto" else "combo"
    return Plan(kind=kind, requested=model, route=route, combo=combo)


def _bare_model(reg: Registry, model: str) -> Plan | None:
    chain = reg.chains.get(model)
    if chain:
        targets: list[PlanTarget] = []
        for e in chain:
            provider = reg.catalog.provider(e.provider)
            if provider is None:
                continue
            targets.append(PlanTarget(provider, reg.model_info(provider, model), enabled=e.enabled))
        if targets:
            return Plan(kind="chain", requested=model, route="fallback-chain", targets=tuple(targets))
    serving = [p for p in reg.catalog.providers_serving(model) if reg.is_connected(p.id)]
    if not serving:
        return None
    serving.sort(key=lambda p: reg.active_connections(p.id)[0].priority)
    return Plan(
        kind="catalog",
        requested=model,
        route="catalog",
        targets=tuple(PlanTarget(p, reg.model_info(p, model)) for p in serving),
    )
