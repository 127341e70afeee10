"""Tests for ``omniroute.config``: the OPS-2 config contract, defaults, ${ENV} resolution (OPS-2),
STORE-2 URL overrides, key-path error messages and immutability (DESIGN house style 11)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType

import pytest

from omniroute.config import (
    DEFAULT_DATABASE_URL,
    DEFAULT_PORT,
    ChainEntryConfig,
    Config,
    ConfigError,
    ConnectionConfig,
    ModelAliasConfig,
    config_from_dict,
    load_config,
)
from omniroute.core.combo import ROUTING_STRATEGY_VALUES, ComboTarget, canonical_strategy, thaw

# SPEC OPS-2, verbatim: tests outside the project write files like this one.
OPS2_EXAMPLE = """\
server: {host: 127.0.0.1, port: 20128, require_api_key: false, admin_key: "${OMNIROUTE_ADMIN_KEY}",
         max_body_mb: 10}
database_url: "sqlite:///./data/omniroute.db"      # or postgresql://...
redis_url: null                                    # redis://127.0.0.1:6379/0 -> shared routing state
api_keys:
  - {name: dev, key: "${DEV_KEY}", allowed_models: ["*"], budget_usd: null}
providers:                                         # custom providers, or overrides of catalog ones
  - id: local-a
    format: openai                                 # openai | anthropic | gemini
    base_url: http://127.0.0.1:9001/v1
    models:
      - {id: model-a, input_price: 0.15, output_price: 0.60, context_window: 128000,
         max_output_tokens: 16384, capabilities: [tools, vision, reasoning], tier: standard}
connections:
  - {id: a1, provider: local-a, api_key: "sk-a1", priority: 1, default_model: model-a,
     account_tier: pro, tags: [team-x], max_concurrent: null}
combos:
  - name: my-combo
    strategy: priority                             # any of the 19 (COMBO-3)
    targets:
      - {model: local-a/model-a}
      - {model: local-b/model-b, connection_id: b1, weight: 30}
      - {combo_ref: other-combo}
    config: {maxRetries: 0, stickyRoundRobinLimit: 3}
model_combo_mappings:
  - {pattern: "gpt-4*", combo: my-combo, priority: 10, enabled: true}
fallback_chains:
  gpt-4o: [{provider: openai, priority: 0}, {provider: anthropic, priority: 1, enabled: false}]
resilience:
  circuit_breaker: {failure_threshold: 5, reset_timeout_s: 10, max_reset_timeout_s: 10, half_open_probes: 1}
  cooldown: {base_s: 3, max_s: 300, max_hint_s: 1800, server_error_max_s: 10}
  lockout: {base_s: 120, max_s: 1800}
  retries: {per_target: 1, max_attempts: 10}
  timeouts: {connect_s: 10, ttft_s: 60, idle_s: 60, total_s: 600}
