"""The fleet model: what the simulated upstreams do, read from YAML and validated with pydantic.

A fleet file (or a shipped scenario) has these top-level keys:

- ``config`` — a gateway config exactly as in the config file (``providers``, ``connections``,
  ``combos``, ``resilience``, ``auto`` …). Connection secrets and base URLs are replaced by the
  simulator's own (no socket is ever opened).
- ``targets`` — how each connection/model behaves: latency (``ttft_ms``, ``tokens_per_s``), error
  rates by kind, a quota and its reset window, outages, a slow degradation, price overrides and price
  changes, and a quality score per task type. A target matches by ``provider`` and optionally
  ``connection`` and ``model``; the most specific match wins.
- ``pool`` — the ``provider/model`` strings the compared strategies route over (default: every
  target's model, in file order).
- ``workload`` — a synthetic workload (:mod:`omniroute.simulate.workload`) used when no trace is given.
- ``compare`` — the variants compared by default.

Every error names its field (``targets[1].errors.rate_limit: Input should be less than or equal to
1``), as the config file's errors do. Units: milliseconds for ``ttft_ms``, tokens per second for
``tokens_per_s``, seconds for every ``*_s``, USD per 1M tokens for prices, probabilities in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from omniroute.config import Config, ConfigError, config_from_dict
from omniroute.core.fields import field_errors

Probability = float
_NORMAL = NormalDist()
SIM_KEY_PREFIX = "sim-key-"
"""Prefix of the secret the simulator gives each connection; the simulated upstream reads the
connection back from it."""


class FleetError(ValueError):
    """A fleet file that cannot be used; ``errors`` holds ``(field path, message)`` pairs and the
    message lists them one per line."""

    def __init__(self, errors: list[tuple[str, str]] | str) -> None:
        self.errors = [("", errors)] if isinstance(errors, str) else list(errors)
        super().__init__("\n".join(f"{k}: {m}" if k else m for k, m in self.errors))


class _Edge(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Distribution(_Edge):
    """A positive random quantity: lognormal (``median`` and ``sigma``, the standard deviation of its
    logarithm; ``sigma: 0`` is a constant) or an empirical ``samples`` list drawn uniformly."""

    median: float | None = Field(None, gt=0)
    sigma: float = Field(0.0, ge=0, le=5)
    samples: list[float] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one_kind(self) -> Distribution:
        if (self.median is None) == (self.samples is None):
            raise ValueError("give either median (and sigma) or samples")
        if self.samples is not None and any(s <= 0 for s in self.samples):
            raise ValueError("samples must all be greater than 0")
        return self

    def draw(self, u: float) -> float:
        """The value at uniform draw ``u`` in (0, 1) (inverse CDF, so equal draws give equal values)."""
        if self.samples is not None:
            return self.samples[min(int(u * len(self.samples)), len(self.samples) - 1)]
        assert self.median is not None
        if self.sigma == 0:
            return self.median
        return self.median * math.exp(self.sigma * _NORMAL.inv_cdf(min(max(u, 1e-12), 1 - 1e-12)))

    @property
    def typical(self) -> float:
        """The median (of the samples, for an empirical distribution)."""
        if self.samples is not None:
            return sorted(self.samples)[len(self.samples) // 2]
        assert self.median is not None
        return self.median


class Errors(_Edge):
    """Per-attempt error probabilities by kind: ``rate_limit`` (429 with ``Retry-After:
    retry_after_s``), ``server_error`` (503), ``timeout`` (no first token before the gateway's
    ``ttft_s``) and ``stream_cut`` (the connection drops after the first token)."""

    rate_limit: Probability = Field(0.0, ge=0, le=1)
    retry_after_s: float = Field(10.0, gt=0)
    server_error: Probability = Field(0.0, ge=0, le=1)
    timeout: Probability = Field(0.0, ge=0, le=1)
    stream_cut: Probability = Field(0.0, ge=0, le=1)


class Quota(_Edge):
    """A provider quota: at most ``requests`` requests and/or ``tokens`` tokens (prompt + completion)
    per fixed ``window_s`` window from the start of the run; past it the upstream answers 429 with
    ``Retry-After`` and ``x-ratelimit-remaining-*: 0`` until the window resets."""

    requests: int | None = Field(None, ge=1)
    tokens: int | None = Field(None, ge=1)
    window_s: float = Field(60.0, gt=0)


class Outage(_Edge):
    """From ``start_s`` (seconds from the start of the run) for ``duration_s`` seconds every attempt
    fails: ``server_error`` (503), ``timeout`` (no answer before ``ttft_s``), ``connection``
    (refused) or ``rate_limit`` (429 with ``Retry-After: retry_after_s``)."""

    start_s: float = Field(ge=0)
    duration_s: float = Field(gt=0)
    kind: Literal["server_error", "timeout", "connection", "rate_limit"] = "server_error"
    retry_after_s: float = Field(30.0, gt=0)


class Degradation(_Edge):
    """A slow degradation: from ``start_s`` over ``ramp_s`` seconds, latency grows linearly to
    ``latency_factor`` × and an extra ``server_error`` probability to the given one; it stays there."""

    start_s: float = Field(ge=0)
    ramp_s: float = Field(gt=0)
    latency_factor: float = Field(1.0, ge=1)
    server_error: Probability = Field(0.0, ge=0, le=1)


class PriceChange(_Edge):
    """From ``at_s`` the provider bills ``input_price``/``output_price`` (USD per 1M tokens). The
    gateway's catalog is not told: routing keeps the configured price, the bill follows this one."""

    at_s: float = Field(ge=0)
    input_price: float = Field(ge=0)
    output_price: float = Field(ge=0)


