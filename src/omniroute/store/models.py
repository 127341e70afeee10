"""ORM table definitions of the store (STORE-1/2); the Alembic migrations create exactly these.

Times are float epoch seconds (``time.time()``) everywhere, so both databases store the same thing and
nothing depends on time zones; money is USD; latencies end in ``_ms``. Secrets live only in the
``*_enc`` columns as Fernet tokens (PROV-3). These classes never leave the store: repositories return
plain dicts and value objects.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "ApiKeyRow",
    "AutoExclusionRow",
    "Base",
    "ComboRow",
    "ConnectionRow",
    "FallbackChainRow",
    "ModelComboMappingRow",
    "ProviderNodeRow",
    "ResponseRow",
    "RoutingDecisionRow",
    "StoreMetaRow",
    "UsageRow",
    "api_keys",
    "auto_exclusions",
    "combos",
    "connections",
    "fallback_chains",
    "model_combo_mappings",
    "provider_nodes",
    "responses_store",
    "routing_decisions",
    "store_meta",
    "usage_log",
]

# Stable constraint names so later migrations can drop/alter them on both databases.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

_BigId = BigInteger().with_variant(Integer(), "sqlite")  # SQLite autoincrements only INTEGER PKs


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON, str: String()}


class ProviderNodeRow(Base):
    """A custom OpenAI-/Anthropic-compatible provider added at run time (PROV-2)."""

    __tablename__ = "provider_nodes"

    id: Mapped[str] = mapped_column(primary_key=True)
    format: Mapped[str] = mapped_column(default="openai")
    base_url: Mapped[str] = mapped_column(default="")
    name: Mapped[str] = mapped_column(default="")
    aliases: Mapped[list[Any]] = mapped_column(default=list)
    models: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class ConnectionRow(Base):
    """One provider account with encrypted credentials and its runtime state (PROV-3)."""

    __tablename__ = "connections"

    id: Mapped[str] = mapped_column(primary_key=True)
    provider: Mapped[str] = mapped_column(index=True)
    name: Mapped[str] = mapped_column(default="")
    auth_type: Mapped[str] = mapped_column(default="api_key")
    api_key_enc: Mapped[str | None] = mapped_column(Text)
    access_token_enc: Mapped[str | None] = mapped_column(Text)
    expires_at: Mapped[float | None] = mapped_column(Float)
    base_url: Mapped[str | None]
    default_model: Mapped[str | None]
    priority: Mapped[int] = mapped_column(Integer, default=1)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    account_tier: Mapped[str] = mapped_column(default="standard")
    max_concurrent: Mapped[int | None] = mapped_column(Integer)
    tags: Mapped[list[Any]] = mapped_column(default=list)
    rate_limited_until: Mapped[float | None] = mapped_column(Float)
    backoff_level: Mapped[int] = mapped_column(Integer, default=0)
    test_status: Mapped[str] = mapped_column(default="untested")
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class ApiKeyRow(Base):
    """A client API key, stored as a SHA-256 hash (API-8)."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(unique=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    key_prefix: Mapped[str] = mapped_column(String(16))
    allowed_models: Mapped[list[Any]] = mapped_column(default=list)
    budget_usd: Mapped[float | None] = mapped_column(Float)
    spent_usd: Mapped[float] = mapped_column(Float, default=0.0)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    last_used_at: Mapped[float | None] = mapped_column(Float)
    budget_period: Mapped[str] = mapped_column(default="total", server_default="total")
    period_start: Mapped[float | None] = mapped_column(Float)
    reserved_usd: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    expires_at: Mapped[float | None] = mapped_column(Float)
    rpm: Mapped[int | None] = mapped_column(Integer)
    tpm: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[float | None] = mapped_column(Float)


