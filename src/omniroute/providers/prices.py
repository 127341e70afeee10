"""Model prices from the ``genai-prices`` library (SPEC PROV-2, OBS-1).

``genai-prices`` (PyPI, maintained by the Pydantic team) is the price source: list prices per token
class (input, cache read, cache write 5 min / 1 h, output) with long-context tiers, and context
windows. It ships its data inside the package, so prices are refreshed by upgrading the library (the
version pinned in ``pyproject.toml``); nothing is downloaded at run time.

:func:`with_library_prices` fills a :class:`~omniroute.providers.catalog.Catalog` from it: a model
the library knows gets the library's prices (``price_source`` ``genai-prices <version>``) and its
context window when the library has one; any other model keeps the catalog file's prices
(``catalog``) or has none (``unknown``, priced at 0 and flagged in the usage row). Models of a local
provider (``"local": true`` in the catalog: Ollama, llama.cpp, vLLM, LM Studio) are free (``local``).
Config ``providers[].models[]`` prices are applied afterwards and win (``config``).
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import genai_prices
from genai_prices.types import TieredPrices

from omniroute.providers.catalog import Catalog
from omniroute.values import ModelInfo, ProviderInfo, TokenPrices

__all__ = ["LIBRARY_PROVIDERS", "library_source", "with_library_prices"]

LIBRARY_PROVIDERS: dict[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "google",
    "groq": "groq",
    "mistral": "mistral",
    "deepseek": "deepseek",
    "xai": "x-ai",
    "together": "together",
    "fireworks": "fireworks",
    "openrouter": "openrouter",
    "cerebras": "cerebras",
    "perplexity": "perplexity",
    "cohere": "cohere",
    "moonshot": "moonshotai",
    "zai": "zai",
    "minimax": "minimax",
    "novita": "novita",
}
"""Our catalog provider id → the genai-prices provider id whose prices it charges. Providers not
listed here (NVIDIA, Hugging Face router, Qwen, SambaNova, DeepInfra, local servers) keep the catalog
file's prices: the library either lacks them or prices a different route."""

_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok", "cache_write_1h_mtok")


def library_source() -> str:
    """The ``price_source`` of a library price: ``genai-prices <installed version>``."""
    return f"genai-prices {genai_prices.__version__}"


def with_library_prices(catalog: Catalog) -> Catalog:
    """``catalog`` with prices (and context windows) from genai-prices (module docstring).

    Never raises for a model the library does not know; the model keeps its catalog price.
    """
    source = library_source()
    return Catalog(_provider(p, source) for p in catalog)


def _provider(p: ProviderInfo, source: str) -> ProviderInfo:
    if p.local:
        return replace(p, models=tuple(_free(m) for m in p.models))
    lib_id = LIBRARY_PROVIDERS.get(p.id)
    if lib_id is None:
        return p
    return replace(p, models=tuple(_priced(m, lib_id, source) for m in p.models))


def _free(m: ModelInfo) -> ModelInfo:
    return replace(m, input_price=0.0, output_price=0.0, price_source="local")


def _priced(m: ModelInfo, lib_id: str, source: str) -> ModelInfo:
    try:
        calc = genai_prices.calc_price(genai_prices.Usage(), m.id, provider_id=lib_id)
    except LookupError:
        return m
    prices = calc.model_price
    base = {k: _base(getattr(prices, k)) for k in _KEYS}
    if base["input_mtok"] is None or base["output_mtok"] is None:
        return m
    tiered = {k: v for k in _KEYS if isinstance(v := getattr(prices, k), TieredPrices) and v.tiers}
    out = replace(
        m,
        input_price=base["input_mtok"],
        output_price=base["output_mtok"],
        cache_read_price=base["cache_read_mtok"],
        cache_write_price=base["cache_write_mtok"],
        cache_write_1h_price=base["cache_write_1h_mtok"],
        long_context_threshold=0,
        long_context=None,
        price_source=source,
    )
    context = calc.model.context_window
    if context and (not m.max_output_tokens or m.max_output_tokens <= context):
        out = replace(out, context_window=context)
    if tiered:
        # Every tiered model of the library has one threshold shared by its keys; the first tier
        # is the long-context price.
        start = min(t.tiers[0].start for t in tiered.values())
        high = {k: float(tiered[k].tiers[0].price) if k in tiered else v for k, v in base.items()}
        out = replace(out, long_context_threshold=start, long_context=_token_prices(high))
    return out


def _base(price: Any) -> float | None:
    if isinstance(price, TieredPrices):
        return float(price.base)
    if isinstance(price, Decimal):
        return float(price)
    return None


def _token_prices(prices: dict[str, float | None]) -> TokenPrices:
    """Library prices by price key → one tier; a missing cache price is the input (5-minute write)
    price, as for :meth:`ModelInfo.token_prices`."""
    inp, out = prices["input_mtok"] or 0.0, prices["output_mtok"] or 0.0
    read, write, write_1h = (prices[k] for k in _KEYS[2:])
    write = inp if write is None else write
    return TokenPrices(
        input=inp,
        output=out,
        cache_read=inp if read is None else read,
        cache_write_5m=write,
        cache_write_1h=write if write_1h is None else write_1h,
    )