auto: {exploration_rate: 0.05, default_variant: null, lkgp_scope: session}
"""

ENV = {"OMNIROUTE_ADMIN_KEY": "admin-secret", "DEV_KEY": "dev-secret"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "omniroute.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(data: object, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, env={} if env is None else env)  # type: ignore[arg-type]
    return str(info.value)


# --- the OPS-2 contract ------------------------------------------------------------------------------


def test_ops2_example_loads_with_every_value(tmp_path: Path) -> None:
    """OPS-2: the spec's example file loads verbatim and every key lands where it says."""
    cfg = load_config(write(tmp_path, OPS2_EXAMPLE), env=ENV)

    assert cfg.source_path == tmp_path / "omniroute.yaml"
    assert not cfg.is_default
    s = cfg.server
    assert (s.host, s.port, s.require_api_key, s.admin_key, s.max_body_mb) == (
        "127.0.0.1",
        20128,
        False,
        "admin-secret",
        10,
    )
    assert cfg.database_url == "sqlite:///./data/omniroute.db"
    assert cfg.redis_url is None

    (key,) = cfg.api_keys
    assert (key.name, key.key, key.allowed_models, key.budget_usd) == ("dev", "dev-secret", ("*",), None)

    (prov,) = cfg.providers
    assert (prov.id, prov.format, prov.base_url, prov.name, prov.aliases) == (
        "local-a",
        "openai",
        "http://127.0.0.1:9001/v1",
        None,
        (),
    )
    (model,) = prov.models
    assert model.id == "model-a"
    assert model.input_price == 0.15
    assert model.output_price == 0.60
    assert model.context_window == 128000
    assert model.max_output_tokens == 16384
    assert model.capabilities == frozenset({"tools", "vision", "reasoning"})
    assert model.tier == "standard"

    (conn,) = cfg.connections
    assert conn == ConnectionConfig(
        id="a1",
        provider="local-a",
        api_key="sk-a1",
        priority=1,
        default_model="model-a",
        account_tier="pro",
        tags=("team-x",),
        max_concurrent=None,
    )
    assert (conn.auth_type, conn.is_active, conn.name, conn.expires_at) == ("api_key", True, None, None)

    (combo,) = cfg.combos
    assert combo.name == "my-combo"
    assert combo.strategy == "priority"
    assert combo.enabled is True
    assert combo.description is None
    assert combo.targets == (
        ComboTarget(model="local-a/model-a"),
        ComboTarget(model="local-b/model-b", connection_id="b1", weight=30),
        ComboTarget(combo_ref="other-combo"),
    )
    assert [t.is_ref for t in combo.targets] == [False, False, True]
    assert dict(combo.config) == {"maxRetries": 0, "stickyRoundRobinLimit": 3}

    (mapping,) = cfg.model_combo_mappings
    assert (mapping.pattern, mapping.combo, mapping.priority, mapping.enabled, mapping.description) == (
        "gpt-4*",
        "my-combo",
        10,
        True,
        None,
    )

    assert dict(cfg.fallback_chains) == {
        "gpt-4o": (
            ChainEntryConfig(provider="openai", priority=0, enabled=True),
            ChainEntryConfig(provider="anthropic", priority=1, enabled=False),
        )
    }

    r = cfg.resilience
    assert (r.circuit_breaker.failure_threshold, r.circuit_breaker.reset_timeout_s) == (5, 10)
    assert r.circuit_breaker.max_reset_timeout_s == 10 and r.cooldown.server_error_max_s == 10
    assert r.circuit_breaker.half_open_probes == 1
    assert (r.cooldown.base_s, r.cooldown.max_s, r.cooldown.max_hint_s) == (3, 300, 1800)
    assert (r.lockout.base_s, r.lockout.max_s) == (120, 1800)
    assert (r.retries.per_target, r.retries.max_attempts) == (1, 10)
    assert r.retries.max_hint_wait_s == 3
    t = r.timeouts
    assert (t.connect_s, t.ttft_s, t.idle_s, t.total_s) == (10, 60, 60, 600)

    assert (cfg.auto.exploration_rate, cfg.auto.default_variant, cfg.auto.lkgp_scope) == (
        0.05,
        None,
        "session",
    )


def test_ops2_example_values_equal_the_builtin_defaults(tmp_path: Path) -> None:
    """OPS-2: the example spells out the defaults, so its scalar sections equal a file-less config."""
    cfg = load_config(write(tmp_path, OPS2_EXAMPLE), env=ENV)
    default = load_config(None, env={})
    assert cfg.resilience == default.resilience
    assert cfg.auto == default.auto
    assert dataclasses.replace(cfg.server, admin_key=None) == default.server


# --- defaults ------------------------------------------------------------------------------------


