"""The provider catalog: built-in data, operator overrides, models.dev refresh (SPEC PROV-2).

Owns the immutable :class:`Catalog` of :class:`~omniroute.values.ProviderInfo` and
:class:`~omniroute.values.ModelInfo`, the JSON format of the shipped ``catalog.json`` (read only when
:meth:`Catalog.builtin` is called, never at import — DESIGN house style 8), the merge of config
overrides (:class:`ProviderOverride`, :class:`ModelOverride`) and the refresh from a models.dev-style
file given as a path (``omniroute catalog refresh FILE``).

Units everywhere: prices in USD per 1M tokens (``None`` = unknown), ``context_window`` and
``max_output_tokens`` in tokens. ``base_url`` includes the API version path, as an OpenAI SDK
``base_url`` would (``https://api.openai.com/v1``, ``https://generativelanguage.googleapis.com/v1beta``);
adapters append the operation path. The first model of a provider is its default model (AUTO-2).

Our JSON format (``version`` 1)::

    {"version": 1, "providers": [
      {"id": "openai", "name": "OpenAI", "format": "openai", "base_url": "https://api.openai.com/v1",
       "aliases": ["oai"], "embeddings": true,            # optional; default: any model has "embeddings"
       "models": [{"id": "gpt-4o", "name": "GPT-4o", "input_price": 2.5, "output_price": 10.0,
                   "context_window": 128000, "max_output_tokens": 16384,
                   "capabilities": ["tools", "vision", "structured_output"], "tier": "premium"}]}]}

A model without ``tier`` gets the derived tier: ``free`` when both prices are 0, ``premium`` when the
blended price (60 % input + 40 % output, as ``ModelInfo.blended_price``) is at least
:data:`PREMIUM_BLENDED_PRICE`, else ``standard``.
"""

from __future__ import annotations

import importlib.resources
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from omniroute.values import ModelInfo, ProviderInfo

__all__ = [
    "CAPABILITIES",
    "CATALOG_VERSION",
    "PREMIUM_BLENDED_PRICE",
    "TIERS",
    "Catalog",
    "ModelOverride",
    "ProviderOverride",
]

CATALOG_VERSION = 1
"""Version of our catalog JSON format (top-level ``version``)."""

TIERS: tuple[str, ...] = ("free", "standard", "premium")
"""Model tiers (PROV-2; AUTO-1 ``free``/``pro`` filters)."""

CAPABILITIES: tuple[str, ...] = ("tools", "vision", "reasoning", "structured_output", "embeddings")
"""Known model capabilities, in the order the JSON lists them (PROV-2)."""

PREMIUM_BLENDED_PRICE = 4.0
"""Blended price (USD per 1M tokens) from which a model without an explicit tier is ``premium``."""

_RESOURCE_PACKAGE = "omniroute.providers"
_RESOURCE_NAME = "catalog.json"


@dataclass(frozen=True, slots=True)
class ModelOverride:
    """One model entry of a config ``providers[].models`` item (PROV-2).

    Every field but ``id`` is optional; ``None`` keeps the catalog value (or the default for a new
    model). Prices in USD per 1M tokens, limits in tokens, ``capabilities`` replaces the whole set.
    """

    id: str
    input_price: float | None = None
    output_price: float | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: tuple[str, ...] | None = None
    tier: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderOverride:
    """One config ``providers`` item: an override of a catalog provider or a custom one (PROV-2).

    ``None`` keeps the catalog value; ``aliases`` are extra ids added to the catalog's. A custom
    provider (unknown ``id``) defaults to ``format`` ``openai`` and must give ``base_url``.
    """

    id: str
    format: str | None = None
    base_url: str | None = None
    name: str | None = None
    aliases: tuple[str, ...] = ()
    models: tuple[ModelOverride, ...] = ()


