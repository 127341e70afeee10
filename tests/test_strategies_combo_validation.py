"""Combo validation shared by the management API and the CLI (COMBO-1, COMBO-3, COMBO-5/6 names):
clear 400-worthy errors naming the field, warnings for unknown catalog entries."""

from __future__ import annotations

from typing import Any

import pytest

from omniroute.core.combo import ComboInvalid, ComboTarget, ref_graph_problem
from omniroute.providers.catalog import Catalog
from omniroute.routing.combo_validation import check_combo
from omniroute.routing.registry import Registry
from omniroute.values import Connection, ModelInfo, ProviderInfo

REG = Registry.build(
    Catalog([ProviderInfo(id="local-o", models=(ModelInfo(id="model-o"),)), ProviderInfo(id="local-c")]),
    [Connection(id="o1", provider="local-o"), Connection(id="c1", provider="local-c")],
)


def combo(name: str = "x", **kw: Any) -> dict[str, Any]:
    return {"name": name, "strategy": "priority", "targets": [{"model": "local-o/model-o"}], **kw}


def invalid(data: dict[str, Any], existing: list[dict[str, Any]] | None = None) -> ComboInvalid:
    with pytest.raises(ComboInvalid) as exc:
        check_combo(data, existing or [], REG)
    return exc.value


def test_unknown_strategy_is_rejected_listing_the_valid_ones() -> None:
    err = invalid(combo(strategy="fastest"))
    assert err.param == "strategy" and "round-robin" in err.message and "cache-optimized" in err.message


def test_strategy_names_are_canonicalised_and_legacy_aliases_accepted() -> None:
    assert check_combo(combo(strategy="Round_Robin"), [], REG)[0].strategy == "round-robin"
    assert check_combo(combo(strategy="usage"), [], REG)[0].strategy == "least-used"


def test_empty_targets_are_rejected_except_for_auto() -> None:
    assert invalid(combo(targets=[])).param == "targets"
    assert check_combo(combo(strategy="auto", targets=[]), [], REG)[0].targets == ()


def test_fusion_needs_members_within_max_panel_and_pipeline_needs_steps() -> None:
    """COMBO-5/6 are accepted and validated here: ≥ 1 member (≤ maxPanel 40), ≥ 1 step."""
    assert "fusion" in invalid(combo(strategy="fusion", targets=[])).message
    assert "pipeline" in invalid(combo(strategy="pipeline", targets=[])).message
    many = [{"model": "local-o/model-o"}] * 41
    assert "maxPanel" in invalid(combo(strategy="fusion", targets=many)).message
    ok, _ = check_combo(
        combo(strategy="pipeline", targets=[{"model": "local-o/model-o", "prompt": "p"}]), [], REG
    )
    assert ok.targets[0].prompt == "p"


@pytest.mark.parametrize(
    ("target", "param"),
    [
        ({"model": "local-o/model-o", "weight": 101}, "targets[0].weight"),
        ({"model": "local-o/model-o", "weight": -1}, "targets[0].weight"),
        ({"model": "local-o/model-o", "combo_ref": "y"}, "targets[0]"),
        ({}, "targets[0]"),
        ({"model": "local-o/model-o", "timeout_s": 0}, "targets[0].timeout_s"),
        ({"model": "local-o/model-o", "timeout_s": 1, "timeout_ms": 1000}, "targets[0].timeout_ms"),
        ({"model": "local-o/model-o", "connection_id": "c1"}, "targets[0].connection_id"),
        ({"model": "local-o/model-o", "priority": "high"}, "targets[0].priority"),
    ],
)
def test_bad_targets_name_the_field(target: dict[str, Any], param: str) -> None:
    assert invalid(combo(targets=[target])).param == param


@pytest.mark.parametrize(
    ("config", "param"),
    [
        ({"maxRetries": -1}, "config.maxRetries"),
        ({"stickyRoundRobinLimit": 0}, "config.stickyRoundRobinLimit"),
        ({"stickyRoundRobinLimit": 1001}, "config.stickyRoundRobinLimit"),
        ({"connectionAwareExpansion": "yes"}, "config.connectionAwareExpansion"),
        ({"tagMatchMode": "some"}, "config.tagMatchMode"),
        ({"connectionLimits": {"o1": {"requests": 0, "window_s": 60}}}, "config.connectionLimits.o1"),
    ],
)
def test_bad_options_name_the_field(config: dict[str, Any], param: str) -> None:
    assert invalid(combo(config=config)).param == param


def test_unknown_provider_model_and_connection_are_warnings_not_errors() -> None:
    """COMBO-1: the catalog may be stale — warn, don't reject."""
    targets = [
        {"model": "nowhere/x"},
        {"model": "local-o/not-in-catalog"},
        {"model": "local-o/model-o", "connection_id": "zz"},
        "just-a-model",
    ]
    out, warnings = check_combo(combo(targets=targets), [], REG)
    codes = [w["code"] for w in warnings]
    assert codes == ["UNKNOWN_PROVIDER", "UNKNOWN_MODEL", "UNKNOWN_CONNECTION", "UNKNOWN_MODEL"]
    assert out.targets[3] == ComboTarget(model="just-a-model")


def test_combo_ref_must_exist_and_cycles_are_rejected() -> None:
    """COMBO-1: A → B → A is rejected; a self reference too."""
    b = {"id": "b", "name": "B", "targets": [{"combo_ref": "A"}]}
    assert invalid(combo("A", targets=[{"combo_ref": "nope"}])).param == "targets[0].combo_ref"
    err = invalid(combo("A", targets=[{"combo_ref": "B"}]), [b])
    assert "cycle" in err.message and "A -> B -> A" in err.message
    assert "cycle" in invalid(combo("A", targets=[{"combo_ref": "A"}])).message


def test_combo_ref_depth_over_three_is_rejected_from_either_end() -> None:
    """COMBO-1: nesting depth ≤ 3, also when the new combo sits in the middle of the chain."""
    d = {"id": "d", "name": "D", "targets": [{"model": "local-o/model-o"}]}
    c = {"id": "c", "name": "C", "targets": [{"combo_ref": "D"}]}
    b = {"id": "b", "name": "B", "targets": [{"combo_ref": "C"}]}
    check_combo(combo("A", targets=[{"combo_ref": "B"}]), [b, c, d], REG)  # depth 3: fine
    e = {"id": "e", "name": "E", "targets": [{"combo_ref": "D2"}]}
    err = invalid(combo("D2", targets=[{"combo_ref": "B"}]), [b, c, d, e])
    assert "depth 4 > 3" in err.message


def test_renaming_keeps_the_own_row_out_of_the_graph() -> None:
    existing = [{"id": "1", "name": "old", "targets": [{"model": "local-o/model-o"}]}]
    out, _ = check_combo(combo("new"), existing, REG, own_id="1")
    assert out.name == "new"


def test_ref_graph_problem_is_none_for_a_tree() -> None:
    graph = {"A": ["B", "C"], "B": [], "C": []}
    assert ref_graph_problem("A", graph) is None


def test_names_must_not_use_the_combo_prefix() -> None:
    assert invalid(combo("combo/x")).param == "name"
    assert invalid(combo("  ")).param == "name"
