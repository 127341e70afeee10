"""Typed value objects that cross module boundaries (DESIGN house style 9).

Prices are USD per 1M tokens; context windows and output limits are tokens; times are seconds
unless a name ends in ``_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from omniroute.core.prompt import estimate_prompt_tokens

Tier = Literal["free", "standard", "premium"]
AccountTier = Literal["ultra", "pro", "standard", "free"]


@dataclass(frozen=True, slots=True)
class TokenPrices:
    """USD per 1M tokens for each token class of one price tier (OBS-1).

    ``cache_read`` prices prompt tokens served from a prompt cache, ``cache_write_5m`` and
    ``cache_write_1h`` prompt tokens written to a cache with a 5-minute or 1-hour lifetime (Anthropic
    prompt caching). Reasoning tokens are output tokens and priced as ``output`` by every provider.
    """

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One catalog model (PROV-2). Prices in USD per 1M tokens; ``None`` when unknown.

    ``capabilities`` is ``None`` when unknown (no ``capabilities`` key anywhere: pre-call checks never
    skip the model) and a set — possibly empty, meaning "none" — when declared (RESIL-8).
    ``cache_read_price``/``cache_write_price``/``cache_write_1h_price`` default to the input price
    (and the 1-hour write to the 5-minute write) when ``None``. ``long_context`` holds the prices
    charged for the whole request once its prompt exceeds ``long_context_threshold`` tokens (Anthropic
    1M-context and Gemini >200k prices). ``price_source`` says where the prices came from
    (``genai-prices 0.2.3``, ``config``, ``catalog``, ``local``, ``unknown``).
    """

    id: str
    input_price: float | None = None
    output_price: float | None = None
    context_window: int = 0
    max_output_tokens: int = 0
    capabilities: frozenset[str] | None = None
    tier: str = "standard"
    name: str = ""
    cache_read_price: float | None = None
    cache_write_price: float | None = None
    cache_write_1h_price: float | None = None
    long_context_threshold: int = 0
    long_context: TokenPrices | None = None
    price_source: str = ""

    @property
    def blended_price(self) -> float | None:
        """60 % input + 40 % output price per 1M tokens (COMBO-3 cost-optimized, AUTO-3 costInv)."""
        if self.input_price is None or self.output_price is None:
            return None
        return 0.6 * self.input_price + 0.4 * self.output_price

    @property
    def price_known(self) -> bool:
        """Whether both the input and the output price are known."""
        return self.input_price is not None and self.output_price is not None

    def token_prices(self, prompt_tokens: int) -> TokenPrices | None:
        """The prices charged for a request with ``prompt_tokens`` prompt tokens (cache included), or
        ``None`` when unknown. The long-context tier applies when ``prompt_tokens`` exceeds
        ``long_context_threshold``, as genai-prices' tiered prices do."""
        if self.input_price is None or self.output_price is None:
            return None
        if self.long_context is not None and prompt_tokens > self.long_context_threshold:
            return self.long_context
        write = self.input_price if self.cache_write_price is None else self.cache_write_price
        return TokenPrices(
            input=self.input_price,
            output=self.output_price,
            cache_read=self.input_price if self.cache_read_price is None else self.cache_read_price,
            cache_write_5m=write,
            cache_write_1h=write if self.cache_write_1h_price is None else self.cache_write_1h_price,
        )


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """One provider: wire format, base URL, aliases, models (PROV-1, PROV-2).

    ``local`` marks a server on the operator's machine (Ollama, llama.cpp, vLLM, LM Studio) whose
    models cost nothing, listed or not.
    """

    id: str
    format: str = "openai"
    base_url: str = ""
    name: str = ""
    aliases: tuple[str, ...] = ()
    models: tuple[ModelInfo, ...] = ()
    simulated: bool = False
    embeddings: bool = False
    local: bool = False

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
        return estimate_prompt_tokens(self.body)

    native: dict[str, Any] | None = None
    reservation: Any = None
    """The key budget's hold for this call (:class:`omniroute.accounting.budget.Reservation`), settled
    by the usage row (API-8)."""
    rate_limit_headers: dict[str, str] = field(default_factory=dict)
    """The ``x-ratelimit-*`` headers of the key's request/token windows after this call was counted,
    sent on its response (API-8); empty for a key without rate limits."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one response (OpenAI names), every count in tokens (OBS-1).

    ``prompt_tokens`` includes ``cached_tokens`` (cache reads) and ``cache_write_tokens`` (cache
    writes, of which ``cache_write_1h_tokens`` have the 1-hour lifetime); ``completion_tokens``
    includes ``reasoning_tokens``. In an OpenAI ``usage`` object the cache counts sit in
    ``prompt_tokens_details`` (``cached_tokens``, ``cache_write_tokens``, ``cache_write_1h_tokens``)
    and the reasoning count in ``completion_tokens_details.reasoning_tokens``.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        """Token-wise sum."""
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        details = {
            k: v
            for k, v in (
                ("cached_tokens", self.cached_tokens),
                ("cache_write_tokens", self.cache_write_tokens),
                ("cache_write_1h_tokens", self.cache_write_1h_tokens),
            )
            if v
        }
        if details:
            out["prompt_tokens_details"] = details
        if self.reasoning_tokens:
            out["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        return out

    @staticmethod
    def from_openai(data: dict[str, Any] | None) -> Usage | None:
        """Parse an OpenAI ``usage`` object (class docstring); ``None`` when absent."""
        if not data:
            return None
        details = data.get("prompt_tokens_details")
        details = details if isinstance(details, dict) else {}
        out_details = data.get("completion_tokens_details")
        out_details = out_details if isinstance(out_details, dict) else {}
        return Usage(
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
            cache_write_tokens=int(details.get("cache_write_tokens") or 0),
            cache_write_1h_tokens=int(details.get("cache_write_1h_tokens") or 0),
            reasoning_tokens=int(out_details.get("reasoning_tokens") or 0),
        )

    def cost_usd(self, model: ModelInfo) -> float:
        """Cost in USD from the model's prices (USD per 1M tokens) per token class (OBS-1).

        Uncached prompt tokens at the input price, cache reads at the cache-read price, cache writes
        at the 5-minute or 1-hour write price, completion tokens (reasoning included) at the output
        price, all from the long-context tier when the prompt exceeds its threshold. 0 when the
        model's price is unknown (the usage row then says ``price_unknown``).
        """
        p = model.token_prices(self.prompt_tokens)
        if p is None:
            return 0.0
        write_1h = min(self.cache_write_1h_tokens, self.cache_write_tokens)
        uncached = max(self.prompt_tokens - self.cached_tokens - self.cache_write_tokens, 0)
        micro = (
            uncached * p.input
            + self.cached_tokens * p.cache_read
            + (self.cache_write_tokens - write_1h) * p.cache_write_5m
            + write_1h * p.cache_write_1h
            + self.completion_tokens * p.output
        )
        return micro / 1_000_000
