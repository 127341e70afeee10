"""The gateway's configuration: the OPS-2 YAML contract, parsed once into immutable objects.

This package owns reading the config file (path from ``--config`` or ``OMNIROUTE_CONFIG``), resolving
``${ENV}`` references, validating every key (unknown keys and bad values are a :class:`ConfigError` that
names the key path, e.g. ``connections[0].priority``), applying the STORE-2 URL overrides
(``OMNIROUTE_DATABASE_URL``, ``OMNIROUTE_REDIS_URL``) and the built-in defaults, which are the named
``DEFAULT_*`` constants below.

Validation uses pydantic models at the edge (private, ``extra="forbid"``, in
:mod:`omniroute.config._load`); the rest of the program sees only the frozen, slotted dataclasses defined
here and, for combos and model→combo mappings, the schema the management API shares
(:mod:`omniroute.core.combo`). Times are seconds (``*_s``), prices USD per 1M tokens, budgets USD.
Secrets (``admin_key``, API keys, tokens) are kept out of ``repr``.

``${ENV}`` rules (OPS-2): ``${NAME}`` and ``${NAME:-default}`` are replaced anywhere inside string values
(mapping keys are left alone; ``$${`` is a literal ``${``). A value that is exactly ``${NAME}`` with
``NAME`` unset becomes ``None`` (so an optional secret such as ``server.admin_key`` is simply absent); an
unset reference inside a longer string is an error naming the key path.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import yaml

from omniroute.core.combo import ROUTING_STRATEGY_VALUES, Combo, ComboMapping

__all__ = [
    "CAPABILITY_VALUES",
    "DEFAULT_DATABASE_URL",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_RETENTION_DAYS",
    "DEFAULT_STATE_MAX_ENTRIES",
    "ENV_CONFIG_PATH",
    "ENV_DATABASE_URL",
    "ENV_REDIS_URL",
    "ApiKeyConfig",
    "AutoConfig",
    "ChainEntryConfig",
    "CircuitBreakerConfig",
    "Config",
    "ConfigError",
    "ConnectionConfig",
    "CooldownConfig",
    "LockoutConfig",
    "ModelAliasConfig",
    "ModelConfig",
    "ProviderConfig",
    "RateLimitsConfig",
    "ResilienceConfig",
    "RetriesConfig",
    "ServerConfig",
    "StreamRescueConfig",
    "TimeoutsConfig",
    "UpstreamLimitsConfig",
    "config_from_dict",
    "load_config",
]

# --- environment variables (OPS-2, STORE-2) -------------------------------------------------------
ENV_CONFIG_PATH = "OMNIROUTE_CONFIG"
ENV_DATABASE_URL = "OMNIROUTE_DATABASE_URL"
ENV_REDIS_URL = "OMNIROUTE_REDIS_URL"

# --- server (OPS-1, OPS-2, API-8) -----------------------------------------------------------------
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 20128
DEFAULT_REQUIRE_API_KEY = False
DEFAULT_MAX_BODY_MB = 10.0
DEFAULT_WORKERS = 1
DEFAULT_STREAM_KEEPALIVE_S = 5.0
DEFAULT_LOG_FORMAT: Final = "text"
DEFAULT_DRAIN_TIMEOUT_S = 30.0
METRICS_AUTH_VALUES = ("public", "admin", "token")
DEFAULT_METRICS_AUTH = "admin"
DEFAULT_HEADER_TIMEOUT_S = 10
DEFAULT_MAX_RESPONSE_MB = 32.0
"""Largest upstream response body (MB, after decompression) read whole; past it the attempt fails with
a 502 and the engine falls back. Generous for any chat or embeddings answer, small enough that a
hostile upstream cannot exhaust memory (issue "no limit on upstream response size")."""
DEFAULT_MAX_EVENT_MB = 8.0
"""Largest single upstream SSE event (MB); a stream is bounded per event, not in total."""
"""Seconds a streaming request may wait for its first content before the response headers and a
keep-alive go out (then one keep-alive per interval): clients abort streams whose headers take too
long (Gemini CLI: 60 s), and proxies drop idle connections. ``0`` turns it off."""

# --- storage (STORE-1, STORE-2) ---------------------------------------------------------------------
DEFAULT_DATABASE_URL = "sqlite:///./data/omniroute.db"
DEFAULT_RETENTION_DAYS = 30.0
"""Days usage rows and routing decisions are kept before the background pruning deletes them."""
DEFAULT_STATE_MAX_ENTRIES = 100_000
"""Entries kept per in-process routing-state table that grows with traffic (windows, counters,
lockouts, byte records) before the least recently written is evicted."""
DATABASE_URL_SCHEMES = ("sqlite", "postgresql", "postgres")
REDIS_URL_SCHEMES = ("redis", "rediss", "unix")

# --- catalog and connections (PROV-2, PROV-3) --------------------------------------------------------
DEFAULT_PROVIDER_FORMAT = "openai"
CAPABILITY_VALUES = ("tools", "vision", "reasoning", "structured_output", "embeddings", "audio")
MODEL_TIER_VALUES = ("free", "standard", "premium")
ACCOUNT_TIER_VALUES = ("ultra", "pro", "standard", "free")
DEFAULT_ACCOUNT_TIER: Final = "standard"
DEFAULT_CONNECTION_PRIORITY = 1
DEFAULT_ALLOWED_MODELS: tuple[str, ...] = ("*",)

# --- resilience (RESIL-1, RESIL-2, RESIL-3, RESIL-6) -------------------------------------------------
DEFAULT_FAILURE_THRESHOLD = 5
# Recovery (RESIL-11): a recovered target must be back within 15 s under steady traffic, so the breaker
# probes at least every 10 s and a server-error cooldown never outlasts 10 s.
DEFAULT_RESET_TIMEOUT_S = 10.0
DEFAULT_MAX_RESET_TIMEOUT_S = 10.0
DEFAULT_HALF_OPEN_PROBES = 1
DEFAULT_COOLDOWN_BASE_S = 3.0
DEFAULT_COOLDOWN_MAX_S = 300.0
DEFAULT_COOLDOWN_MAX_HINT_S = 1800.0
DEFAULT_COOLDOWN_SERVER_ERROR_MAX_S = 10.0
DEFAULT_LOCKOUT_BASE_S = 120.0
DEFAULT_LOCKOUT_MAX_S = 1800.0
DEFAULT_RETRIES_PER_TARGET = 1
DEFAULT_MAX_ATTEMPTS = 10
DEFAULT_MAX_HINT_WAIT_S = 3.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_TTFT_TIMEOUT_S = 60.0
DEFAULT_IDLE_TIMEOUT_S = 60.0
DEFAULT_TOTAL_TIMEOUT_S = 600.0

# --- auto-combo (AUTO-5a, AUTO-8) ---------------------------------------------------------------------
DEFAULT_EXPLORATION_RATE = 0.05
LKGP_SCOPE_VALUES = ("session", "combo", "global")
DEFAULT_LKGP_SCOPE: Final = "session"


class ConfigError(ValueError):
    """The config is unusable (OPS-2). ``errors`` holds ``(key_path, message)`` pairs, e.g.
    ``("connections[0].priority", "Input should be a valid integer")``; ``str(err)`` lists them one per
    line as ``key_path: message``. ``source`` is the file, when one was read.
    """

    def __init__(self, errors: Iterable[tuple[str, str]] | str, *, source: Path | None = None) -> None:
        self.errors: tuple[tuple[str, str], ...] = (
            (("", errors),) if isinstance(errors, str) else tuple(errors)
        )
        self.source = source
        lines = [f"{p}: {m}" if p else m for p, m in self.errors]
        head = [f"invalid config file {source}:"] if source is not None else []
        super().__init__("\n".join(head + lines))


# =====================================================================================================
# Public immutable config objects
# =====================================================================================================


def _empty_map() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """``server`` (OPS-1, OPS-2, API-8): listen ``host``/``port``, whether ``/v1`` requires an API key,
    the management ``admin_key`` (``None`` → management API on loopback only), the request body cap
    ``max_body_mb`` (megabytes, 413 above it), uvicorn ``workers`` and ``stream_keepalive_s``
    (seconds; :data:`DEFAULT_STREAM_KEEPALIVE_S`) — the last two additions to the contract — and
    ``allowed_hosts``, the ``Host`` names the management API answers besides loopback ones (DNS
    rebinding guard, :mod:`omniroute.api.hosts`); ``log_format`` (``text`` or ``json``, overridden by
    ``serve --log-format``), ``otlp_endpoint`` (an OTLP/HTTP base URL for traces, ``None`` → off unless
    ``$OTEL_EXPORTER_OTLP_ENDPOINT`` is set) and ``drain_timeout_s`` (seconds requests in flight get to
    finish after SIGTERM; :data:`DEFAULT_DRAIN_TIMEOUT_S`). ``metrics_auth`` says who may read ``/metrics``:
    ``public``, ``admin`` (the management API's rule: the admin key, or loopback when none is set;
    the default) or ``token`` (``Authorization: Bearer <metrics_token>``, or the admin key).
    ``header_timeout_s`` (whole seconds) closes a connection whose request headers have not all
    arrived, and an idle keep-alive connection, after that long.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    require_api_key: bool = DEFAULT_REQUIRE_API_KEY
    admin_key: str | None = field(default=None, repr=False)
    max_body_mb: float = DEFAULT_MAX_BODY_MB
    workers: int = DEFAULT_WORKERS
    stream_keepalive_s: float = DEFAULT_STREAM_KEEPALIVE_S
    allowed_hosts: tuple[str, ...] = ()
    log_format: str = DEFAULT_LOG_FORMAT
    otlp_endpoint: str | None = None
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    metrics_auth: str = DEFAULT_METRICS_AUTH
    metrics_token: str | None = field(default=None, repr=False)
    header_timeout_s: int = DEFAULT_HEADER_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    """``security``: where provider keys may be sent (:mod:`omniroute.core.egress`).

    ``allow_loopback_base_urls`` (default true: local model servers) and ``allow_private_base_urls``
    (default true: RFC 1918/4193/6598 ranges, models on the LAN) say whether a ``base_url`` may point
    there; ``denied_base_url_hosts`` lists more host names or CIDR ranges to refuse. Link-local and
    cloud-metadata addresses are always refused.
    """

    allow_loopback_base_urls: bool = True
    allow_private_base_urls: bool = True
    denied_base_url_hosts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UpstreamLimitsConfig:
    """``upstream_limits``: the most the gateway reads from a provider, in megabytes (after
    decompression): ``max_response_mb`` for a whole body (answers and error bodies),
    ``max_event_mb`` for one streamed SSE event. Over a limit the attempt is a 502 counted against
    the provider, so the request falls back.
    """

    max_response_mb: float = DEFAULT_MAX_RESPONSE_MB
    max_event_mb: float = DEFAULT_MAX_EVENT_MB