class Target(_Edge):
    """How one provider (all its connections and models, or the ``connection``/``model`` given)
    behaves. ``input_price``/``output_price`` override the catalog (USD per 1M tokens) and are what
    the router sees; ``quality`` maps a task type to a score in [0, 1] (``default`` for the rest)."""

    provider: str = Field(min_length=1)
    connection: str | None = None
    model: str | None = None
    ttft_ms: Distribution = Distribution(median=400, sigma=0.3)
    tokens_per_s: Distribution = Distribution(median=60, sigma=0.2)
    errors: Errors = Errors()
    quota: Quota | None = None
    outages: list[Outage] = []
    degradation: Degradation | None = None
    input_price: float | None = Field(None, ge=0)
    output_price: float | None = Field(None, ge=0)
    price_changes: list[PriceChange] = []
    quality: dict[str, float] = {}

    @model_validator(mode="after")
    def _quality_range(self) -> Target:
        for task, score in self.quality.items():
            if not 0 <= score <= 1:
                raise ValueError(f"quality.{task} must be between 0 and 1")
        return self

    def specificity(self) -> int:
        return (self.connection is not None) * 2 + (self.model is not None)

    def quality_for(self, task: str) -> float:
        """The score for ``task`` (``default``, else 1.0 when the fleet gives none)."""
        q = self.quality
        return q.get(task, q.get("default", 1.0))


class FleetFile(_Edge):
    """The validated YAML document (see the module docstring)."""

    description: str = ""
    config: dict[str, Any]
    targets: list[Target] = Field(min_length=1)
    pool: list[str] | None = None
    workload: dict[str, Any] | None = None
    compare: list[str] = ["priority", "weighted", "auto", "auto/cheap"]
    oracle_quality_slack: float = Field(0.05, ge=0, le=1)


@dataclass(frozen=True, slots=True)
class Fleet:
    """A loaded fleet: the validated file, the gateway config built from it (simulator secrets and
    base URLs in place) and the ``provider/model`` pool the compared strategies route over."""

    doc: FleetFile
    config: Config
    pool: tuple[str, ...]
    formats: Mapping[str, str]  # provider id → wire format ("openai" when the config names none)

    def target_for(self, provider: str, connection: str, model: str) -> Target | None:
        """The most specific target matching the triple, or ``None``."""
        best: Target | None = None
        for t in self.doc.targets:
            if (
                t.provider != provider
                or t.connection not in (None, connection)
                or t.model not in (None, model)
            ):
                continue
            if best is None or t.specificity() > best.specificity():
                best = t
        return best