def test_no_path_and_no_env_gives_builtin_defaults() -> None:
    """OPS-2: sane defaults for everything when no file is given."""
    cfg = load_config(None, env={})
    assert cfg.is_default
    assert cfg.source_path is None
    assert cfg == Config()
    assert cfg.server.host == "127.0.0.1"
    assert cfg.server.port == DEFAULT_PORT == 20128
    assert cfg.server.require_api_key is False
    assert cfg.server.admin_key is None
    assert cfg.server.max_body_mb == 10
    assert cfg.server.workers == 1
    assert cfg.database_url == DEFAULT_DATABASE_URL == "sqlite:///./data/omniroute.db"
    assert cfg.redis_url is None
    assert (cfg.api_keys, cfg.providers, cfg.connections, cfg.combos) == ((), (), (), ())
    assert cfg.model_combo_mappings == ()
    assert dict(cfg.fallback_chains) == {}
    r = cfg.resilience
    assert (r.circuit_breaker.failure_threshold, r.circuit_breaker.reset_timeout_s) == (5, 10.0)
    assert r.circuit_breaker.half_open_probes == 1
    assert (r.cooldown.base_s, r.cooldown.max_s, r.cooldown.max_hint_s) == (3.0, 300.0, 1800.0)
    assert (r.lockout.base_s, r.lockout.max_s) == (120.0, 1800.0)
    assert (r.retries.per_target, r.retries.max_attempts) == (1, 10)
    assert (r.timeouts.connect_s, r.timeouts.ttft_s, r.timeouts.idle_s, r.timeouts.total_s) == (
        10.0,
        60.0,
        60.0,
        600.0,
    )
    assert (cfg.auto.exploration_rate, cfg.auto.default_variant, cfg.auto.lkgp_scope) == (
        0.05,
        None,
        "session",
    )


def test_empty_file_and_partial_sections_fill_in_defaults(tmp_path: Path) -> None:
    """OPS-2: an empty file is all defaults; a partial section keeps the other keys' defaults."""
    empty = load_config(write(tmp_path, ""), env={})
    assert empty.source_path is not None and not empty.is_default
    assert dataclasses.replace(empty, source_path=None) == Config()

    cfg = config_from_dict(
        {"server": {"port": 8080}, "resilience": {"cooldown": {"base_s": 5}}, "combos": None}, env={}
    )
    assert (cfg.server.port, cfg.server.host) == (8080, "127.0.0.1")
    assert (cfg.resilience.cooldown.base_s, cfg.resilience.cooldown.max_s) == (5, 300)
    assert cfg.combos == ()


def test_config_from_dict_with_content_is_not_default() -> None:
    """Config.is_default is true only when nothing was configured."""
    assert config_from_dict({}, env={}).is_default
    assert not config_from_dict({"server": {"port": 9000}}, env={}).is_default


def test_item_defaults_for_keys_connections_combos_mappings_and_chains() -> None:
    """PROV-3, COMBO-1, COMBO-2, RESIL-4: optional item keys take their documented defaults."""
    cfg = config_from_dict(
        {
            "api_keys": [{"name": "k", "key": "s"}],
            "providers": [{"id": "openai"}],
            "connections": [{"id": "c", "provider": "openai"}],
            "combos": [{"name": "x", "strategy": "weighted", "targets": [{"model": "openai/gpt-4o"}]}],
            "model_combo_mappings": [{"pattern": "*", "combo": "x"}],
            "fallback_chains": {"m": [{"provider": "a"}, {"provider": "b"}]},
        },
        env={},
    )
    assert cfg.api_keys[0].allowed_models == ("*",)
    assert cfg.api_keys[0].budget_usd is None
    prov = cfg.providers[0]
    assert (prov.format, prov.base_url, prov.models) == (None, None, ())
    conn = cfg.connections[0]
    assert (conn.auth_type, conn.priority, conn.is_active, conn.account_tier, conn.tags) == (
        "api_key",
        1,
        True,
        "standard",
        (),
    )
    assert conn.max_concurrent is None
    assert cfg.combos[0].config == {}
    assert cfg.combos[0].enabled
    assert (cfg.model_combo_mappings[0].priority, cfg.model_combo_mappings[0].enabled) == (0, True)
    assert [(e.provider, e.priority, e.enabled) for e in cfg.fallback_chains["m"]] == [
        ("a", 0, True),
        ("b", 1, True),
    ]


# --- errors name the key path ---------------------------------------------------------------------------


def test_unknown_nested_key_is_an_error_naming_its_path() -> None:
    """OPS-2: unknown keys are an error that names the key."""
    msg = error_of({"resilience": {"cooldown": {"base_seconds": 3}}})
    assert "resilience.cooldown.base_seconds: unknown key" in msg