class ComboRow(Base):
    """A named combo: strategy over targets (COMBO-1)."""

    __tablename__ = "combos"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(unique=True)
    strategy: Mapped[str] = mapped_column(default="priority")
    targets: Mapped[list[Any]] = mapped_column(default=list)
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    description: Mapped[str] = mapped_column(Text, default="")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    sort_order: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class ModelComboMappingRow(Base):
    """A glob pattern routed to a combo (COMBO-2); deleted with its combo."""

    __tablename__ = "model_combo_mappings"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    pattern: Mapped[str]
    combo_id: Mapped[str] = mapped_column(String(32), ForeignKey("combos.id", ondelete="CASCADE"), index=True)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class FallbackChainRow(Base):
    """A model's declarative fallback chain: ``[{provider, priority, enabled}]`` (RESIL-4)."""

    __tablename__ = "fallback_chains"

    model: Mapped[str] = mapped_column(primary_key=True)
    entries: Mapped[list[Any]] = mapped_column(default=list)
    updated_at: Mapped[float] = mapped_column(Float)


class AutoExclusionRow(Base):
    """A candidate one API key excluded from an auto channel (AUTO-2); ``""`` is the keyless client."""

    __tablename__ = "auto_exclusions"

    api_key_id: Mapped[str] = mapped_column(primary_key=True)
    channel: Mapped[str] = mapped_column(primary_key=True)
    candidate_key: Mapped[str] = mapped_column(primary_key=True)
    created_at: Mapped[float] = mapped_column(Float)


class UsageRow(Base):
    """One request (or one member call of a multi-call strategy when ``member`` is set) (OBS-1)."""

    __tablename__ = "usage_log"

    id: Mapped[int] = mapped_column(_BigId, primary_key=True, autoincrement=True)
    ts: Mapped[float] = mapped_column(Float, index=True)
    request_id: Mapped[str] = mapped_column(index=True, default="")
    api_key_id: Mapped[str | None]
    requested_model: Mapped[str] = mapped_column(default="")
    provider: Mapped[str | None]
    model: Mapped[str | None]
    connection_id: Mapped[str | None]
    strategy: Mapped[str | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[int] = mapped_column(Integer, default=0)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text)
    stream: Mapped[bool] = mapped_column(Boolean, default=False)
    member: Mapped[str | None] = mapped_column(Text)
    # Added by migration 0002; the server defaults fill rows written before it.
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cache_write_1h_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    reasoning_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    price_unknown: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Added by migration 0005: a stream finished by a rescuing attempt after a failure (RESIL-9).
    rescued: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class RoutingDecisionRow(Base):
    """The full routing decision of one request, as JSON (OBS-2)."""

    __tablename__ = "routing_decisions"

    request_id: Mapped[str] = mapped_column(primary_key=True)
    ts: Mapped[float] = mapped_column(Float, index=True)
    data: Mapped[dict[str, Any]]


class ResponseRow(Base):
    """A stored Responses API response for ``previous_response_id`` (API surface ``/v1/responses``)."""

    __tablename__ = "responses_store"

    id: Mapped[str] = mapped_column(primary_key=True)
    api_key_id: Mapped[str] = mapped_column(default="")
    data: Mapped[dict[str, Any]]
    expires_at: Mapped[float] = mapped_column(Float, index=True)
    created_at: Mapped[float] = mapped_column(Float)


class StoreMetaRow(Base):
    """One named fact about the store itself; ``secret_key_fingerprint`` identifies the key the secrets
    were written with, so start-up refuses another key before it writes anything (PROV-3)."""

    __tablename__ = "store_meta"

    key: Mapped[str] = mapped_column(primary_key=True)
    value: Mapped[str] = mapped_column(Text)


def _table(model: type[Base]) -> Table:
    table = model.__table__
    if not isinstance(table, Table):  # pragma: no cover - declarative always builds a Table
        raise TypeError(f"{model.__name__} is not mapped to a Table")
    return table


# Core tables for the repositories, which run Core statements (bulk inserts, upserts) on them.
provider_nodes = _table(ProviderNodeRow)
connections = _table(ConnectionRow)
api_keys = _table(ApiKeyRow)
combos = _table(ComboRow)
model_combo_mappings = _table(ModelComboMappingRow)
fallback_chains = _table(FallbackChainRow)
auto_exclusions = _table(AutoExclusionRow)
usage_log = _table(UsageRow)
routing_decisions = _table(RoutingDecisionRow)
responses_store = _table(ResponseRow)
store_meta = _table(StoreMetaRow)
