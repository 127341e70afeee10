"""The built-in provider catalog, overrides and models.dev refresh (SPEC PROV-2)."""

from __future__ import annotations

import importlib.resources
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from omniroute.bootstrap import build_catalog
from omniroute.config import Config
from omniroute.providers.catalog import (
    CAPABILITIES,
    TIERS,
    Catalog,
    ModelOverride,
    ProviderOverride,
)
from omniroute.values import ModelInfo, ProviderInfo
from omniroute.wire import upstream_formats

NAMED_PROVIDERS = (
    "openai",
    "anthropic",
    "gemini",
    "groq",
    "mistral",
    "deepseek",
    "xai",
    "together",
    "fireworks",
    "openrouter",
    "cerebras",
    "perplexity",
    "cohere",
    "ollama",
    "vllm",
    "llamacpp",
    "lmstudio",
    "nvidia",
    "huggingface",
    "moonshot",
    "zai",
    "qwen",
    "minimax",
)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.builtin()


def _all_models(catalog: Catalog) -> list[tuple[ProviderInfo, ModelInfo]]:
    return [(p, m) for p in catalog.providers for m in p.models]


# -- the shipped data -------------------------------------------------------------------------------


def test_builtin_catalog_has_at_least_20_providers_including_the_named_ones(catalog: Catalog) -> None:
    """PROV-2: at least 20 providers ship in the package data file."""
    ids = [p.id for p in catalog.providers]
    assert len(ids) >= 20
    assert len(ids) == len(set(ids))
    assert set(NAMED_PROVIDERS) <= set(ids)
    assert ids[:3] == ["openai", "anthropic", "gemini"]  # file order is kept


def test_builtin_openai_lists_its_main_models(catalog: Catalog) -> None:
    """PROV-2: OpenAI's main current models are in the catalog."""
    openai = catalog.provider("openai")
    assert openai is not None
    for model_id in (
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "gpt-4.1-mini",
        "o3",
        "o4-mini",
        "gpt-5",
        "gpt-5-mini",
        "text-embedding-3-small",
    ):
        assert openai.model(model_id) is not None, model_id


def test_every_builtin_model_has_sane_prices_limits_tier_and_capabilities(catalog: Catalog) -> None:
    """PROV-2: prices USD per 1M tokens ≥ 0, context > 0, max output ≤ context, valid tier/caps."""
    unknown_price = []
    for p, m in _all_models(catalog):
        where = f"{p.id}/{m.id}"
        if m.input_price is None or m.output_price is None:
            unknown_price.append(where)
        else:
            assert m.input_price >= 0 and m.output_price >= 0, where
        assert m.context_window > 0, where
        assert 0 <= m.max_output_tokens <= m.context_window, where
        if "embeddings" not in m.capabilities:
            assert m.max_output_tokens > 0, where
        assert m.tier in TIERS, where
        assert m.capabilities <= set(CAPABILITIES), where
        assert m.name, where
    # The only model without a list price is OpenRouter's router, billed per routed model.
    assert unknown_price == ["openrouter/openrouter/auto"]


def test_local_providers_are_free_and_listen_on_loopback(catalog: Catalog) -> None:
    """PROV-2: ollama, vLLM, llama.cpp and LM Studio are local, free (price 0, tier free)."""
    expected = {
        "ollama": "http://127.0.0.1:11434/v1",
        "vllm": "http://127.0.0.1:8000/v1",
        "llamacpp": "http://127.0.0.1:8080/v1",
        "lmstudio": "http://127.0.0.1:1234/v1",
    }
    for pid, url in expected.items():
        p = catalog.provider(pid)
        assert p is not None and p.base_url == url and p.format == "openai"
        assert p.models
        for m in p.models:
            assert (m.input_price, m.output_price, m.tier) == (0.0, 0.0, "free"), m.id


def test_every_provider_has_a_valid_format_base_url_and_a_chat_model_first(catalog: Catalog) -> None:
    """PROV-1/PROV-2: the first model is the provider default (AUTO-2), so it is never embeddings-only."""
    for p in catalog.providers:
        assert p.format in upstream_formats(), p.id
        assert p.base_url.startswith(("https://", "http://127.0.0.1:")), p.id
        assert not p.base_url.endswith("/"), p.id
        assert p.name, p.id
        assert p.models, p.id
        assert "embeddings" not in p.models[0].capabilities, p.id
        assert p.embeddings == any("embeddings" in m.capabilities for m in p.models), p.id