def load_fleet(source: Path | str | Mapping[str, Any]) -> Fleet:
    """Read and validate a fleet from a YAML file path or an already-parsed mapping.

    Raises :class:`FleetError` whose ``errors`` name each bad field (``targets[0].ttft_ms.sigma``,
    ``config.connections[0].provider``), and ``FileNotFoundError`` for a missing file."""
    if isinstance(source, Mapping):
        data: Any = source
    else:
        try:
            data = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise FleetError(f"{source}: not valid YAML ({exc})") from None
    if not isinstance(data, Mapping):
        raise FleetError("the top level must be a mapping")
    try:
        doc = FleetFile.model_validate(data)
    except ValidationError as exc:
        raise FleetError(field_errors(exc.errors(include_url=False, include_input=False))) from None
    cfg_data = simulated_config(doc)
    try:
        config = config_from_dict(cfg_data, env={})
    except ConfigError as exc:
        raise FleetError([(f"config.{k}" if k else "config", m) for k, m in exc.errors]) from None
    return _finish(doc, config)


def simulated_config(doc: FleetFile) -> dict[str, Any]:
    """The fleet's ``config`` mapping with the simulator's secrets and base URLs, an in-memory store,
    no required API key, and the targets' price overrides as config model prices (so the router
    sees them)."""
    data = dict(doc.config)
    data["database_url"] = "sqlite:///:memory:"
    data.pop("redis_url", None)
    conns = []
    for c in data.get("connections") or ():
        if isinstance(c, Mapping):
            c = {**c, "api_key": f"{SIM_KEY_PREFIX}{c.get('id')}", "auth_type": "api_key"}
            c.pop("access_token", None)
            c["base_url"] = f"http://{c.get('id')}.sim.invalid"
        conns.append(c)
    data["connections"] = conns
    server = dict(data.get("server") or {})
    server["require_api_key"] = False
    data["server"] = server
    _price_overrides(data, doc.targets)
    return data


def _price_overrides(data: dict[str, Any], targets: list[Target]) -> None:
    providers = [dict(p) if isinstance(p, Mapping) else p for p in data.get("providers") or ()]
    for t in targets:
        if t.model is None or (t.input_price is None and t.output_price is None):
            continue
        entry = next((p for p in providers if isinstance(p, dict) and p.get("id") == t.provider), None)
        if entry is None:
            entry = {"id": t.provider}
            providers.append(entry)
        models = [dict(m) if isinstance(m, Mapping) else m for m in entry.get("models") or ()]
        model = next((m for m in models if isinstance(m, dict) and m.get("id") == t.model), None)
        if model is None:
            model = {"id": t.model}
            models.append(model)
        if t.input_price is not None:
            model["input_price"] = t.input_price
        if t.output_price is not None:
            model["output_price"] = t.output_price
        entry["models"] = models
    if providers:
        data["providers"] = providers


def _finish(doc: FleetFile, config: Config) -> Fleet:
    errors: list[tuple[str, str]] = []
    providers = {p.id: p for p in config.providers}
    conn_providers = {c.provider for c in config.connections}
    for i, t in enumerate(doc.targets):
        if t.provider not in conn_providers:
            errors.append((f"targets[{i}].provider", f"no connection of provider {t.provider!r} in config"))
        if t.connection is not None and not any(c.id == t.connection for c in config.connections):
            errors.append((f"targets[{i}].connection", f"no connection {t.connection!r} in config"))
    pool = tuple(doc.pool) if doc.pool else _default_pool(doc, providers)
    for i, m in enumerate(pool):
        if "/" not in m:
            errors.append((f"pool[{i}]", f"{m!r} is not a provider/model string"))
    if errors:
        raise FleetError(errors)
    formats = {p.id: p.format or "openai" for p in config.providers}
    return Fleet(doc=doc, config=config, pool=pool, formats=formats)


def _default_pool(doc: FleetFile, providers: Mapping[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    for t in doc.targets:
        models = (
            [t.model] if t.model else [m.id for m in getattr(providers.get(t.provider), "models", ()) or ()]
        )
        for m in models:
            s = f"{t.provider}/{m}"
            if s not in out:
                out.append(s)
    return tuple(out)


__all__ = [
    "SIM_KEY_PREFIX",
    "Degradation",
    "Distribution",
    "Errors",
    "Fleet",
    "FleetError",
    "FleetFile",
    "Outage",
    "PriceChange",
    "Quota",
    "Target",
    "load_fleet",
    "simulated_config",
]
