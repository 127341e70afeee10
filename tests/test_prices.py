"""Prices from genai-prices and the cost of one request per token class (SPEC PROV-2, OBS-1).

Expected costs are hand-computed from the providers' list prices as genai-prices 0.2.3 records them
(USD per 1M tokens): a library upgrade that changes a price fails here on purpose.
"""

from __future__ import annotations

import logging
from pathlib import Path

import genai_prices
import pytest
from typer.testing import CliRunner

from omniroute.bootstrap import build_catalog
from omniroute.cli.main import app as cli_app
from omniroute.config import ConfigError, config_from_dict, load_config
from omniroute.providers.catalog import Catalog, ModelOverride, ProviderOverride
from omniroute.providers.prices import with_library_prices
from omniroute.routing.registry import Registry
from omniroute.values import ModelInfo, Usage
from omniroute.wire.anthropic.upstream import usage_from_anthropic
from omniroute.wire.gemini.upstream import usage_from_gemini

PINNED = "0.2.3"
SOURCE = f"genai-prices {PINNED}"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return with_library_prices(Catalog.builtin())


def model(catalog: Catalog, provider: str, model_id: str) -> ModelInfo:
    found = catalog.model(provider, model_id)
    assert found is not None
    return found


def test_the_pinned_library_version_is_installed() -> None:
    """The hand-computed prices below are those of the pinned library version."""
    assert genai_prices.__version__ == PINNED


@pytest.mark.parametrize(
    ("provider", "model_id", "prices"),
    [
        # provider, model, (input, cache read, cache write 5m, cache write 1h, output) per 1M tokens
        ("openai", "gpt-5", (1.25, 0.125, 1.25, 1.25, 10.0)),
        ("openai", "gpt-4.1-mini", (0.4, 0.1, 0.4, 0.4, 1.6)),
        ("anthropic", "claude-sonnet-4-5", (3.0, 0.3, 3.75, 6.0, 15.0)),
        ("anthropic", "claude-opus-4-5", (5.0, 0.5, 6.25, 10.0, 25.0)),
        ("anthropic", "claude-haiku-4-5", (1.0, 0.1, 1.25, 2.0, 5.0)),
        ("gemini", "gemini-2.5-pro", (1.25, 0.125, 1.25, 1.25, 10.0)),
        ("gemini", "gemini-2.5-flash", (0.3, 0.03, 0.3, 0.3, 2.5)),
    ],
)
def test_each_token_class_costs_its_list_price(
    catalog: Catalog, provider: str, model_id: str, prices: tuple[float, ...]
) -> None:
    """OBS-1: each token class costs its list price (100k tokens, below any long-context tier)."""
    m = model(catalog, provider, model_id)
    assert m.price_source == SOURCE
    n = 100_000
    usages = (
        Usage(prompt_tokens=n),
        Usage(prompt_tokens=n, cached_tokens=n),
        Usage(prompt_tokens=n, cache_write_tokens=n),
        Usage(prompt_tokens=n, cache_write_tokens=n, cache_write_1h_tokens=n),
        Usage(completion_tokens=n, reasoning_tokens=n // 2),
    )
    costs = tuple(u.cost_usd(m) * 1_000_000 / n for u in usages)
    assert costs == pytest.approx(prices, rel=1e-12)


def test_cache_reads_are_billed_at_the_cache_price_not_the_input_price(catalog: Catalog) -> None:
    """OBS-1 regression: 100k cache-read tokens and 12 output tokens on Claude Sonnet 4.5 cost
    $0.03018 (0.1M × $0.30 + 12 × $15/1M), not $0.30018."""
    m = model(catalog, "anthropic", "claude-sonnet-4-5")
    cost = Usage(prompt_tokens=100_000, completion_tokens=12, cached_tokens=100_000).cost_usd(m)
    assert cost == pytest.approx(0.03018, abs=1e-12)


def test_long_context_prompts_pay_the_higher_tier_for_every_token(catalog: Catalog) -> None:
    """OBS-1: past 200k prompt tokens Gemini 2.5 Pro costs $2.50 in / $0.25 cached / $15 out and
    Claude Sonnet 4.5 $6 in / $0.60 cached / $7.50 5-min write / $22.50 out, for the whole request."""
    pro = model(catalog, "gemini", "gemini-2.5-pro")
    at_limit = Usage(prompt_tokens=200_000, completion_tokens=1_000)
    assert at_limit.cost_usd(pro) == pytest.approx((200_000 * 1.25 + 1_000 * 10) / 1e6)
    past = Usage(prompt_tokens=300_000, completion_tokens=1_000, cached_tokens=100_000, reasoning_tokens=400)
    assert past.cost_usd(pro) == pytest.approx((200_000 * 2.5 + 100_000 * 0.25 + 1_000 * 15) / 1e6)
    sonnet = model(catalog, "anthropic", "claude-sonnet-4-5")
    mixed = Usage(
        prompt_tokens=250_000, completion_tokens=2_000, cached_tokens=150_000, cache_write_tokens=50_000
    )
    expected = (50_000 * 6 + 150_000 * 0.6 + 50_000 * 7.5 + 2_000 * 22.5) / 1e6
    assert mixed.cost_usd(sonnet) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("provider", "lib_provider", "model_id"),
    [
        ("openai", "openai", "gpt-5"),
        ("openai", "openai", "o4-mini"),
        ("anthropic", "anthropic", "claude-sonnet-4-5"),
        ("anthropic", "anthropic", "claude-opus-4-1"),
        ("gemini", "google", "gemini-2.5-pro"),
        ("gemini", "google", "gemini-3-pro-preview"),
    ],
)
@pytest.mark.parametrize(
    "usage",
    [
        Usage(prompt_tokens=12_345, completion_tokens=678),
        Usage(prompt_tokens=90_000, completion_tokens=5_000, cached_tokens=80_000, reasoning_tokens=4_000),
        Usage(
            prompt_tokens=60_000,
            completion_tokens=10,
            cache_write_tokens=30_000,
            cache_write_1h_tokens=10_000,
        ),
        Usage(
            prompt_tokens=400_000, completion_tokens=3_000, cached_tokens=100_000, cache_write_tokens=50_000
        ),
    ],
)
def test_cost_equals_the_librarys_own_calculation(
    catalog: Catalog, provider: str, lib_provider: str, model_id: str, usage: Usage
) -> None:
    """OBS-1: our per-class cost is genai-prices' ``calc_price`` for the same usage (its
    ``input_tokens`` include cache reads and writes)."""
    lib_usage = genai_prices.Usage(
        input_tokens=usage.prompt_tokens,
        cache_read_tokens=usage.cached_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_write_1h_tokens=usage.cache_write_1h_tokens,
        output_tokens=usage.completion_tokens,
    )
    expected = genai_prices.calc_price(lib_usage, model_id, provider_id=lib_provider).total_price
    assert usage.cost_usd(model(catalog, provider, model_id)) == pytest.approx(float(expected), rel=1e-9)