def test_wire_formats_and_base_urls_of_key_providers(catalog: Catalog) -> None:
    """PROV-1/PROV-2: Anthropic and Gemini speak their own formats; base_url includes the version path."""
    anthropic = catalog.provider("anthropic")
    gemini = catalog.provider("gemini")
    cohere = catalog.provider("cohere")
    assert anthropic is not None and anthropic.format == "anthropic"
    assert gemini is not None and gemini.format == "gemini"
    assert gemini.base_url == "https://generativelanguage.googleapis.com/v1beta"
    assert cohere is not None and cohere.base_url == "https://api.cohere.ai/compatibility/v1"
    assert anthropic.model("claude-sonnet-4-5") is not None
    assert anthropic.model("claude-3-5-haiku-latest") is not None


def test_prices_and_limits_the_routing_tests_rely_on(catalog: Catalog) -> None:
    """PROV-2 data behind COMBO-3 cost-optimized: gemini-2.5-pro $2.00/M in, gpt-4o-mini $0.15/M in."""
    mini = catalog.model("openai", "gpt-4o-mini")
    assert mini is not None
    assert (mini.input_price, mini.output_price) == (0.15, 0.60)
    assert (mini.context_window, mini.max_output_tokens) == (128000, 16384)
    pro = catalog.model("gemini", "gemini-2.5-pro")
    assert pro is not None and (pro.input_price, pro.output_price) == (2.00, 12.00)
    flash = catalog.model("gemini", "gemini-2.5-flash")
    assert flash is not None and flash.context_window == 1_048_576


def test_aliases_are_unique_and_never_another_providers_id(catalog: Catalog) -> None:
    """PROV-2: ids and aliases share one case-insensitive namespace."""
    keys = [k.lower() for p in catalog.providers for k in (p.id, *p.aliases)]
    assert len(keys) == len(set(keys))


# -- lookups ----------------------------------------------------------------------------------------


def test_provider_lookup_by_id_or_alias_is_case_insensitive(catalog: Catalog) -> None:
    """PROV-2 / SPEC §4 step 5: ``provider/model`` accepts the provider id or an alias in any case."""
    openai = catalog.provider("openai")
    assert openai is not None
    assert catalog.provider("OpenAI") is openai
    assert catalog.provider("OAI") is openai
    assert catalog.provider("Claude") is catalog.provider("anthropic")
    assert catalog.provider("google") is catalog.provider("gemini")
    assert catalog.provider("ds") is catalog.provider("deepseek")
    assert catalog.provider("grok") is catalog.provider("xai")
    assert catalog.provider("kimi") is catalog.provider("moonshot")
    assert catalog.provider("glm") is catalog.provider("zai")
    assert catalog.provider("nope") is None


def test_model_lookup_accepts_an_alias_and_any_case(catalog: Catalog) -> None:
    """PROV-2: ``catalog.model(provider, model)`` resolves the provider alias and the model id's case."""
    m = catalog.model("OAI", "GPT-4o")
    assert m is not None and m.id == "gpt-4o"
    assert catalog.model("openai", "no-such-model") is None
    assert catalog.model("no-such-provider", "gpt-4o") is None


def test_providers_serving_a_bare_model_id(catalog: Catalog) -> None:
    """SPEC §4 step 6: a bare catalog model id maps to the providers that list it (case-insensitive)."""
    assert catalog.provider("openai") in catalog.providers_serving("gpt-4o")
    assert catalog.provider("openai") in catalog.providers_serving("GPT-4O")
    serving = [p.id for p in catalog.providers_serving("gpt-oss-120b")]
    assert serving == ["cerebras", "sambanova"]  # catalog order; OpenRouter's "openai/…" ids don't match
    assert catalog.providers_serving("no-such-model") == ()


def test_catalog_is_immutable(catalog: Catalog) -> None:
    """PROV-2: a Catalog never changes after construction; derived catalogs are new objects."""
    with pytest.raises(AttributeError):
        catalog._providers = ()
    with pytest.raises(AttributeError):
        catalog.extra = 1
    assert isinstance(catalog.providers, tuple)


def test_constructor_rejects_an_alias_that_is_another_providers_id() -> None:
    """PROV-2: ids and aliases are one namespace; a clash names both providers."""
    a = ProviderInfo(id="a", base_url="http://127.0.0.1:1/v1", aliases=("b",))
    b = ProviderInfo(id="b", base_url="http://127.0.0.1:2/v1")
    with pytest.raises(ValueError, match=r"provider 'b'.*alias of 'a'"):
        Catalog([a, b])