@dataclass(frozen=True, slots=True)
class ApiKeyConfig:
    """One client key (API-8): ``key`` is the plaintext secret (``None`` when its ``${ENV}`` reference is
    unset: such an entry admits nobody), ``allowed_models`` glob patterns, ``budget_usd`` spend cap in USD
    per ``budget_period`` (``daily``/``weekly``/``monthly`` reset at the UTC boundary, ``total`` never;
    ``None`` = unlimited), ``expires_at`` epoch seconds after which the key is refused (401), ``rpm``/``tpm``
    requests and tokens per minute (``None`` = ``rate_limits`` defaults).
    """

    name: str
    key: str | None = field(default=None, repr=False)
    allowed_models: tuple[str, ...] = DEFAULT_ALLOWED_MODELS
    budget_usd: float | None = None
    budget_period: str = "total"
    expires_at: float | None = None
    rpm: int | None = None
    tpm: int | None = None


@dataclass(frozen=True, slots=True)
class RateLimitsConfig:
    """Default per-key rate limits (API-8) for keys that set none: ``rpm`` requests and ``tpm`` tokens
    per minute (moving 60-second window); ``None`` = unlimited."""

    rpm: int | None = None
    tpm: int | None = None


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """A model of a config provider, or an override of a catalog model's fields (PROV-2).

    ``None`` means "not set here": inherit the catalog value (or the catalog default for a new model).
    Prices in USD per 1M tokens; ``context_window``/``max_output_tokens`` in tokens; ``capabilities``
    is a subset of :data:`CAPABILITY_VALUES`; ``tier`` one of free|standard|premium.
    """

    id: str
    name: str | None = None
    input_price: float | None = None
    output_price: float | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    capabilities: frozenset[str] | None = None
    tier: str | None = None


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """A custom provider, or an override of a catalog provider with the same ``id`` (PROV-1, PROV-2).

    ``format`` and ``base_url`` are ``None`` when not set: an override inherits the catalog's, a new
    provider gets :data:`DEFAULT_PROVIDER_FORMAT` and must have a ``base_url`` (the catalog merger
    checks that, since only it knows which ids the catalog has). ``format`` names a wire format; the
    gateway checks it against the wire registry when it starts (the config layer sits below it).
    ``aliases`` are extra ids usable in ``provider/model`` strings (RES step 5).
    """

    id: str
    format: str | None = None
    base_url: str | None = None
    name: str | None = None
    aliases: tuple[str, ...] = ()
    models: tuple[ModelConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class ConnectionConfig:
    """One account of a provider (PROV-3); field names match :class:`omniroute.values.Connection`.

    ``expires_at`` is epoch seconds (ISO strings in the file are converted; naive times are UTC);
    ``priority`` lower first; ``max_concurrent`` ``None`` = unlimited. Secrets are kept out of ``repr``.
    """

    id: str
    provider: str
    name: str | None = None
    auth_type: str = "api_key"
    api_key: str | None = field(default=None, repr=False)
    access_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    base_url: str | None = None
    default_model: str | None = None
    priority: int = DEFAULT_CONNECTION_PRIORITY
    is_active: bool = True
    account_tier: str = DEFAULT_ACCOUNT_TIER
    tags: tuple[str, ...] = ()
    max_concurrent: int | None = None


@dataclass(frozen=True, slots=True)
class ModelAliasConfig:
    """One ``model_aliases`` entry (an addition to the OPS-2 contract, SPEC §4): a client's model id
    ``match`` (an exact id, or a case-insensitive ``*``/``?`` glob) routed as ``route`` (any routable
    model string: combo name, ``combo/<name>``, ``provider/model``, ``auto…`` or a catalog id).
    """

    match: str
    route: str


@dataclass(frozen=True, slots=True)
class ChainEntryConfig:
    """One entry of a declarative fallback chain (RESIL-4): ``priority`` lower first (defaults to the
    entry's index in the file's list); disabled entries are skipped.
    """

    provider: str
    priority: int
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class CircuitBreakerConfig:
    """Per-provider breaker (RESIL-1): OPEN after ``failure_threshold`` consecutive counted failures,
    HALF_OPEN after ``reset_timeout_s`` seconds (doubling per re-open, never beyond
    ``max_reset_timeout_s`` nor below ``reset_timeout_s``; RESIL-11), admitting ``half_open_probes``.
    """

    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD
    reset_timeout_s: float = DEFAULT_RESET_TIMEOUT_S
    max_reset_timeout_s: float = DEFAULT_MAX_RESET_TIMEOUT_S
    half_open_probes: int = DEFAULT_HALF_OPEN_PROBES


@dataclass(frozen=True, slots=True)
class CooldownConfig:
    """Per-connection cooldown (RESIL-2), seconds: backoff ``base_s·2^level`` capped at ``max_s``;
    upstream retry hints capped at ``max_hint_s``; a cooldown caused by a server-side failure
    (503/529/overloaded, or a hinted 5xx) never lasts longer than ``server_error_max_s`` (RESIL-11).
    """

    base_s: float = DEFAULT_COOLDOWN_BASE_S
    max_s: float = DEFAULT_COOLDOWN_MAX_S
    max_hint_s: float = DEFAULT_COOLDOWN_MAX_HINT_S
    server_error_max_s: float = DEFAULT_COOLDOWN_SERVER_ERROR_MAX_S


@dataclass(frozen=True, slots=True)
class LockoutConfig:
    """Per provider+connection+model lockout (RESIL-3), seconds: ``base_s·2^n`` capped at ``max_s``."""

    base_s: float = DEFAULT_LOCKOUT_BASE_S
    max_s: float = DEFAULT_LOCKOUT_MAX_S


@dataclass(frozen=True, slots=True)
class StreamRescueConfig:
    """``resilience.stream_rescue`` (RESIL-9): when ``enabled`` (default), a stream that fails after
    it was committed to the client is finished by another attempt instead of ending with an error
    event (:mod:`omniroute.routing.rescue`). The config file may write ``stream_rescue: false``."""

    enabled: bool = True


@dataclass(frozen=True, slots=True)
class RetriesConfig:
    """Retry budget (RESIL-6): transient retries ``per_target``, the cap ``max_attempts`` of upstream
    calls per request, and ``max_hint_wait_s``, the longest upstream wait hint (seconds) waited out
    in-request to retry the same target rather than fail over.
    """

    per_target: int = DEFAULT_RETRIES_PER_TARGET
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_hint_wait_s: float = DEFAULT_MAX_HINT_WAIT_S


@dataclass(frozen=True, slots=True)
class TimeoutsConfig:
    """Per-attempt timeouts in seconds (RESIL-6, RESIL-9): ``connect_s``, time to first byte
    ``ttft_s``, stream ``idle_s`` between chunks, and the request's ``total_s`` deadline.
    """

    connect_s: float = DEFAULT_CONNECT_TIMEOUT_S
    ttft_s: float = DEFAULT_TTFT_TIMEOUT_S
    idle_s: float = DEFAULT_IDLE_TIMEOUT_S
    total_s: float = DEFAULT_TOTAL_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class ResilienceConfig:
    """``resilience`` (RESIL-1, RESIL-2, RESIL-3, RESIL-6, RESIL-9): the ladder's tunables, and
    ``stream_rescue``."""

    circuit_breaker: CircuitBreakerConfig = field(default_factory=CircuitBreakerConfig)
    cooldown: CooldownConfig = field(default_factory=CooldownConfig)
    lockout: LockoutConfig = field(default_factory=LockoutConfig)
    retries: RetriesConfig = field(default_factory=RetriesConfig)
    timeouts: TimeoutsConfig = field(default_factory=TimeoutsConfig)
    stream_rescue: StreamRescueConfig = field(default_factory=StreamRescueConfig)


@dataclass(frozen=True, slots=True)
class AutoConfig:
    """``auto`` (AUTO-1, AUTO-5a, AUTO-8): bandit ``exploration_rate`` (fraction in [0, 1]), the variant
    plain ``auto`` uses (``default_variant``, ``None`` = LKGP router with default weights; validated by the
    auto module) and the key of LKGP records, ``lkgp_scope`` session|combo|global.
    """

    exploration_rate: float = DEFAULT_EXPLORATION_RATE
    default_variant: str | None = None
    lkgp_scope: str = DEFAULT_LKGP_SCOPE


def _empty_chains() -> Mapping[str, tuple[ChainEntryConfig, ...]]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Config:
    """The whole configuration (OPS-2): one object, built once at start and never mutated.

    ``fallback_chains`` maps a model id to its chain entries (RESIL-4). ``combos`` and
    ``model_combo_mappings`` use the shared combo schema (:mod:`omniroute.core.combo`, COMBO-1,
    COMBO-2). ``model_aliases`` route client model ids (agents' defaults) to a routable string, in
    file order (SPEC §4). ``combo_defaults`` holds the global level of the combo → global → default cascade
    (COMBO-3/COMBO-4: e.g. ``stickyRoundRobinLimit``; the deep-frozen options map of
    :class:`~omniroute.core.combo.ComboOptions`), an addition to the OPS-2 contract. ``source_path``
    is the file that was read, or ``None``. Config-declared objects win over stored copies with the
    same id (OPS-2). ``catalog_file`` is a catalog written by ``omniroute catalog refresh`` that
    replaces the built-in one (PROV-2); ``None`` uses the built-in catalog. ``retention_days``: usage
    rows and routing decisions older than this many days are deleted by a background task;
    ``state_max_entries`` bounds each in-process routing-state table that grows with traffic.
    """

    server: ServerConfig = field(default_factory=ServerConfig)
    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str | None = None
    retention_days: float = DEFAULT_RETENTION_DAYS
    state_max_entries: int = DEFAULT_STATE_MAX_ENTRIES
    catalog_file: Path | None = None
    api_keys: tuple[ApiKeyConfig, ...] = ()
    providers: tuple[ProviderConfig, ...] = ()
    connections: tuple[ConnectionConfig, ...] = ()
    combos: tuple[Combo, ...] = ()
    model_combo_mappings: tuple[ComboMapping, ...] = ()
    model_aliases: tuple[ModelAliasConfig, ...] = ()
    fallback_chains: Mapping[str, tuple[ChainEntryConfig, ...]] = field(default_factory=_empty_chains)
    resilience: ResilienceConfig = field(default_factory=ResilienceConfig)
    auto: AutoConfig = field(default_factory=AutoConfig)
    upstream_limits: UpstreamLimitsConfig = field(default_factory=UpstreamLimitsConfig)
    security: SecurityConfig = field(default_factory=SecurityConfig)
    combo_defaults: Mapping[str, Any] = field(default_factory=_empty_map)
    rate_limits: RateLimitsConfig = field(default_factory=RateLimitsConfig)
    source_path: Path | None = None

    @property
    def is_default(self) -> bool:
        """True when nothing was configured: no file was read and every section holds its built-in
        default (the STORE-2 URL overrides from the environment do not count).
        """
        if self.source_path is not None:
            return False
        return replace(self, database_url=DEFAULT_DATABASE_URL, redis_url=None) == Config()

    def with_overrides(
        self, host: str | None = None, port: int | None = None, workers: int | None = None
    ) -> Config:
        """A copy with CLI flags applied over the file (OPS-1); ``None`` keeps the configured value.
        Raises :class:`ConfigError` for an empty host, a port outside 1–65535 or workers < 1.
        """
        errors: list[tuple[str, str]] = []
        if host is not None and not host:
            errors.append(("server.host", "must not be empty"))
        if port is not None and not 1 <= port <= 65535:
            errors.append(("server.port", "must be between 1 and 65535"))
        if workers is not None and workers < 1:
            errors.append(("server.workers", "must be >= 1"))
        if errors:
            raise ConfigError(errors)
        server = replace(
            self.server,
            host=self.server.host if host is None else host,
            port=self.server.port if port is None else port,
            workers=self.server.workers if workers is None else workers,
        )
        return replace(self, server=server)


# =====================================================================================================
# Loading
# =====================================================================================================


def load_config(
    path: str | Path | None,
    env: Mapping[str, str] | None = None,
    strategies: Sequence[str] = ROUTING_STRATEGY_VALUES,
) -> Config:
    """Read and validate the YAML config at ``path`` (OPS-2).

    ``path`` ``None`` → the file named by ``OMNIROUTE_CONFIG`` in ``env``, else built-in defaults (no
    file). ``env`` defaults to ``os.environ``; it feeds ``${ENV}`` references and the STORE-2 URL
    overrides. ``strategies``: the strategy names a combo may use (COMBO-3; the built-in 19 unless
    more are registered). An empty file is all defaults. Raises :class:`ConfigError` for a missing or
    unreadable file, bad YAML, or any invalid key (the message names the key path).
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    if path is None:
        from_env = environ.get(ENV_CONFIG_PATH)
        if not from_env:
            return config_from_dict({}, env=environ, strategies=strategies)
        path = from_env
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {source}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {source}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {exc}") from None
    if data is None:
        data = {}
    try:
        from omniroute.config._load import build

        return build(data, environ, source, strategies)
    except ConfigError as exc:
        raise ConfigError(exc.errors, source=source) from None


def config_from_dict(
    data: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    strategies: Sequence[str] = ROUTING_STRATEGY_VALUES,
) -> Config:
    """Validate an already-parsed config mapping (same contract and errors as :func:`load_config`,
    OPS-2); ``env`` (default ``os.environ``) resolves ``${ENV}`` and the STORE-2 URL overrides;
    ``strategies`` as for :func:`load_config`.
    """
    from omniroute.config._load import build

    return build(data, os.environ if env is None else env, None, strategies)