class Catalog:
    """An immutable set of providers with case-insensitive lookup by id or alias (PROV-2).

    ``Catalog(providers)`` validates its input and raises ``ValueError`` naming the provider (and
    model) when: an id or alias is empty, contains ``/`` or is used twice (ids and aliases share one
    case-insensitive namespace); a model id repeats within a provider; a tier is not one of
    :data:`TIERS`; a capability is not one of :data:`CAPABILITIES`; a price is negative or not finite;
    a limit is negative; or ``max_output_tokens`` exceeds a known (non-zero) ``context_window``. A
    provider's ``format`` is the wire registry's to check (:mod:`omniroute.wire` sits above this
    layer; :func:`omniroute.bootstrap.build_catalog` checks it).
    """

    __slots__ = ("_by_key", "_providers", "_serving")

    _providers: tuple[ProviderInfo, ...]
    _by_key: dict[str, ProviderInfo]
    _serving: dict[str, tuple[ProviderInfo, ...]]

    def __init__(self, providers: Iterable[ProviderInfo]) -> None:
        provs = tuple(providers)
        owners: dict[str, tuple[ProviderInfo, str]] = {}
        serving: dict[str, list[ProviderInfo]] = {}
        for p in provs:
            _check_provider(p)
            for kind, key in [("id", p.id)] + [("alias", a) for a in p.aliases]:
                low = key.lower()
                seen = owners.get(low)
                if seen is not None and seen[0] is not p:
                    raise ValueError(
                        f"provider {p.id!r}: {kind} {key!r} is already the {seen[1]} of {seen[0].id!r}"
                    )
                owners.setdefault(low, (p, kind))
            for m in p.models:
                serving.setdefault(m.id.lower(), []).append(p)
        object.__setattr__(self, "_providers", provs)
        object.__setattr__(self, "_by_key", {k: v[0] for k, v in owners.items()})
        object.__setattr__(self, "_serving", {k: tuple(v) for k, v in serving.items()})

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Catalog is immutable; use with_overrides() or refreshed_from_models_dev()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Catalog is immutable")

    def __repr__(self) -> str:
        return f"Catalog({len(self._providers)} providers)"

    def __len__(self) -> int:
        return len(self._providers)

    def __iter__(self) -> Iterator[ProviderInfo]:
        return iter(self._providers)

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def builtin(cls) -> Catalog:
        """The catalog shipped in the package (``omniroute/providers/catalog.json``).

        Read through ``importlib.resources`` on each call (nothing is read at import); callers keep
        the result. Raises ``ValueError`` if the packaged file is invalid.
        """
        data = importlib.resources.files(_RESOURCE_PACKAGE).joinpath(_RESOURCE_NAME).read_bytes()
        return cls.from_dict(orjson.loads(data), source="built-in catalog")

    @classmethod
    def load(cls, path: str | Path) -> Catalog:
        """A catalog read from a file in our format (as written by :meth:`write_json`).

        Raises ``OSError`` if the file cannot be read, ``ValueError`` if it is not a valid catalog.
        """
        return cls.from_dict(orjson.loads(Path(path).read_bytes()), source=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "catalog") -> Catalog:
        """A catalog from the parsed JSON of our format (module docstring); ``source`` names it in errors.

        Raises ``ValueError`` on a wrong ``version``, a missing field or a value of the wrong type.
        """
        if not isinstance(data, dict):
            raise ValueError(f"{source}: top level must be an object")
        if data.get("version") != CATALOG_VERSION:
            raise ValueError(
                f"{source}: unsupported version {data.get('version')!r} (want {CATALOG_VERSION})"
            )
        raw = data.get("providers")
        if not isinstance(raw, list):
            raise ValueError(f"{source}: 'providers' must be a list")
        return cls(_parse_provider(item, source) for item in raw)

    # -- lookups --------------------------------------------------------------------------------

    @property
    def providers(self) -> tuple[ProviderInfo, ...]:
        """All providers, in file (then override) order."""
        return self._providers

    def provider(self, id_or_alias: str) -> ProviderInfo | None:
        """The provider whose id or alias equals ``id_or_alias`` (case-insensitive), or ``None``."""
        return self._by_key.get(id_or_alias.lower())

    def model(self, provider_id: str, model_id: str) -> ModelInfo | None:
        """The model ``model_id`` of provider ``provider_id`` (id or alias), or ``None``.

        Model ids match exactly first, then case-insensitively (``ProviderInfo.model``).
        """
        p = self.provider(provider_id)
        return p.model(model_id) if p is not None else None

    def providers_serving(self, model_id: str) -> tuple[ProviderInfo, ...]:
        """Providers whose catalog lists the bare ``model_id`` (case-insensitive), in catalog order.

        Used for bare model ids (SPEC §4 step 6). ``gpt-4o`` does not match OpenRouter's
        ``openai/gpt-4o``: ids are compared whole.
        """
        return self._serving.get(model_id.lower(), ())

    # -- derived catalogs -----------------------------------------------------------------------

    def with_overrides(self, custom: Iterable[ProviderOverride]) -> Catalog:
        """A new catalog with config overrides applied in order (PROV-2).

        An override whose ``id`` equals a provider id (case-insensitive) merges into it: ``format``,
        ``base_url`` and ``name`` are replaced when given, ``aliases`` are added to the catalog's (so
        built-in aliases keep working); each model override changes
        the given (non-``None``) fields of the matching model (case-insensitive id) or, when no model
        matches, is appended. Any other ``id`` appends a custom provider (``format`` defaults to
        ``openai``, ``name`` to the id). A new model's ``name`` defaults to its id and its ``tier`` to
        the derived tier (module docstring).

        Raises ``ValueError`` naming the provider when a custom provider has no ``base_url``, when an
        id or alias collides with another provider's id or alias (built-in ids and aliases are
        reserved), or when a resulting value is invalid (see :class:`Catalog`).
        """
        provs = list(self._providers)
        index = {p.id.lower(): i for i, p in enumerate(provs)}
        for o in custom:
            i = index.get(o.id.lower())
            if i is None:
                if not o.base_url:
                    raise ValueError(f"custom provider {o.id!r}: base_url is required")
                models = _merge_models((), o.models)
                index[o.id.lower()] = len(provs)
                provs.append(
                    ProviderInfo(
                        id=o.id,
                        format=o.format or "openai",
                        base_url=o.base_url,
                        name=o.name or o.id,
                        aliases=tuple(o.aliases),
                        models=models,
                        embeddings=_serves_embeddings(models),
                    )
                )
                continue
            base = provs[i]
            models = _merge_models(base.models, o.models)
            provs[i] = replace(
                base,
                format=o.format or base.format,
                base_url=o.base_url or base.base_url,
                name=o.name or base.name,
                aliases=_union(base.aliases, o.aliases),
                models=models,
                embeddings=base.embeddings or _serves_embeddings(models),
            )
        return Catalog(provs)

    def refreshed_from_models_dev(self, path: str | Path) -> Catalog:
        """A new catalog updated from a models.dev-style JSON file (PROV-2, ``omniroute catalog refresh``).

        The file is an object keyed by provider id, each ``{"id", "name", "api"?, "models": {model_id:
        {"id", "name", "cost": {"input", "output", "cache_read"?}, "limit": {"context", "output"},
        "tool_call", "reasoning", "structured_output"?, "modalities": {"input": [...], "output": [...]}}}}``
        with costs in USD per 1M tokens and limits in tokens. Provider keys resolve through our ids and
        aliases (models.dev's ``google``, ``togetherai``, ``moonshotai`` … are aliases); unknown
        providers are ignored, and ``api`` never changes a ``base_url``.

        For a known model: prices and non-zero limits present in the file replace ours;
        ``tool_call`` → ``tools``, ``reasoning`` → ``reasoning``, ``structured_output`` →
        ``structured_output``, an ``image`` input modality → ``vision`` are set or cleared when the
        file states them; ``embeddings``, ``tier`` and ``name`` are kept. A model we lack is appended
        with the file's values and the derived tier. ``max_output_tokens`` is capped at the context
        window. ``cache_read`` is ignored (``ModelInfo`` has no cached price).

        Raises ``OSError`` if the file cannot be read, ``ValueError`` if it is not a JSON object.
        """
        data = orjson.loads(Path(path).read_bytes())
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a models.dev file must be a JSON object keyed by provider id")
        updates: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for key, entry in data.items():
            if not isinstance(entry, dict):
                continue
            p = self.provider(str(key))
            if p is None and isinstance(entry.get("id"), str):
                p = self.provider(entry["id"])
            models = entry.get("models")
            if p is None or not isinstance(models, dict):
                continue
            for model_key, m in models.items():
                if isinstance(m, dict):
                    mid = m["id"] if isinstance(m.get("id"), str) and m["id"] else str(model_key)
                    updates.setdefault(p.id, []).append((mid, m))
        provs: list[ProviderInfo] = []
        for p in self._providers:
            models = list(p.models)
            for mid, m in updates.get(p.id, []):
                pos = next((k for k, have in enumerate(models) if have.id.lower() == mid.lower()), None)
                if pos is None:
                    models.append(_model_from_models_dev(mid, m))
                else:
                    models[pos] = _model_updated_from_models_dev(models[pos], m)
            new = tuple(models)
            provs.append(replace(p, models=new, embeddings=p.embeddings or _serves_embeddings(new)))
        return Catalog(provs)

    # -- serialisation --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """This catalog in our JSON format (module docstring), ready for ``orjson.dumps``."""
        return {"version": CATALOG_VERSION, "providers": [_provider_to_dict(p) for p in self._providers]}

    def write_json(self, path: str | Path) -> None:
        """Write this catalog in our format to ``path`` (UTF-8, 2-space indent), replacing it atomically.

        Readable back with :meth:`load`. Raises ``OSError`` if the file cannot be written.
        """
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
        os.replace(tmp, target)


