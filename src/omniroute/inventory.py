"""Adding providers and connections: the checks and store writes shared by the management API
(``POST /api/providers``, ``POST /api/connections``, the console) and the CLI (``omniroute providers
add``, ``omniroute connections add``), so both accept and refuse exactly the same input.

Every refusal is an :class:`~omniroute.errors.InvalidRequest` whose ``param`` names the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from omniroute import wire
from omniroute.core.egress import EgressDenied, EgressPolicy
from omniroute.errors import InvalidRequest
from omniroute.routing.auto.factory import is_local_endpoint
from omniroute.values import Connection
from omniroute.wire.base import WireFormat

if TYPE_CHECKING:
    from omniroute.providers.catalog import Catalog
    from omniroute.store import Store

MAX_PRICE = 100_000.0  # USD per 1M tokens; anything above is a typo, and it keeps costs finite
MAX_TOKENS = 100_000_000


def _http_url(v: str | None) -> str | None:
    """``base_url`` must be an absolute http(s) URL with a host (PROV-2)."""
    if v is None:
        return v
    from urllib.parse import urlsplit

    try:
        u = urlsplit(v)
        port_ok = u.port is None or 0 < u.port < 65536
    except ValueError:
        raise ValueError("must be an http(s) URL like http://host:port/v1") from None
    if u.scheme not in ("http", "https") or not u.hostname or not port_ok:
        raise ValueError("must be an http(s) URL like http://host:port/v1")
    return v


HttpUrl = Annotated[str | None, AfterValidator(_http_url)]


WireFormatName = Annotated[str | None, Field(min_length=1, max_length=100)]
"""A provider ``format``: checked against the gateway's wire formats (the registry,
:mod:`omniroute.wire`, plus its extensions) by :func:`check_provider`."""


class ConnectionIn(BaseModel):
    """A connection as created or replaced through the API or the CLI."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$")
    provider: str = Field(min_length=1)
    name: str | None = None
    auth_type: Literal["api_key", "oauth"] = "api_key"
    api_key: str | None = None
    access_token: str | None = None
    expires_at: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    base_url: HttpUrl = None
    default_model: str | None = None
    priority: int = Field(default=1, ge=0, le=1_000_000)
    is_active: bool = True
    account_tier: Literal["ultra", "pro", "standard", "free"] = "standard"
    max_concurrent: int | None = Field(default=None, ge=1)
    tags: list[str] = Field(default_factory=list)


class ConnectionPatch(BaseModel):
    """``PUT /api/connections/{id}``: any subset of the fields; omitted fields keep their value."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    api_key: str | None = None
    access_token: str | None = None
    expires_at: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    base_url: HttpUrl = None
    default_model: str | None = None
    priority: int | None = Field(default=None, ge=0, le=1_000_000)
    is_active: bool | None = None
    account_tier: Literal["ultra", "pro", "standard", "free"] | None = None
    max_concurrent: int | None = Field(default=None, ge=1)
    tags: list[str] | None = None


class ModelIn(BaseModel):
    """A model of a custom provider; prices in USD per 1M tokens (PROV-2)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    name: str | None = None
    input_price: float | None = Field(default=None, ge=0, le=MAX_PRICE)
    output_price: float | None = Field(default=None, ge=0, le=MAX_PRICE)
    context_window: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    max_output_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    capabilities: (
        list[Literal["tools", "vision", "reasoning", "structured_output", "embeddings", "audio"]] | None
    ) = None
    tier: Literal["free", "standard", "premium"] | None = None


