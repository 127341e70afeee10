"""Loading the OPS-2 config: ``${ENV}`` resolution, the private pydantic edge schema and the conversion
into the public frozen dataclasses of :mod:`omniroute.config` (errors name the key path). Combos,
model→combo mappings and ``combo_defaults`` are validated by the shared combo schema
(:mod:`omniroute.core.combo`) with the same strategy names as the management API."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from omniroute.config import (
    DATABASE_URL_SCHEMES,
    DEFAULT_ACCOUNT_TIER,
    DEFAULT_ALLOWED_MODELS,
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_CONNECTION_PRIORITY,
    DEFAULT_COOLDOWN_BASE_S,
    DEFAULT_COOLDOWN_MAX_HINT_S,
    DEFAULT_COOLDOWN_MAX_S,
    DEFAULT_COOLDOWN_SERVER_ERROR_MAX_S,
    DEFAULT_DATABASE_URL,
    DEFAULT_DRAIN_TIMEOUT_S,
    DEFAULT_EXPLORATION_RATE,
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_HALF_OPEN_PROBES,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_HOST,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_LKGP_SCOPE,
    DEFAULT_LOCKOUT_BASE_S,
    DEFAULT_LOCKOUT_MAX_S,
    DEFAULT_LOG_FORMAT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_BODY_MB,
    DEFAULT_MAX_EVENT_MB,
    DEFAULT_MAX_HINT_WAIT_S,
    DEFAULT_MAX_RESET_TIMEOUT_S,
    DEFAULT_MAX_RESPONSE_MB,
    DEFAULT_PORT,
    DEFAULT_REQUIRE_API_KEY,
    DEFAULT_RESET_TIMEOUT_S,
    DEFAULT_RETENTION_DAYS,
    DEFAULT_RETRIES_PER_TARGET,
    DEFAULT_STATE_MAX_ENTRIES,
    DEFAULT_STREAM_KEEPALIVE_S,
    DEFAULT_TOTAL_TIMEOUT_S,
    DEFAULT_TTFT_TIMEOUT_S,
    DEFAULT_WORKERS,
    ENV_DATABASE_URL,
    ENV_REDIS_URL,
    REDIS_URL_SCHEMES,
    ApiKeyConfig,
    AutoConfig,
    ChainEntryConfig,
    CircuitBreakerConfig,
    Config,
    ConfigError,
    ConnectionConfig,
    CooldownConfig,
    LockoutConfig,
    ModelAliasConfig,
    ModelConfig,
    ProviderConfig,
    RateLimitsConfig,
    ResilienceConfig,
    RetriesConfig,
    SecurityConfig,
    ServerConfig,
    StreamRescueConfig,
    TimeoutsConfig,
    UpstreamLimitsConfig,
)
from omniroute.core.combo import Combo, ComboMapping, OptionsMap, strategy_context
from omniroute.core.egress import EgressPolicy, check_urls
from omniroute.core.fields import Int, Number, field_message, key_path

# --- ${ENV} resolution -------------------------------------------------------------------------------

_ENV_REF = re.compile(r"\$\$(?=\{)|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

Loc = tuple[str | int, ...]


def _interpolate(
    value: Any, env: Mapping[str, str], loc: Loc, unset: dict[Loc, str], errors: list[tuple[str, str]]
) -> Any:
    """Resolve ``${ENV}`` in every string value; record exact unset references in ``unset``."""
    if isinstance(value, str):
        exact = _ENV_REF.fullmatch(value)
        if exact and exact.group(1) and exact.group(2) is None and exact.group(1) not in env:
            unset[loc] = exact.group(1)
            return None

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name is None:
                return "$"
            found = env.get(name)
            if default is not None and not found:
                return default
            if found is None:
                errors.append((key_path(loc), f"environment variable {name} is not set"))
                return ""
            return found

        return _ENV_REF.sub(sub, value)
    if isinstance(value, Mapping):
        return {k: _interpolate(v, env, (*loc, str(k)), unset, errors) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_interpolate(v, env, (*loc, i), unset, errors) for i, v in enumerate(value)]
    return value


# --- edge schema (pydantic, private) ----------------------------------------------------------------


def _epoch_seconds(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
        try:
            return _epoch_seconds(datetime.fromisoformat(value.strip()))
        except ValueError:
            raise ValueError("must be epoch seconds or an ISO 8601 date-time") from None
    return value


_Str = Annotated[str, Field(min_length=1)]


class _Edge(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Server(_Edge):
    host: _Str = DEFAULT_HOST
    port: Int = Field(DEFAULT_PORT, ge=1, le=65535)
    require_api_key: bool = DEFAULT_REQUIRE_API_KEY
    admin_key: str | None = None
    max_body_mb: Number = Field(DEFAULT_MAX_BODY_MB, gt=0)
    workers: Int = Field(DEFAULT_WORKERS, ge=1)
    stream_keepalive_s: Number = Field(DEFAULT_STREAM_KEEPALIVE_S, ge=0)
    allowed_hosts: list[_Str] = []
    log_format: Literal["text", "json"] = DEFAULT_LOG_FORMAT
    otlp_endpoint: _Str | None = None
    drain_timeout_s: Number = Field(DEFAULT_DRAIN_TIMEOUT_S, ge=0)
    metrics_auth: Literal["public", "admin", "token"] = "admin"
    metrics_token: str | None = None
    header_timeout_s: Int = Field(DEFAULT_HEADER_TIMEOUT_S, ge=1, le=3600)


class _Security(_Edge):
    allow_loopback_base_urls: bool = True
    allow_private_base_urls: bool = True
    denied_base_url_hosts: list[_Str] = []


class _ApiKey(_Edge):
    name: _Str
    key: str | None
    allowed_models: list[str] | None = None
    budget_usd: Number | None = Field(None, ge=0)
    budget_period: Literal["daily", "weekly", "monthly", "total"] = "total"
    expires_at: Annotated[Number | None, BeforeValidator(_epoch_seconds)] = None
    rpm: Int | None = Field(None, ge=1)
    tpm: Int | None = Field(None, ge=1)


class _RateLimits(_Edge):
    rpm: Int | None = Field(None, ge=1)
    tpm: Int | None = Field(None, ge=1)


class _Model(_Edge):
    id: _Str
    name: str | None = None
    input_price: Number | None = Field(None, ge=0)
    output_price: Number | None = Field(None, ge=0)
    context_window: Int | None = Field(None, ge=1)
    max_output_tokens: Int | None = Field(None, ge=1)
    capabilities: (
        list[Literal["tools", "vision", "reasoning", "structured_output", "embeddings", "audio"]] | None
    ) = None
    tier: Literal["free", "standard", "premium"] | None = None


class _Provider(_Edge):
    id: _Str
    format: _Str | None = None  # checked against the wire registry at start (config is below it)
    base_url: _Str | None = None
    name: str | None = None
    aliases: list[_Str] | None = None
    models: list[_Model] | None = None


class _Connection(_Edge):
    id: _Str
    provider: _Str
    name: str | None = None
    auth_type: Literal["api_key", "oauth"] = "api_key"
    api_key: str | None = None
    access_token: str | None = None
    expires_at: Annotated[Number | None, BeforeValidator(_epoch_seconds)] = None
    base_url: _Str | None = None
    default_model: _Str | None = None
    priority: Int = DEFAULT_CONNECTION_PRIORITY
    is_active: bool = True
    account_tier: Literal["ultra", "pro", "standard", "free"] = DEFAULT_ACCOUNT_TIER
    tags: list[str] | None = None
    max_concurrent: Int | None = Field(None, ge=1)


class _ChainEntry(_Edge):
    provider: _Str
    priority: Int | None = None
    enabled: bool = True


class _ModelAlias(_Edge):
    match: _Str
    route: _Str


class _CircuitBreaker(_Edge):
    failure_threshold: Int = Field(DEFAULT_FAILURE_THRESHOLD, ge=1)
    reset_timeout_s: Number = Field(DEFAULT_RESET_TIMEOUT_S, gt=0)
    max_reset_timeout_s: Number = Field(DEFAULT_MAX_RESET_TIMEOUT_S, gt=0)
    half_open_probes: Int = Field(DEFAULT_HALF_OPEN_PROBES, ge=1)


class _Cooldown(_Edge):
    base_s: Number = Field(DEFAULT_COOLDOWN_BASE_S, gt=0)
    max_s: Number = Field(DEFAULT_COOLDOWN_MAX_S, gt=0)
    max_hint_s: Number = Field(DEFAULT_COOLDOWN_MAX_HINT_S, gt=0)
    server_error_max_s: Number = Field(DEFAULT_COOLDOWN_SERVER_ERROR_MAX_S, gt=0)


class _Lockout(_Edge):
    base_s: Number = Field(DEFAULT_LOCKOUT_BASE_S, gt=0)
    max_s: Number = Field(DEFAULT_LOCKOUT_MAX_S, gt=0)


class _Retries(_Edge):
    per_target: Int = Field(DEFAULT_RETRIES_PER_TARGET, ge=0)
    max_attempts: Int = Field(DEFAULT_MAX_ATTEMPTS, ge=1)
    max_hint_wait_s: Number = Field(DEFAULT_MAX_HINT_WAIT_S, ge=0)


class _Timeouts(_Edge):
    connect_s: Number = Field(DEFAULT_CONNECT_TIMEOUT_S, gt=0)
    ttft_s: Number = Field(DEFAULT_TTFT_TIMEOUT_S, gt=0)
    idle_s: Number = Field(DEFAULT_IDLE_TIMEOUT_S, gt=0)
    total_s: Number = Field(DEFAULT_TOTAL_TIMEOUT_S, gt=0)


class _StreamRescue(_Edge):
    enabled: bool = True

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"enabled": value} if isinstance(value, bool) else value


class _Resilience(_Edge):
    circuit_breaker: _CircuitBreaker | None = None
    cooldown: _Cooldown | None = None
    lockout: _Lockout | None = None
    retries: _Retries | None = None
    timeouts: _Timeouts | None = None
    stream_rescue: _StreamRescue | None = None


class _UpstreamLimits(_Edge):
    max_response_mb: Number = Field(DEFAULT_MAX_RESPONSE_MB, gt=0)
    max_event_mb: Number = Field(DEFAULT_MAX_EVENT_MB, gt=0)


class _Auto(_Edge):
    exploration_rate: Number = Field(DEFAULT_EXPLORATION_RATE, ge=0, le=1)
    default_variant: _Str | None = None
    lkgp_scope: Literal["session", "combo", "global"] = DEFAULT_LKGP_SCOPE


class _Root(_Edge):
    server: _Server | None = None
    database_url: _Str | None = None
    redis_url: _Str | None = None
    retention_days: Number = Field(DEFAULT_RETENTION_DAYS, gt=0, le=36_500)
    state_max_entries: Int = Field(DEFAULT_STATE_MAX_ENTRIES, ge=10)
    catalog_file: _Str | None = None
    api_keys: list[_ApiKey] | None = None
    providers: list[_Provider] | None = None
    connections: list[_Connection] | None = None
    combos: list[Combo] | None = None
    model_combo_mappings: list[ComboMapping] | None = None
    model_aliases: list[_ModelAlias] | None = None
    fallback_chains: dict[str, list[_ChainEntry] | None] | None = None
    resilience: _Resilience | None = None
    auto: _Auto | None = None
    upstream_limits: _UpstreamLimits | None = None
    rate_limits: _RateLimits | None = None
    security: _Security | None = None
    combo_defaults: OptionsMap | None = None


# --- build -----------------------------------------------------------------------------------------


def build(
    data: Mapping[str, Any], env: Mapping[str, str], source: Path | None, strategies: Sequence[str]
) -> Config:
    if not isinstance(data, Mapping):
        raise ConfigError([("", f"the top level must be a mapping, got {type(data).__name__}")])
    errors: list[tuple[str, str]] = []
    unset: dict[Loc, str] = {}
    resolved = _interpolate(data, env, (), unset, errors)
    if errors:
        raise ConfigError(errors)
    try:
        root = _Root.model_validate(resolved, context=strategy_context(strategies))
    except ValidationError as exc:
        raise ConfigError(_pydantic_errors(exc, unset)) from None
    config = _convert(root, errors)
    config = _apply_env_urls(config, env, errors)
    if errors:
        raise ConfigError(errors)
    if config.catalog_file is not None and source is not None and not config.catalog_file.is_absolute():
        # a relative catalog_file is read from the config file's folder
        config = replace(config, catalog_file=source.parent / config.catalog_file)
    return replace(config, source_path=source)


def _pydantic_errors(exc: ValidationError, unset: Mapping[Loc, str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False, include_input=False):
        loc: Loc = tuple(err["loc"])
        if loc in unset and err["type"] != "extra_forbidden":
            msg = f"environment variable {unset[loc]} is not set"
        else:
            msg = field_message(err)
        out.append((key_path(loc), msg))
    return out


def _check_unique(values: Iterable[str], section: str, key: str, errors: list[tuple[str, str]]) -> None:
    seen: dict[str, int] = {}
    for i, v in enumerate(values):
        if v in seen:
            errors.append((f"{section}[{i}].{key}", f"duplicate {key} {v!r} (also {section}[{seen[v]}])"))
        else:
            seen[v] = i


def _convert(root: _Root, errors: list[tuple[str, str]]) -> Config:
    server = ServerConfig()
    if root.server:
        dumped = root.server.model_dump()
        server = ServerConfig(**dumped | {"allowed_hosts": tuple(h.lower() for h in dumped["allowed_hosts"])})

    api_keys = tuple(
        ApiKeyConfig(
            name=k.name,
            key=k.key,
            allowed_models=DEFAULT_ALLOWED_MODELS if k.allowed_models is None else tuple(k.allowed_models),
            budget_usd=k.budget_usd,
            budget_period=k.budget_period,
            expires_at=k.expires_at,
            rpm=k.rpm,
            tpm=k.tpm,
        )
        for k in root.api_keys or ()
    )
    _check_unique((k.name for k in api_keys), "api_keys", "name", errors)
    seen_keys: dict[str, int] = {}
    for i, k in enumerate(api_keys):
        if k.key is not None:
            if k.key in seen_keys:  # never echo the secret itself
                errors.append((f"api_keys[{i}].key", f"same key as api_keys[{seen_keys[k.key]}]"))
            seen_keys.setdefault(k.key, i)

    providers = tuple(_convert_provider(i, p, errors) for i, p in enumerate(root.providers or ()))
    _check_unique((p.id for p in providers), "providers", "id", errors)

    connections = tuple(
        ConnectionConfig(**{**c.model_dump(), "tags": tuple(c.tags or ())}) for c in root.connections or ()
    )
    _check_unique((c.id for c in connections), "connections", "id", errors)

    combos = tuple(root.combos or ())
    _check_unique((c.name for c in combos), "combos", "name", errors)

    chains: dict[str, tuple[ChainEntryConfig, ...]] = {}
    for model_id, entries in (root.fallback_chains or {}).items():
        chain = tuple(
            ChainEntryConfig(
                provider=e.provider, priority=i if e.priority is None else e.priority, enabled=e.enabled
            )
            for i, e in enumerate(entries or ())
        )
        _check_unique(
            (e.provider for e in chain), key_path(("fallback_chains", model_id)), "provider", errors
        )
        chains[model_id] = chain

    res = root.resilience or _Resilience()
    cooldown = CooldownConfig(**res.cooldown.model_dump()) if res.cooldown else CooldownConfig()
    lockout = LockoutConfig(**res.lockout.model_dump()) if res.lockout else LockoutConfig()
    for name, section in (("cooldown", cooldown), ("lockout", lockout)):
        if section.max_s < section.base_s:
            errors.append((f"resilience.{name}.max_s", f"must be >= base_s ({section.base_s:g})"))
    resilience = ResilienceConfig(
        circuit_breaker=(
            CircuitBreakerConfig(**res.circuit_breaker.model_dump())
            if res.circuit_breaker
            else CircuitBreakerConfig()
        ),
        cooldown=cooldown,
        lockout=lockout,
        retries=RetriesConfig(**res.retries.model_dump()) if res.retries else RetriesConfig(),
        timeouts=TimeoutsConfig(**res.timeouts.model_dump()) if res.timeouts else TimeoutsConfig(),
        stream_rescue=(
            StreamRescueConfig(**res.stream_rescue.model_dump())
            if res.stream_rescue
            else StreamRescueConfig()
        ),
    )
    auto = AutoConfig(**root.auto.model_dump()) if root.auto else AutoConfig()

    return Config(
        server=server,
        database_url=root.database_url or DEFAULT_DATABASE_URL,
        redis_url=root.redis_url,
        retention_days=float(root.retention_days),
        state_max_entries=int(root.state_max_entries),
        catalog_file=Path(root.catalog_file).expanduser() if root.catalog_file else None,
        api_keys=api_keys,
        providers=providers,
        connections=connections,
        combos=combos,
        model_combo_mappings=tuple(root.model_combo_mappings or ()),
        model_aliases=tuple(ModelAliasConfig(a.match, a.route) for a in root.model_aliases or ()),
        fallback_chains=MappingProxyType(chains),
        resilience=resilience,
        auto=auto,
        upstream_limits=UpstreamLimitsConfig(**root.upstream_limits.model_dump())
        if root.upstream_limits
        else UpstreamLimitsConfig(),
        combo_defaults=MappingProxyType({}) if root.combo_defaults is None else root.combo_defaults,
        rate_limits=RateLimitsConfig(**root.rate_limits.model_dump())
        if root.rate_limits
        else RateLimitsConfig(),
        security=_convert_security(root, server, providers, connections, errors),
    )


def _convert_security(
    root: _Root,
    server: ServerConfig,
    providers: tuple[ProviderConfig, ...],
    connections: tuple[ConnectionConfig, ...],
    errors: list[tuple[str, str]],
) -> SecurityConfig:
    """The ``security`` section, and every configured ``base_url`` checked against its policy."""
    sec = root.security or _Security()
    security = SecurityConfig(
        sec.allow_loopback_base_urls, sec.allow_private_base_urls, tuple(sec.denied_base_url_hosts)
    )
    try:
        policy = EgressPolicy.from_config(security)
    except ValueError as exc:
        errors.append(("security.denied_base_url_hosts", str(exc)))
        return security
    urls = [(f"providers[{i}].base_url", p.base_url) for i, p in enumerate(providers)]
    urls += [(f"connections[{i}].base_url", c.base_url) for i, c in enumerate(connections)]
    for problem in check_urls(policy, urls):
        where, _, why = problem.partition(": ")
        errors.append((where, why))
    if server.metrics_auth == "token" and not server.metrics_token:
        errors.append(("server.metrics_token", "required when metrics_auth is token"))
    return security


def _convert_provider(i: int, p: _Provider, errors: list[tuple[str, str]]) -> ProviderConfig:
    if "/" in p.id:
        errors.append((f"providers[{i}].id", "must not contain '/' (routable ids are provider/model)"))
    models = tuple(
        ModelConfig(
            id=m.id,
            name=m.name,
            input_price=m.input_price,
            output_price=m.output_price,
            context_window=m.context_window,
            max_output_tokens=m.max_output_tokens,
            capabilities=None if m.capabilities is None else frozenset(m.capabilities),
            tier=m.tier,
        )
        for m in p.models or ()
    )
    _check_unique((m.id for m in models), f"providers[{i}].models", "id", errors)
    return ProviderConfig(
        id=p.id,
        format=p.format,
        base_url=p.base_url,
        name=p.name,
        aliases=tuple(p.aliases or ()),
        models=models,
    )


def _check_url(url: str, schemes: Sequence[str], where: str, errors: list[tuple[str, str]]) -> None:
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() not in schemes:
        errors.append((where, f"must be a URL with scheme {' | '.join(schemes)} (optionally +driver)"))


def _apply_env_urls(config: Config, env: Mapping[str, str], errors: list[tuple[str, str]]) -> Config:
    # STORE-2: the environment picks the stores over the file; an empty variable counts as unset
    db_url = env.get(ENV_DATABASE_URL) or config.database_url
    redis_url = env.get(ENV_REDIS_URL) or config.redis_url
    db_where = f"database_url (from {ENV_DATABASE_URL})" if env.get(ENV_DATABASE_URL) else "database_url"
    redis_where = f"redis_url (from {ENV_REDIS_URL})" if env.get(ENV_REDIS_URL) else "redis_url"
    _check_url(db_url, DATABASE_URL_SCHEMES, db_where, errors)
    if redis_url is not None:
        _check_url(redis_url, REDIS_URL_SCHEMES, redis_where, errors)
    return replace(config, database_url=db_url, redis_url=redis_url)