# -- overrides --------------------------------------------------------------------------------------


def test_override_changes_only_the_given_fields_of_a_catalog_model(catalog: Catalog) -> None:
    """PROV-2: operators override any model field in config; ``None`` keeps the catalog value."""
    custom = catalog.with_overrides(
        [
            ProviderOverride(
                id="OpenAI", models=(ModelOverride(id="GPT-4o", input_price=1.0, tier="standard"),)
            )
        ]
    )
    before = catalog.model("openai", "gpt-4o")
    after = custom.model("openai", "gpt-4o")
    assert before is not None and after is not None
    assert after.id == "gpt-4o"
    assert (after.input_price, after.tier) == (1.0, "standard")
    assert after.output_price == before.output_price
    assert after.context_window == before.context_window
    assert after.capabilities == before.capabilities
    assert before.input_price == 2.5  # the original catalog is untouched
    assert [p.id for p in custom.providers] == [p.id for p in catalog.providers]


def test_override_adds_a_model_to_a_catalog_provider(catalog: Catalog) -> None:
    """PROV-2: a model override with an unknown id is appended to the provider's models."""
    custom = catalog.with_overrides(
        [
            ProviderOverride(
                id="anthropic",
                models=(
                    ModelOverride(
                        id="claude-next",
                        input_price=0.0,
                        output_price=0.0,
                        context_window=100_000,
                        max_output_tokens=8_000,
                        capabilities=("tools",),
                    ),
                ),
            )
        ]
    )
    added = custom.model("claude", "claude-next")
    assert added == ModelInfo(
        id="claude-next",
        input_price=0.0,
        output_price=0.0,
        context_window=100_000,
        max_output_tokens=8_000,
        capabilities=frozenset({"tools"}),
        tier="free",
        name="claude-next",
        price_source="config",
    )
    anthropic = custom.provider("anthropic")
    assert anthropic is not None and anthropic.models[-1] is added
    assert custom.provider("anthropic") in custom.providers_serving("claude-next")


def test_override_replaces_provider_fields_and_adds_aliases(catalog: Catalog) -> None:
    """PROV-2: config replaces format/base_url/name of a catalog provider and adds aliases."""
    custom = catalog.with_overrides(
        [ProviderOverride(id="groq", base_url="http://127.0.0.1:9000/v1", aliases=("fastest",))]
    )
    groq = custom.provider("fastest")
    assert groq is not None and groq.id == "groq"
    assert groq.base_url == "http://127.0.0.1:9000/v1"
    assert groq.name == "Groq" and groq.format == "openai"
    assert custom.provider("gq") is groq  # config aliases are added to the built-in ones
    assert groq.aliases == ("gq", "fastest")


def test_override_with_unknown_id_adds_a_custom_openai_compatible_provider(catalog: Catalog) -> None:
    """PROV-2: operators add custom OpenAI-/Anthropic-compatible providers in config."""
    custom = catalog.with_overrides(
        [
            ProviderOverride(
                id="local-a",
                base_url="http://127.0.0.1:9001/v1",
                aliases=("la",),
                models=(ModelOverride(id="model-a", input_price=0.15, output_price=0.60),),
            ),
            ProviderOverride(id="corp-claude", format="anthropic", base_url="http://127.0.0.1:9002/v1"),
        ]
    )
    local = custom.provider("LA")
    assert local is not None
    assert (local.id, local.format, local.name) == ("local-a", "openai", "local-a")
    assert custom.providers[-2:] == (local, custom.provider("corp-claude"))
    model = custom.model("local-a", "model-a")
    assert model is not None and model.tier == "standard" and model.blended_price == pytest.approx(0.33)
    corp = custom.provider("corp-claude")
    assert corp is not None and corp.format == "anthropic" and corp.models == ()


def test_custom_provider_without_base_url_is_rejected_by_name(catalog: Catalog) -> None:
    """PROV-2: a custom provider needs a base_url; the error names the provider."""
    with pytest.raises(ValueError, match=r"'my-llm'.*base_url"):
        catalog.with_overrides([ProviderOverride(id="my-llm")])