# -- validation ----------------------------------------------------------------------------------


def _check_key(provider_id: str, kind: str, key: str) -> None:
    if not key or "/" in key or key != key.strip():
        raise ValueError(
            f"provider {provider_id!r}: {kind} {key!r} must be non-empty, without '/' or surrounding spaces"
        )


def _check_provider(p: ProviderInfo) -> None:
    _check_key(p.id, "id", p.id)
    for alias in p.aliases:
        _check_key(p.id, "alias", alias)
    seen: set[str] = set()
    for m in p.models:
        where = f"provider {p.id!r} model {m.id!r}"
        if not m.id:
            raise ValueError(f"provider {p.id!r}: a model id is empty")
        if m.id.lower() in seen:
            raise ValueError(f"{where}: listed twice")
        seen.add(m.id.lower())
        for label, price in (("input_price", m.input_price), ("output_price", m.output_price)):
            if price is not None and not (math.isfinite(price) and price >= 0):
                raise ValueError(f"{where}: {label} must be a finite number >= 0 (USD per 1M tokens)")
        if m.context_window < 0 or m.max_output_tokens < 0:
            raise ValueError(f"{where}: context_window and max_output_tokens must be >= 0 (tokens)")
        if m.context_window and m.max_output_tokens > m.context_window:
            raise ValueError(
                f"{where}: max_output_tokens {m.max_output_tokens} exceeds context_window {m.context_window}"
            )
        if m.tier not in TIERS:
            raise ValueError(f"{where}: tier {m.tier!r} is not one of {', '.join(TIERS)}")
        unknown = sorted((m.capabilities or frozenset()).difference(CAPABILITIES))
        if unknown:
            raise ValueError(f"{where}: unknown capabilities {unknown} (known: {', '.join(CAPABILITIES)})")