def test_unknown_keys_at_top_level_and_in_list_items_are_named() -> None:
    """OPS-2: unknown keys are reported with list indexes in the path."""
    assert "serverz: unknown key" in error_of({"serverz": {}})
    msg = error_of({"connections": [{"id": "a", "provider": "p"}, {"id": "b", "provider": "p", "prio": 1}]})
    assert "connections[1].prio: unknown key" in msg
    msg = error_of({"combos": [{"name": "c", "targets": [{"model": "m", "wieght": 3}]}]})
    assert "combos[0].targets[0].wieght: unknown key" in msg


def test_bad_type_names_the_key_path() -> None:
    """OPS-2: a value of the wrong type names its key path."""
    msg = error_of({"connections": [{"id": "a", "provider": "p", "priority": "high"}]})
    assert msg.startswith("connections[0].priority: ")
    assert "integer" in msg


def test_boolean_where_a_number_belongs_is_rejected() -> None:
    """OPS-2: `true` is not silently read as 1."""
    assert "server.port: " in error_of({"server": {"port": True}})


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"server": {"port": 0}}, "server.port"),
        ({"server": {"port": 70000}}, "server.port"),
        ({"server": {"max_body_mb": 0}}, "server.max_body_mb"),
        ({"resilience": {"timeouts": {"ttft_s": 0}}}, "resilience.timeouts.ttft_s"),
        ({"resilience": {"timeouts": {"total_s": -1}}}, "resilience.timeouts.total_s"),
        (
            {"resilience": {"circuit_breaker": {"failure_threshold": 0}}},
            "resilience.circuit_breaker.failure_threshold",
        ),
        ({"resilience": {"cooldown": {"base_s": 10, "max_s": 5}}}, "resilience.cooldown.max_s"),
        ({"resilience": {"lockout": {"base_s": 100, "max_s": 50}}}, "resilience.lockout.max_s"),
        ({"resilience": {"retries": {"max_attempts": 0}}}, "resilience.retries.max_attempts"),
        ({"auto": {"exploration_rate": 1.5}}, "auto.exploration_rate"),
        ({"auto": {"exploration_rate": -0.1}}, "auto.exploration_rate"),
        ({"auto": {"lkgp_scope": "request"}}, "auto.lkgp_scope"),
        ({"api_keys": [{"name": "k", "key": "s", "budget_usd": -1}]}, "api_keys[0].budget_usd"),
        ({"api_keys": [{"name": "k"}]}, "api_keys[0].key"),
        ({"providers": [{"id": "p", "format": ""}]}, "providers[0].format"),
        ({"providers": [{"id": "a/b"}]}, "providers[0].id"),
        ({"providers": [{"base_url": "http://x"}]}, "providers[0].id"),
        (
            {"providers": [{"id": "p", "models": [{"id": "m", "capabilities": ["telepathy"]}]}]},
            "providers[0].models[0].capabilities[0]",
        ),
        (
            {"providers": [{"id": "p", "models": [{"id": "m", "tier": "gold"}]}]},
            "providers[0].models[0].tier",
        ),
        ({"connections": [{"id": "c", "provider": "p", "auth_type": "basic"}]}, "connections[0].auth_type"),
        (
            {"connections": [{"id": "c", "provider": "p", "account_tier": "gold"}]},
            "connections[0].account_tier",
        ),
        (
            {"connections": [{"id": "c", "provider": "p", "max_concurrent": 0}]},
            "connections[0].max_concurrent",
        ),
        ({"connections": [{"id": "c", "provider": "p", "expires_at": "soon"}]}, "connections[0].expires_at"),
        (
            {"combos": [{"name": "c", "targets": [{"model": "m", "weight": 101}]}]},
            "combos[0].targets[0].weight",
        ),
        ({"combos": [{"name": "c", "config": {"maxRetries": -1}}]}, "combos[0].config.maxRetries"),
        (
            {"combos": [{"name": "c", "config": {"stickyRoundRobinLimit": 0}}]},
            "combos[0].config.stickyRoundRobinLimit",
        ),
        (
            {"combos": [{"name": "c", "config": {"stickyWeightedLimit": "x"}}]},
            "combos[0].config.stickyWeightedLimit",
        ),
        ({"model_combo_mappings": [{"pattern": "*"}]}, "model_combo_mappings[0].combo"),
        (
            {"fallback_chains": {"gpt-4o": [{"provider": "a", "enabled": "maybe"}]}},
            "fallback_chains.gpt-4o[0].enabled",
        ),
        ({"database_url": "mysql://x"}, "database_url"),
        ({"redis_url": "http://x"}, "redis_url"),
    ],
)
def test_invalid_value_names_its_key_path(data: dict[str, object], path: str) -> None:
    """OPS-2: every invalid value is a ConfigError (a ValueError) whose message names the key path."""
    with pytest.raises(ValueError) as info:  # ConfigError is a ValueError
        config_from_dict(data, env={})
    assert isinstance(info.value, ConfigError)
    assert f"{path}: " in str(info.value)


