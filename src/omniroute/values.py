"""Typed value objects that cross module boundaries (DESIGN house style 9).

Prices are USD per 1M tokens; context windows and output limits are tokens; times are seconds
unless a name ends in ``_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Tier = Literal["free", "standard", "premium"]
AccountTier = Literal["ultra", "pro", "standard", "free"]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One catalog model (PROV-2). Prices in USD per 1M tokens; ``None`` when unknown.

    ``capabilities`` is ``None`` when unknown (no ``capabilities`` key anywhere: pre-call checks never
    skip the model) and a set — possibly empty, meaning "none" — when declared (RESIL-8)."""

    id: str
    input_price: float | None = None
    output_price: float | None = None
    context_window: int = 0
    max_output_tokens: int = 0
    capabilities: frozenset[str] | None = None
    tier: str = "standard"
    name: str = ""

    @property
    def blended_price(self) -> float | None:
        """60 % input + 40 % output price per 1M tokens (COMBO-3 cost-optimized, AUTO-3 costInv)."""
        if self.input_price is None or self.output_price is None:
            return None
        return 0.6 * self.input_price + 0.4 * self.output_price


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """One provider: wire format, base URL, aliases, models (PROV-1, PROV-2)."""

    id: str
    format: str = "openai"
    base_url: str = ""
    name: str = ""
    aliases: tuple[str, ...] = ()
    models: tuple[ModelInfo, ...] = ()
    simulated: bool = False
    embeddings: bool = False

    def model(self, model_id: str) -> ModelInfo | None:
        """The catalog entry for ``model_id`` (exact, then case-insensitive), or ``None``."""
        for m in self.models:
            if m.id == model_id:
                return m
        low = model_id.lower()
        for m in self.models:
            if m.id.lower() == low:
                return m
        return None


@dataclass(frozen=True, slots=True)
class Connection:
    """One account of a provider (PROV-3). Secrets are plain here (decrypted in memory only)."""

    id: str
    provider: str
    name: str = ""
    auth_type: str = "api_key"
    api_key: str | None = None
    access_token: str | None = None
    expires_at: float | None = None
    base_url: str | None = None
    default_model: str | None = None
    priority: int = 1
    is_active: bool = True
    account_tier: str = "standard"
    max_concurrent: int | None = None
    tags: tuple[str, ...] = ()

    @property
    def secret(self) -> str | None:
        """The bearer credential sent upstream (API key or OAuth access token)."""
        return self.api_key if self.auth_type == "api_key" else self.access_token


@dataclass(frozen=True, slots=True)
class Candidate:
    """One concrete ``(provider, connection, model)`` the engine can attempt (SPEC §1)."""

    provider: ProviderInfo
    connection: Connection
    model: ModelInfo
    timeout_s: float | None = None
    weight: float = 0.0
    step: int = 0

    @property
    def key(self) -> str:
        """Stable id ``provider/model@connection`` used in state and decisions."""
        return f"{self.provider.id}/{self.model.id}@{self.connection.id}"

    @property
    def model_str(self) -> str:
        """The routable id ``provider/model``."""
        return f"{self.provider.id}/{self.model.id}"


@dataclass(slots=True)
class ChatRequest:
    """The canonical request: an OpenAI Chat Completions body (hub of the translation, PROV-1).

    ``body`` is the client's JSON object after translation to the OpenAI chat shape; ``model`` is the
    requested model string (``X-Route-Model`` wins over ``body.model``); ``client_format`` names the
    inbound surface (``openai``, ``anthropic``, ``responses``, ``gemini``). ``native`` is the
    client's original body in its own wire format, kept for same-format pass-through (PROV-1: an
    Anthropic client reaching an Anthropic upstream is not re-encoded); code that rewrites ``body``
    must set ``native`` to ``None`` so adapters translate ``body`` instead.
    """

    body: dict[str, Any]
    model: str
    stream: bool = False
    include_usage: bool = False
    client_format: str = "openai"
    request_id: str = ""
    api_key_id: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    session_id: str | None = None
    raw_body: bytes | None = None

    @property
    def prompt_estimate(self) -> int:
        """Estimated prompt tokens (≈ chars / 4), used when an upstream reports no usage."""
        from omniroute.resilience.precall import estimate_prompt_tokens

        return estimate_prompt_tokens(self.body)

    native: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one response (OpenAI names). ``cached_tokens`` is part of ``prompt_tokens``."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cached_tokens:
            out["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return out

    @staticmethod
    def from_openai(data: dict[str, Any] | None) -> Usage | None:
        """Parse an OpenAI ``usage`` object; ``None`` when absent."""
        if not data:
            return None
        details = data.get("prompt_tokens_details") or {}
        return Usage(
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0,
        )

    def cost_usd(self, model: ModelInfo) -> float:
        """Cost in USD from catalog prices (USD per 1M tokens); 0 when a price is unknown (OBS-1)."""
        cost = 0.0
        if model.input_price is not None:
            cost += self.prompt_tokens * model.input_price / 1_000_000
        if model.output_price is not None:
            cost += self.completion_tokens * model.output_price / 1_000_000
        return cost