def _derived_tier(input_price: float | None, output_price: float | None) -> str:
    if input_price is None or output_price is None:
        return "standard"
    if input_price == 0 and output_price == 0:
        return "free"
    return "premium" if 0.6 * input_price + 0.4 * output_price >= PREMIUM_BLENDED_PRICE else "standard"


def _source(input_price: float | None, output_price: float | None, known: str) -> str:
    return known if input_price is not None and output_price is not None else "unknown"


def _union(have: tuple[str, ...], extra: Iterable[str]) -> tuple[str, ...]:
    seen = {a.lower() for a in have}
    out = list(have)
    for a in extra:
        if a.lower() not in seen:
            seen.add(a.lower())
            out.append(a)
    return tuple(out)


def _serves_embeddings(models: Iterable[ModelInfo]) -> bool:
    return any(m.capabilities is not None and "embeddings" in m.capabilities for m in models)


# -- our JSON format ------------------------------------------------------------------------------


def _str(obj: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = obj.get(key, default)
    if not isinstance(value, str):
        raise ValueError(f"{where}: {key!r} must be a string")
    return value


def _price(obj: dict[str, Any], key: str, where: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: {key!r} must be a number (USD per 1M tokens) or null")
    return float(value)


def _tokens(obj: dict[str, Any], key: str, where: str) -> int:
    value = obj.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: {key!r} must be an integer (tokens)")
    return value


def _str_list(obj: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: {key!r} must be a list of strings")
    return tuple(value)


def _parse_model(item: Any, where: str) -> ModelInfo:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: each model must be an object")
    mid = _str(item, "id", where)
    where = f"{where} model {mid!r}"
    input_price = _price(item, "input_price", where)
    output_price = _price(item, "output_price", where)
    tier = item.get("tier")
    return ModelInfo(
        id=mid,
        input_price=input_price,
        output_price=output_price,
        context_window=_tokens(item, "context_window", where),
        max_output_tokens=_tokens(item, "max_output_tokens", where),
        capabilities=frozenset(_str_list(item, "capabilities", where)) if "capabilities" in item else None,
        tier=_str(item, "tier", where) if tier is not None else _derived_tier(input_price, output_price),
        name=_str(item, "name", where, mid) or mid,
        price_source=_source(input_price, output_price, "catalog"),
    )


def _parse_provider(item: Any, source: str) -> ProviderInfo:
    if not isinstance(item, dict):
        raise ValueError(f"{source}: each provider must be an object")
    pid = _str(item, "id", f"{source}: provider")
    where = f"{source}: provider {pid!r}"
    base_url = _str(item, "base_url", where, "")
    if not base_url:
        raise ValueError(f"{where}: base_url is required")
    raw_models = item.get("models", [])
    if not isinstance(raw_models, list):
        raise ValueError(f"{where}: 'models' must be a list")
    models = tuple(_parse_model(m, where) for m in raw_models)
    embeddings = item.get("embeddings")
    if embeddings is not None and not isinstance(embeddings, bool):
        raise ValueError(f"{where}: 'embeddings' must be true or false")
    simulated = item.get("simulated", False)
    if not isinstance(simulated, bool):
        raise ValueError(f"{where}: 'simulated' must be true or false")
    local = item.get("local", False)
    if not isinstance(local, bool):
        raise ValueError(f"{where}: 'local' must be true or false")
    return ProviderInfo(
        id=pid,
        format=_str(item, "format", where, "openai"),
        base_url=base_url,
        name=_str(item, "name", where, pid) or pid,
        aliases=_str_list(item, "aliases", where),
        models=models,
        simulated=simulated,
        embeddings=_serves_embeddings(models) if embeddings is None else embeddings,
        local=local,
    )


def _model_to_dict(m: ModelInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": m.id,
        "name": m.name or m.id,
        "input_price": m.input_price,
        "output_price": m.output_price,
        "context_window": m.context_window,
        "max_output_tokens": m.max_output_tokens,
    }
    if m.capabilities is not None:  # absent = unknown, [] = none (RESIL-8)
        out["capabilities"] = [c for c in CAPABILITIES if c in m.capabilities]
    out["tier"] = m.tier
    return out


def _provider_to_dict(p: ProviderInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": p.id,
        "name": p.name or p.id,
        "format": p.format,
        "base_url": p.base_url,
        "aliases": list(p.aliases),
        "embeddings": p.embeddings,
    }
    if p.simulated:
        out["simulated"] = True
    if p.local:
        out["local"] = True
    out["models"] = [_model_to_dict(m) for m in p.models]
    return out


# -- overrides -----------------------------------------------------------------------------------


def _merge_models(models: tuple[ModelInfo, ...], overrides: Iterable[ModelOverride]) -> tuple[ModelInfo, ...]:
    out = list(models)
    for mo in overrides:
        pos = next((k for k, have in enumerate(out) if have.id.lower() == mo.id.lower()), None)
        caps = frozenset(mo.capabilities) if mo.capabilities is not None else None
        if pos is None:
            out.append(
                ModelInfo(
                    id=mo.id,
                    input_price=mo.input_price,
                    output_price=mo.output_price,
                    context_window=mo.context_window or 0,
                    max_output_tokens=mo.max_output_tokens or 0,
                    capabilities=caps,
                    tier=mo.tier or _derived_tier(mo.input_price, mo.output_price),
                    name=mo.name or mo.id,
                    price_source=_source(mo.input_price, mo.output_price, "config"),
                )
            )
            continue
        have = out[pos]
        if mo.input_price is not None or mo.output_price is not None:
            # config prices replace every price of the model: cache tokens then bill at the input price
            have = replace(
                have,
                cache_read_price=None,
                cache_write_price=None,
                cache_write_1h_price=None,
                long_context_threshold=0,
                long_context=None,
                price_source="config",
            )
        out[pos] = replace(
            have,
            input_price=have.input_price if mo.input_price is None else mo.input_price,
            output_price=have.output_price if mo.output_price is None else mo.output_price,
            context_window=have.context_window if mo.context_window is None else mo.context_window,
            max_output_tokens=have.max_output_tokens
            if mo.max_output_tokens is None
            else mo.max_output_tokens,
            capabilities=have.capabilities if caps is None else caps,
            tier=mo.tier or have.tier,
            name=mo.name or have.name,
        )
    return tuple(out)


# -- models.dev ------------------------------------------------------------------------------------


def _md_number(obj: Any, key: str) -> float | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _md_limit(obj: Any, key: str) -> int | None:
    value = _md_number(obj, key)
    return int(value) if value else None


def _md_capabilities(m: dict[str, Any], caps: frozenset[str] | None) -> frozenset[str]:
    out = set(caps or ())
    flags = {"tool_call": "tools", "reasoning": "reasoning", "structured_output": "structured_output"}
    for key, cap in flags.items():
        if m.get(key) is True:
            out.add(cap)
        elif m.get(key) is False:
            out.discard(cap)
    modalities = m.get("modalities")
    if isinstance(modalities, dict):
        inputs = modalities.get("input")
        if isinstance(inputs, list) and "image" in inputs:
            out.add("vision")
        elif isinstance(inputs, list):
            out.discard("vision")
        outputs = modalities.get("output")
        if isinstance(outputs, list) and ("embedding" in outputs or "embeddings" in outputs):
            out.add("embeddings")
    return frozenset(out)


def _capped(context_window: int, max_output_tokens: int) -> int:
    return min(max_output_tokens, context_window) if context_window else max_output_tokens


def _model_updated_from_models_dev(have: ModelInfo, m: dict[str, Any]) -> ModelInfo:
    cost, limit = m.get("cost"), m.get("limit")
    input_price, output_price = _md_number(cost, "input"), _md_number(cost, "output")
    context = _md_limit(limit, "context") or have.context_window
    return replace(
        have,
        input_price=have.input_price if input_price is None else input_price,
        output_price=have.output_price if output_price is None else output_price,
        context_window=context,
        max_output_tokens=_capped(context, _md_limit(limit, "output") or have.max_output_tokens),
        capabilities=_md_capabilities(m, have.capabilities),
        name=have.name or (m["name"] if isinstance(m.get("name"), str) else have.id),
    )


def _model_from_models_dev(mid: str, m: dict[str, Any]) -> ModelInfo:
    cost, limit = m.get("cost"), m.get("limit")
    input_price, output_price = _md_number(cost, "input"), _md_number(cost, "output")
    context = _md_limit(limit, "context") or 0
    name = m.get("name")
    return ModelInfo(
        id=mid,
        input_price=input_price,
        output_price=output_price,
        context_window=context,
        max_output_tokens=_capped(context, _md_limit(limit, "output") or 0),
        capabilities=_md_capabilities(m, frozenset()),
        tier=_derived_tier(input_price, output_price),
        name=name if isinstance(name, str) and name else mid,
    )