class ProviderIn(BaseModel):
    """A custom OpenAI-/Anthropic-/Gemini-compatible provider, or an override of a catalog one."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$")
    format: WireFormatName = None
    base_url: HttpUrl = None
    name: str | None = None
    aliases: list[str] = Field(default_factory=list)
    models: list[ModelIn] = Field(default_factory=list)


def field_errors(exc: ValidationError) -> list[tuple[str, str]]:
    """A pydantic error as ``(field path, message)`` pairs, e.g. ``("models[0].input_price", "Input
    should be greater than or equal to 0")`` — the field names the CLI prints."""
    out = []
    for err in exc.errors():
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        out.append((path or "body", str(err["msg"])))
    return out


def parse(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """``model.model_validate(data)``; a refusal becomes :class:`InvalidRequest` naming the first bad
    field (``param``) and listing every one in the message."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = field_errors(exc)
        raise InvalidRequest("; ".join(f"{k}: {m}" for k, m in errors), param=errors[0][0]) from None


def needs_api_key(body: ConnectionIn, catalog: Catalog) -> bool:
    """Whether an ``api_key`` connection must carry a key: not when its endpoint (the connection's
    ``base_url``, else the provider's) is on this machine or the local network, where servers such as
    Ollama, llama.cpp and vLLM take none (the rule auto routing applies too)."""
    provider = catalog.provider(body.provider)
    url = body.base_url or (provider.base_url if provider is not None else "")
    return not is_local_endpoint(url)


def check_base_url(url: str | None, policy: EgressPolicy | None = None) -> None:
    """The ``base_url`` policy (``security`` in the config, :mod:`omniroute.core.egress`; ``None``:
    the defaults, which refuse link-local and cloud-metadata addresses): a refused address is an
    :class:`InvalidRequest` naming ``base_url``."""
    if url:
        try:
            (policy or EgressPolicy()).check_url(url)
        except EgressDenied as exc:
            raise InvalidRequest(str(exc), param="base_url") from None


def check_connection(
    body: ConnectionIn, catalog: Catalog, *, exists: bool, policy: EgressPolicy | None = None
) -> None:
    """The checks beyond the schema: a new id, a provider ``catalog`` knows, a ``base_url`` the
    ``policy`` allows, and the credential its ``auth_type`` needs (no API key is needed for a local
    endpoint, see :func:`needs_api_key`).

    Raises :class:`InvalidRequest` naming the field (``id``, ``provider``, ``base_url``, ``api_key``,
    ``access_token``)."""
    if exists:
        raise InvalidRequest(
            f"a connection with id '{body.id}' already exists "
            f"(update it with PUT /api/connections/{body.id})",
            param="id",
        )
    if catalog.provider(body.provider) is None:
        raise InvalidRequest(
            f"provider: unknown provider '{body.provider}' (add it under /api/providers or with "
            "omniroute providers add first).",
            param="provider",
        )
    check_base_url(body.base_url, policy)
    if body.auth_type == "api_key" and not body.api_key and needs_api_key(body, catalog):
        raise InvalidRequest(
            "api_key: required when auth_type is api_key and the endpoint is not local.", param="api_key"
        )
    if body.auth_type == "oauth" and not body.access_token:
        raise InvalidRequest("access_token: required when auth_type is oauth.", param="access_token")


async def add_connection(
    store: Store, catalog: Catalog, body: ConnectionIn, policy: EgressPolicy | None = None
) -> Connection:
    """Check (:func:`check_connection`, ``base_url`` under ``policy``) and store a new connection; its
    secret is encrypted at rest by the store. Returns the stored value object; raises
    :class:`InvalidRequest` naming the field."""
    check_connection(body, catalog, exists=await store.get_connection(body.id) is not None, policy=policy)
    data = body.model_dump()
    data["name"] = data["name"] or body.id
    data["tags"] = tuple(body.tags)
    conn = Connection(**data)
    await store.upsert_connection(conn)
    return conn


def check_provider(
    body: ProviderIn,
    catalog: Catalog,
    formats: Sequence[WireFormat] = wire.FORMATS,
    policy: EgressPolicy | None = None,
) -> None:
    """``format`` must be one providers speak among ``formats`` (the registry plus a gateway's
    extensions), a provider the catalog does not know needs a ``base_url``, and that URL must pass
    ``policy`` (:func:`check_base_url`); raises :class:`InvalidRequest` naming the field."""
    problem = wire.unknown_upstream_format(body.format, formats) if body.format is not None else None
    if problem is not None:
        raise InvalidRequest(f"format: {problem}", param="format")
    if catalog.provider(body.id) is None and not body.base_url:
        raise InvalidRequest("base_url: required for a provider the catalog does not know.", param="base_url")
    check_base_url(body.base_url, policy)


async def add_provider(
    store: Store,
    catalog: Catalog,
    body: ProviderIn,
    validate: Any,
    formats: Sequence[WireFormat] = wire.FORMATS,
    policy: EgressPolicy | None = None,
) -> None:
    """Check (:func:`check_provider`) and store a custom provider node (or catalog override), then
    await ``validate()`` — which rebuilds the merged catalog — and undo the write when that raises
    ``ValueError`` (an alias clash, bad limits …). Raises :class:`InvalidRequest` naming the field."""
    check_provider(body, catalog, formats, policy)
    previous = [n for n in await store.list_provider_nodes() if n["id"] == body.id]
    await store.upsert_provider_node(body.model_dump())
    try:
        await validate()
    except ValueError as exc:
        if previous:
            await store.upsert_provider_node(previous[0])
        else:
            await store.delete_provider_node(body.id)
        raise InvalidRequest(f"provider '{body.id}': {exc}", param="id") from None