def test_bad_strategy_lists_the_valid_ones() -> None:
    """COMBO-3: an unknown strategy names the key and lists all 19 strategies."""
    msg = error_of({"combos": [{"name": "c", "strategy": "fastest"}]})
    assert "combos[0].strategy: unknown strategy 'fastest'" in msg
    for name in ROUTING_STRATEGY_VALUES:
        assert name in msg


def test_strategy_aliases_normalise_to_canonical_names() -> None:
    """COMBO-3: strategy names are accepted in any case and with underscores."""
    assert len(ROUTING_STRATEGY_VALUES) == 19
    assert canonical_strategy("round_robin") == "round-robin"
    assert canonical_strategy("Cost_Optimized") == "cost-optimized"
    assert canonical_strategy("P2C") == "p2c"
    assert all(canonical_strategy(s) == s for s in ROUTING_STRATEGY_VALUES)
    cfg = config_from_dict({"combos": [{"name": "c", "strategy": "Least_Used"}]}, env={})
    assert cfg.combos[0].strategy == "least-used"


def test_a_registered_strategy_name_is_kept() -> None:
    """COMBO-3: a strategy registered beside the 19 is valid in a config-file combo (any case) and is
    kept, not replaced by priority; names nobody registered are still an error."""
    names = (*ROUTING_STRATEGY_VALUES, "last-first")
    cfg = config_from_dict({"combos": [{"name": "c", "strategy": "Last_First"}]}, env={}, strategies=names)
    assert cfg.combos[0].strategy == "last-first"
    assert "combos[0].strategy: unknown strategy 'last-first'" in error_of(
        {"combos": [{"name": "c", "strategy": "last-first"}]}
    )


@pytest.mark.parametrize(
    ("section", "items", "path"),
    [
        ("connections", [{"id": "a", "provider": "p"}, {"id": "a", "provider": "q"}], "connections[1].id"),
        ("providers", [{"id": "p"}, {"id": "p"}], "providers[1].id"),
        ("api_keys", [{"name": "k", "key": "1"}, {"name": "k", "key": "2"}], "api_keys[1].name"),
        ("combos", [{"name": "c"}, {"name": "c"}], "combos[1].name"),
    ],
)
def test_duplicate_ids_are_an_error_naming_the_key(section: str, items: list[object], path: str) -> None:
    """OPS-2, COMBO-1: ids and names are unique within their section."""
    msg = error_of({section: items})
    assert f"{path}: duplicate" in msg


def test_duplicate_api_key_secret_is_reported_without_echoing_it() -> None:
    """API-8: two entries with one secret would be ambiguous; the message never shows the secret."""
    msg = error_of({"api_keys": [{"name": "a", "key": "sk-shh"}, {"name": "b", "key": "sk-shh"}]})
    assert "api_keys[1].key" in msg
    assert "sk-shh" not in msg