def test_custom_provider_may_not_take_a_builtin_alias(catalog: Catalog) -> None:
    """PROV-2: built-in ids and aliases are reserved prefixes."""
    with pytest.raises(ValueError, match=r"'claude'.*'anthropic'"):
        catalog.with_overrides([ProviderOverride(id="claude", base_url="http://127.0.0.1:9/v1")])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (ModelOverride(id="gpt-4o", tier="gold"), "tier 'gold'"),
        (ModelOverride(id="gpt-4o", capabilities=("telepathy",)), "telepathy"),
        (ModelOverride(id="gpt-4o", input_price=-1.0), "input_price"),
        (ModelOverride(id="gpt-4o", max_output_tokens=1_000_000), "exceeds context_window"),
    ],
)
def test_override_with_an_invalid_value_is_rejected(
    catalog: Catalog, override: ModelOverride, message: str
) -> None:
    """PROV-2: overridden values are validated like the shipped data; errors name provider and model."""
    with pytest.raises(ValueError, match=message) as info:
        catalog.with_overrides([ProviderOverride(id="openai", models=(override,))])
    assert "'openai'" in str(info.value) and "'gpt-4o'" in str(info.value)


def test_override_with_an_unknown_format_is_rejected() -> None:
    """PROV-1/PROV-2: only the registry's upstream wire formats exist (checked where the catalog is
    built from the stored and configured providers)."""
    with pytest.raises(ValueError, match="format 'grpc'"):
        build_catalog(Config(), [{"id": "x1", "format": "grpc", "base_url": "http://127.0.0.1:9/v1"}], None)


# -- models.dev refresh -----------------------------------------------------------------------------


def _write(path: Path, data: Any) -> Path:
    path.write_bytes(orjson.dumps(data))
    return path


def test_models_dev_refresh_updates_known_models_and_adds_new_ones(catalog: Catalog, tmp_path: Path) -> None:
    """PROV-2: ``omniroute catalog refresh FILE`` updates prices/limits/capabilities from models.dev."""
    source = _write(
        tmp_path / "models.dev.json",
        {
            "openai": {
                "id": "openai",
                "name": "OpenAI",
                "api": "https://elsewhere.example/v1",
                "models": {
                    "gpt-4o": {
                        "id": "gpt-4o",
                        "name": "GPT-4o (models.dev)",
                        "cost": {"input": 2.0, "output": 8.0, "cache_read": 1.0},
                        "limit": {"context": 200000, "output": 32000},
                        "tool_call": True,
                        "reasoning": True,
                        "modalities": {"input": ["text"], "output": ["text"]},
                    },
                    "gpt-9": {
                        "id": "gpt-9",
                        "name": "GPT-9",
                        "cost": {"input": 5, "output": 20},
                        "limit": {"context": 1000000, "output": 100000},
                        "tool_call": True,
                        "reasoning": False,
                        "modalities": {"input": ["text", "image"], "output": ["text"]},
                    },
                },
            },
            "google": {
                "id": "google",
                "models": {
                    "gemini-2.5-flash": {"id": "gemini-2.5-flash", "cost": {"input": 0.35, "output": 3.0}}
                },
            },
            "some-unknown-provider": {"id": "x", "models": {"m": {"id": "m", "cost": {"input": 1}}}},
        },
    )
    fresh = catalog.refreshed_from_models_dev(source)

    gpt4o = fresh.model("openai", "gpt-4o")
    assert gpt4o is not None
    assert (gpt4o.input_price, gpt4o.output_price) == (2.0, 8.0)
    assert (gpt4o.context_window, gpt4o.max_output_tokens) == (200000, 32000)
    assert gpt4o.capabilities == {"tools", "reasoning", "structured_output"}  # vision cleared, S/O kept
    assert (gpt4o.name, gpt4o.tier) == ("GPT-4o", "premium")  # our name and tier are kept

    gpt9 = fresh.model("openai", "gpt-9")
    assert gpt9 == ModelInfo(
        id="gpt-9",
        input_price=5.0,
        output_price=20.0,
        context_window=1000000,
        max_output_tokens=100000,
        capabilities=frozenset({"tools", "vision"}),
        tier="premium",
        name="GPT-9",
    )

    flash = fresh.model("gemini", "gemini-2.5-flash")
    before = catalog.model("gemini", "gemini-2.5-flash")
    assert flash is not None and before is not None
    assert (flash.input_price, flash.output_price) == (0.35, 3.0)
    assert flash.context_window == before.context_window  # no limit in the file → kept
    assert flash.capabilities == before.capabilities

    openai = fresh.provider("openai")
    assert openai is not None and openai.base_url == "https://api.openai.com/v1"
    assert [p.id for p in fresh.providers] == [p.id for p in catalog.providers]
    assert fresh.providers_serving("m") == ()