def test_catalog_prices_stay_for_models_the_library_does_not_know(catalog: Catalog) -> None:
    """PROV-2: the catalog file prices what the library lacks; local providers are free."""
    embed = model(catalog, "openai", "text-embedding-3-small")
    assert (embed.input_price, embed.price_source) == (0.02, "catalog")
    llama = model(catalog, "ollama", "llama3.2")
    assert (llama.input_price, llama.output_price, llama.price_source) == (0.0, 0.0, "local")


def test_a_model_missing_from_the_catalog_is_free_on_a_local_provider_and_unknown_elsewhere(
    catalog: Catalog,
) -> None:
    """PROV-2: ``ollama/any-model`` costs 0; ``openai/gpt-99`` has no price (recorded at 0, flagged)."""
    registry = Registry.build(catalog, ())
    ollama, openai = catalog.provider("ollama"), catalog.provider("openai")
    assert ollama is not None and openai is not None
    local = registry.model_info(ollama, "my-finetune:latest")
    assert (local.price_known, local.price_source) == (True, "local")
    assert Usage(prompt_tokens=10_000, completion_tokens=10_000).cost_usd(local) == 0.0
    unknown = registry.model_info(openai, "gpt-99")
    assert (unknown.price_known, unknown.price_source) == (False, "unknown")
    assert Usage(prompt_tokens=10_000, completion_tokens=10_000).cost_usd(unknown) == 0.0