def test_combo_target_with_both_model_and_combo_ref_is_an_error() -> None:
    """COMBO-1: a target is exactly one of {model} or {combo_ref}."""
    both = error_of(
        {"combos": [{"name": "c", "targets": [{"model": "m"}, {"model": "m", "combo_ref": "x"}]}]}
    )
    assert "combos[0].targets[1]: a target must have exactly one of 'model' or 'combo_ref'" in both
    neither = error_of({"combos": [{"name": "c", "targets": [{"weight": 5}]}]})
    assert "combos[0].targets[0]: a target must have exactly one" in neither


def test_combo_target_timeouts_are_seconds_and_exclusive() -> None:
    """COMBO-4: timeout_ms is converted to seconds; giving both spellings is an error."""
    cfg = config_from_dict(
        {
            "combos": [
                {"name": "c", "targets": [{"model": "a", "timeout_ms": 1500}, {"model": "b", "timeout_s": 2}]}
            ]
        },
        env={},
    )
    assert [t.timeout for t in cfg.combos[0].targets] == [1.5, 2.0]
    msg = error_of({"combos": [{"name": "c", "targets": [{"model": "a", "timeout_ms": 1, "timeout_s": 1}]}]})
    assert "combos[0].targets[0].timeout_ms" in msg


def test_several_errors_are_reported_together() -> None:
    """OPS-2: one run shows every schema problem, one per line."""
    with pytest.raises(ConfigError) as info:
        config_from_dict({"server": {"port": 0, "hots": "x"}, "auto": {"exploration_rate": 3}}, env={})
    paths = {p for p, _ in info.value.errors}
    assert paths == {"server.port", "server.hots", "auto.exploration_rate"}
    assert len(str(info.value).splitlines()) == 3


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    """OPS-2: a missing file, bad YAML or a non-mapping top level is a ConfigError."""
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml", env={})
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(write(tmp_path, "server: {port: [\n"), env={})
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(write(tmp_path, "- a\n- b\n"), env={})
    path = write(tmp_path, "server:\n  port: 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(path) in str(info.value)
    assert "server.port" in str(info.value)
    assert info.value.source == path


# --- ${ENV} resolution -----------------------------------------------------------------------------


def test_env_references_resolve_anywhere_in_string_values() -> None:
    """OPS-2: ${NAME} and ${NAME:-default} are resolved at load, also inside longer strings."""
    cfg = config_from_dict(
        {
            "server": {"host": "${HOST:-0.0.0.0}", "port": "${PORT}", "admin_key": "${ADMIN}"},
            "connections": [{"id": "c", "provider": "p", "base_url": "http://${UP_HOST}:9001/v1"}],
            "combos": [{"name": "c", "config": {"note": "${NOTE:-none}", "deep": ["${UP_HOST}"]}}],
        },
        env={"PORT": "9999", "ADMIN": "adm", "UP_HOST": "10.0.0.2"},
    )
    assert cfg.server.host == "0.0.0.0"
    assert cfg.server.port == 9999
    assert cfg.server.admin_key == "adm"
    assert cfg.connections[0].base_url == "http://10.0.0.2:9001/v1"
    assert thaw(cfg.combos[0].config) == {"note": "none", "deep": ["10.0.0.2"]}


def test_exact_unset_reference_becomes_none_for_optional_secrets(tmp_path: Path) -> None:
    """OPS-2: "${NAME}" with NAME unset is None: the spec example loads without its secrets set."""
    cfg = load_config(write(tmp_path, OPS2_EXAMPLE), env={})
    assert cfg.server.admin_key is None
    assert cfg.api_keys[0].key is None


def test_unset_reference_inside_a_longer_string_is_an_error_naming_the_key() -> None:
    """OPS-2: an embedded unset reference cannot become None, so it names the key path."""
    msg = error_of({"connections": [{"id": "c", "provider": "p", "base_url": "http://${NOPE}/v1"}]})
    assert msg == "connections[0].base_url: environment variable NOPE is not set"


def test_exact_unset_reference_in_a_required_key_names_the_variable() -> None:
    """OPS-2: None from an unset variable in a required key says which variable is missing."""
    msg = error_of({"connections": [{"id": "${CONN_ID}", "provider": "p"}]})
    assert msg == "connections[0].id: environment variable CONN_ID is not set"


def test_default_applies_to_empty_variables_and_escape_keeps_literal() -> None:
    """OPS-2: ${NAME:-default} covers unset and empty; $${ is a literal ${."""
    cfg = config_from_dict(
        {"server": {"host": "${H:-localhost}", "admin_key": "$${NOT_A_REF}"}}, env={"H": ""}
    )
    assert cfg.server.host == "localhost"
    assert cfg.server.admin_key == "${NOT_A_REF}"


def test_config_path_comes_from_omniroute_config_env(tmp_path: Path) -> None:
    """OPS-2: with no path argument, OMNIROUTE_CONFIG names the file."""
    path = write(tmp_path, "server: {port: 8123}\n")
    cfg = load_config(None, env={"OMNIROUTE_CONFIG": str(path)})
    assert cfg.server.port == 8123
    assert cfg.source_path == path


# --- STORE-2 URL overrides ------------------------------------------------------------------------


def test_env_urls_override_the_file(tmp_path: Path) -> None:
    """STORE-2: OMNIROUTE_DATABASE_URL and OMNIROUTE_REDIS_URL win over the file's URLs."""
    env = {
        **ENV,
        "OMNIROUTE_DATABASE_URL": "postgresql+asyncpg://u:p@db/omniroute",
        "OMNIROUTE_REDIS_URL": "redis://127.0.0.1:6379/0",
    }
    cfg = load_config(write(tmp_path, OPS2_EXAMPLE), env=env)
    assert cfg.database_url == "postgresql+asyncpg://u:p@db/omniroute"
    assert cfg.redis_url == "redis://127.0.0.1:6379/0"
    defaults = load_config(None, env=env)
    assert defaults.database_url == "postgresql+asyncpg://u:p@db/omniroute"
    assert defaults.is_default  # URL overrides alone do not count as configuration


def test_bad_env_url_names_the_variable() -> None:
    """STORE-2: a malformed override says it came from the environment."""
    msg = error_of({}, env={"OMNIROUTE_REDIS_URL": "localhost:6379"})
    assert "redis_url (from OMNIROUTE_REDIS_URL)" in msg


# --- conversions -------------------------------------------------------------------------------------


def test_expires_at_accepts_epoch_seconds_and_iso_strings() -> None:
    """PROV-3: expires_at is epoch seconds; ISO 8601 strings (naive = UTC) are converted."""
    cfg = config_from_dict(
        {
            "connections": [
                {"id": "a", "provider": "p", "auth_type": "oauth", "expires_at": 1735689600},
                {"id": "b", "provider": "p", "expires_at": "2025-01-01T00:00:00Z"},
                {"id": "c", "provider": "p", "expires_at": "2025-01-01T01:00:00+01:00"},
                {"id": "d", "provider": "p", "expires_at": "2025-01-01T00:00:00"},
            ]
        },
        env={},
    )
    assert {c.expires_at for c in cfg.connections} == {1735689600.0}


def test_yaml_timestamp_for_expires_at_is_converted(tmp_path: Path) -> None:
    """PROV-3: an unquoted YAML timestamp (parsed as datetime) becomes epoch seconds."""
    text = "connections:\n  - {id: a, provider: p, expires_at: 2025-01-01T00:00:00Z}\n"
    assert load_config(write(tmp_path, text), env={}).connections[0].expires_at == 1735689600.0


def test_with_overrides_applies_cli_flags_over_the_file() -> None:
    """OPS-1: --host/--port/--workers override the config file; None keeps the file's value."""
    cfg = config_from_dict({"server": {"host": "0.0.0.0", "port": 9000}}, env={})
    out = cfg.with_overrides(port=9100, workers=4)
    assert (out.server.host, out.server.port, out.server.workers) == ("0.0.0.0", 9100, 4)
    assert cfg.server.port == 9000
    with pytest.raises(ConfigError, match=r"server\.port"):
        cfg.with_overrides(port=0)
    with pytest.raises(ConfigError, match=r"server\.workers"):
        cfg.with_overrides(workers=0)


# --- immutability and secrecy -------------------------------------------------------------------------


def test_config_objects_are_immutable(tmp_path: Path) -> None:
    """DESIGN house style 11: config is parsed once into immutable objects."""
    cfg = load_config(write(tmp_path, OPS2_EXAMPLE), env=ENV)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.server.port = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.connections[0].priority = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.resilience.timeouts.ttft_s = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        cfg.combos[0].config["maxRetries"] = 5  # type: ignore[index]
    with pytest.raises(TypeError):
        cfg.fallback_chains["new"] = ()  # type: ignore[index]
    assert isinstance(cfg.combos[0].config, MappingProxyType)
    assert isinstance(cfg.connections, tuple)


def test_nested_combo_config_is_deep_frozen_and_thaws_to_plain_data() -> None:
    """COMBO-4: free-form combo options keep unknown keys, deep-frozen; thaw() gives JSON-able data."""
    cfg = config_from_dict(
        {"combos": [{"name": "c", "strategy": "auto", "config": {"auto": {"candidatePool": ["a", "b"]}}}]},
        env={},
    )
    opts = cfg.combos[0].config
    assert isinstance(opts["auto"], MappingProxyType)
    assert opts["auto"]["candidatePool"] == ("a", "b")
    assert thaw(opts) == {"auto": {"candidatePool": ["a", "b"]}}


def test_secrets_are_kept_out_of_repr(tmp_path: Path) -> None:
    """PROV-3: secrets are never logged, so repr() leaves them out."""
    cfg = load_config(write(tmp_path, OPS2_EXAMPLE), env=ENV)
    text = repr(cfg)
    for secret in ("admin-secret", "dev-secret", "sk-a1"):
        assert secret not in text


def test_combo_defaults_are_parsed_frozen_and_validated() -> None:
    """COMBO-3 cascade: top-level ``combo_defaults`` holds global combo options; bad types name the key."""
    cfg = config_from_dict(
        {"combo_defaults": {"stickyRoundRobinLimit": 2, "promptCacheAffinityEnabled": False}}
    )
    assert cfg.combo_defaults["stickyRoundRobinLimit"] == 2
    assert cfg.combo_defaults["promptCacheAffinityEnabled"] is False
    with pytest.raises(TypeError):
        cfg.combo_defaults["x"] = 1  # type: ignore[index]
    with pytest.raises(ConfigError, match=r"combo_defaults\.stickyRoundRobinLimit"):
        config_from_dict({"combo_defaults": {"stickyRoundRobinLimit": 0}})


def test_resilience_doc_spells_out_the_builtin_defaults(tmp_path: Path) -> None:
    """RESIL-11: the settings block of docs/RESILIENCE.md is the built-in resilience defaults, and
    its reference table lists every one of those settings."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "RESILIENCE.md").read_text(encoding="utf-8")
    block = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    cfg = load_config(write(tmp_path, block), env={})
    assert cfg.resilience == load_config(None, env={}).resilience
    for section in dataclasses.fields(cfg.resilience):
        for knob in dataclasses.fields(getattr(cfg.resilience, section.name)):
            assert f"`{section.name}.{knob.name}`" in doc, (section.name, knob.name)


def test_model_aliases_keep_file_order_and_name_a_bad_entry() -> None:
    """SPEC §4 addition: ``model_aliases`` is a list of ``{match, route}`` in file order; a missing or
    empty field or an unknown key is an error naming ``model_aliases[i].<field>``."""
    cfg = config_from_dict(
        {"model_aliases": [{"match": "claude-*", "route": "c"}, {"match": "gpt-5", "route": "auto"}]}, env={}
    )
    assert cfg.model_aliases == (ModelAliasConfig("claude-*", "c"), ModelAliasConfig("gpt-5", "auto"))
    assert "model_aliases[1].route" in error_of(
        {"model_aliases": [{"match": "a", "route": "b"}, {"match": "x"}]}
    )
    assert "model_aliases[0].match" in error_of({"model_aliases": [{"match": "", "route": "b"}]})
    assert "model_aliases[0].combo" in error_of(
        {"model_aliases": [{"match": "a", "route": "b", "combo": "c"}]}
    )