def test_models_dev_refresh_rejects_a_file_that_is_not_an_object(catalog: Catalog, tmp_path: Path) -> None:
    """PROV-2: the refresh input must be a models.dev-style object keyed by provider id."""
    with pytest.raises(ValueError, match="keyed by provider id"):
        catalog.refreshed_from_models_dev(_write(tmp_path / "bad.json", [1, 2]))


def test_refreshed_catalog_round_trips_through_write_json(catalog: Catalog, tmp_path: Path) -> None:
    """PROV-2: ``write_json`` saves our format; ``Catalog.load`` reads the same catalog back."""
    target = tmp_path / "catalog.json"
    catalog.write_json(target)
    loaded = Catalog.load(target)
    assert loaded.providers == catalog.providers
    assert orjson.loads(target.read_bytes())["version"] == 1
    assert not (tmp_path / "catalog.json.tmp").exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"version": 2, "providers": []}, "unsupported version"),
        ({"version": 1, "providers": [{"id": "a", "models": []}]}, r"'a'.*base_url is required"),
        (
            {"version": 1, "providers": [{"id": "a", "base_url": "http://h/v1", "models": [{"id": 3}]}]},
            "'id' must be a string",
        ),
        (
            {
                "version": 1,
                "providers": [
                    {"id": "a", "base_url": "http://h/v1", "models": [{"id": "m", "context_window": "big"}]}
                ],
            },
            "context_window",
        ),
    ],
)
def test_catalog_file_with_bad_data_is_rejected(data: dict[str, Any], message: str) -> None:
    """PROV-2: a malformed catalog file fails loudly with the offending field."""
    with pytest.raises(ValueError, match=message):
        Catalog.from_dict(data)


# -- no I/O at import -------------------------------------------------------------------------------


def test_importing_the_catalog_module_reads_no_file() -> None:
    """DESIGN house style 8 / PROV-2: the data file is read by ``Catalog.builtin()``, not at import."""
    script = textwrap.dedent(
        """
        import builtins, importlib.resources, io, pathlib, sys

        def refuse(*args, **kwargs):
            raise AssertionError("file read at import time")

        importlib.resources.files = refuse
        builtins.open = io.open = refuse
        pathlib.Path.open = pathlib.Path.read_bytes = pathlib.Path.read_text = refuse
        import omniroute.providers.catalog as catalog
        assert "omniroute.providers.catalog" in sys.modules
        try:
            catalog.Catalog.builtin()
        except AssertionError:
            print("deferred")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "deferred"


def test_builtin_reads_the_packaged_file_through_importlib_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    """PROV-2: the JSON ships inside the package and is found via importlib.resources."""
    resource = importlib.resources.files("omniroute.providers").joinpath("catalog.json")
    assert resource.is_file()

    def refuse(package: str) -> Any:
        raise RuntimeError(f"resources of {package} requested")

    monkeypatch.setattr(importlib.resources, "files", refuse)
    with pytest.raises(RuntimeError, match=r"omniroute\.providers"):
        Catalog.builtin()


def _caps(cat: Catalog, provider: str, model: str) -> frozenset[str] | None:
    m = cat.model(provider, model)
    assert m is not None, model
    return m.capabilities


def test_declared_empty_capabilities_stay_apart_from_missing_ones(catalog: Catalog) -> None:
    """RESIL-8: ``capabilities: []`` is "none" and a missing key "unknown", through catalog files,
    overrides (new and existing models) and a round trip of the catalog JSON."""
    data = {
        "version": 1,
        "providers": [
            {
                "id": "local",
                "base_url": "http://127.0.0.1:9/v1",
                "models": [{"id": "none", "capabilities": []}, {"id": "unknown"}],
            }
        ],
    }
    parsed = Catalog.from_dict(data)
    assert _caps(parsed, "local", "none") == frozenset()
    assert _caps(parsed, "local", "unknown") is None
    again = Catalog.from_dict(orjson.loads(orjson.dumps(parsed.to_dict())))
    assert _caps(again, "local", "none") == frozenset()
    assert _caps(again, "local", "unknown") is None
    custom = catalog.with_overrides(
        [
            ProviderOverride(
                id="openai",
                models=(
                    ModelOverride(id="gpt-4o", capabilities=()),
                    ModelOverride(id="new-none", capabilities=()),
                    ModelOverride(id="new-unknown"),
                ),
            )
        ]
    )
    assert _caps(custom, "openai", "gpt-4o") == frozenset()
    assert _caps(custom, "openai", "new-none") == frozenset()
    assert _caps(custom, "openai", "new-unknown") is None