def test_config_prices_override_the_library(tmp_path: Path) -> None:
    """PROV-2: a config ``providers[].models[]`` price wins, cache tokens then at the input price."""
    config = config_from_dict(
        {
            "database_url": f"sqlite:///{tmp_path}/o.db",
            "providers": [
                {"id": "openai", "models": [{"id": "gpt-5", "input_price": 1.0, "output_price": 8.0}]}
            ],
        },
        env={},
    )
    m = model(build_catalog(config, (), None), "openai", "gpt-5")
    assert (m.input_price, m.output_price, m.price_source) == (1.0, 8.0, "config")
    assert Usage(prompt_tokens=1_000, cached_tokens=1_000, completion_tokens=1_000).cost_usd(m) == 0.009
    untouched = Catalog.builtin().with_overrides([ProviderOverride("openai", models=(ModelOverride("o3"),))])
    assert untouched.model("openai", "o3") == Catalog.builtin().model("openai", "o3")


def test_upstream_usage_objects_fill_every_token_class() -> None:
    """OBS-1: Anthropic cache reads/writes (5 min and 1 h) and Gemini cached/thought tokens reach the
    canonical usage; OpenAI names survive a round trip."""
    anthropic = Usage.from_openai(
        usage_from_anthropic(
            {
                "input_tokens": 100,
                "cache_read_input_tokens": 2_000,
                "cache_creation_input_tokens": 300,
                "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
                "output_tokens": 50,
            }
        )
    )
    assert anthropic == Usage(
        prompt_tokens=2_400,
        completion_tokens=50,
        cached_tokens=2_000,
        cache_write_tokens=300,
        cache_write_1h_tokens=200,
    )
    gemini = Usage.from_openai(
        usage_from_gemini(
            {
                "promptTokenCount": 1_000,
                "cachedContentTokenCount": 600,
                "candidatesTokenCount": 40,
                "thoughtsTokenCount": 60,
            }
        )
    )
    assert gemini == Usage(prompt_tokens=1_000, completion_tokens=100, cached_tokens=600, reasoning_tokens=60)
    assert Usage.from_openai(anthropic.to_openai()) == anthropic


def test_building_the_catalog_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """Pricing the catalog is silent: warnings about unknown prices come from requests only."""
    with caplog.at_level(logging.WARNING):
        with_library_prices(Catalog.builtin())
    assert caplog.records == []


def test_catalog_list_shows_where_each_price_comes_from(tmp_path: Path) -> None:
    """PROV-2: ``omniroute catalog list`` names the library version, the config, the catalog file
    or ``local`` for each model's price."""
    config = tmp_path / "config.yaml"
    config.write_text(
        f"database_url: sqlite:///{tmp_path}/o.db\n"
        "providers:\n  - id: openai\n    models:\n      - {id: o3, input_price: 1.5, output_price: 6}\n"
    )
    result = CliRunner().invoke(cli_app, ["catalog", "list", "--config", str(config)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    rows = {tuple(line.split("│")[1:4:2]): line for line in result.output.splitlines() if "│" in line}
    sources = {(p.strip(), m.strip()): line.split("│")[-2].strip() for (p, m), line in rows.items()}
    assert sources[("openai", "gpt-5")] == SOURCE
    assert sources[("openai", "o3")] == "config"
    assert sources[("openai", "text-embedding-3-small")] == "catalog"
    assert sources[("ollama", "llama3.2")] == "local"


def test_a_refreshed_catalog_is_served_when_the_config_names_it(tmp_path: Path) -> None:
    """PROV-2: ``catalog refresh FILE -o OUT`` writes a catalog the gateway serves via
    ``catalog_file``; models it adds keep the file's price unless the library knows them."""
    source = tmp_path / "models.dev.json"
    source.write_text(
        '{"openai": {"models": {"gpt-new": {"id": "gpt-new", "cost": {"input": 7, "output": 9},'
        ' "limit": {"context": 64000, "output": 8000}}}}}'
    )
    out = tmp_path / "refreshed.json"
    result = CliRunner().invoke(cli_app, ["catalog", "refresh", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    config = tmp_path / "config.yaml"
    config.write_text(f"database_url: sqlite:///{tmp_path}/o.db\ncatalog_file: refreshed.json\n")
    served = build_catalog(load_config(config, env={}), (), None)
    new = model(served, "openai", "gpt-new")
    assert (new.input_price, new.output_price, new.price_source) == (7.0, 9.0, "catalog")
    assert model(served, "openai", "gpt-5").price_source == SOURCE
    config.write_text(f"database_url: sqlite:///{tmp_path}/o.db\ncatalog_file: missing.json\n")
    with pytest.raises(ConfigError, match="catalog_file"):
        build_catalog(load_config(config, env={}), (), None)
