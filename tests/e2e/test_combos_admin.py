"""The combo management API, mappings CRUD, the CLI and the start-up shadowing log (COMBO-1,
COMBO-2, SPEC §4, API-8, OPS-1): validation 400s name the field, warnings never block, admin key
required, OpenAPI documents the routes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from combo_support import Api, C, G, O, combo_config
from typer.testing import CliRunner

from omniroute.cli.main import app as cli_app
from omniroute.routing.strategies import Ordering, StrategyContext, register_strategy
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

MakeGateway = Callable[..., GatewayThread]


@pytest.fixture
def api(make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path) -> Api:
    return Api(make_gateway(replace=combo_config(fakes, tmp_path)))


def post(api: Api, body: dict[str, Any]) -> httpx.Response:
    return api.http.post("/api/combos", json=body)


def error(r: httpx.Response, param: str | None = None) -> str:
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "code", "param"} and "Traceback" not in r.text
    if param is not None:
        assert err["param"] == param, err
    msg: str = err["message"]
    return msg


def test_combo_crud_round_trip(api: Api) -> None:
    """COMBO-1: POST 201 → GET by id and by name → PUT → DELETE → 404."""
    created = api.combo("crud", [O, {"model": C, "weight": 40, "tags": ["a"]}], description="d")
    assert created["strategy"] == "priority" and created["targets"][1]["weight"] == 40
    assert "warning" not in created and "warnings" not in created
    listed = api.http.get("/api/combos").json()["data"]
    assert [c["name"] for c in listed] == ["crud"]
    assert api.http.get(f"/api/combos/{created['id']}").json()["name"] == "crud"
    assert api.http.get("/api/combos/crud").json()["id"] == created["id"]
    r = api.http.put(
        "/api/combos/crud", json={"strategy": "Round_Robin", "config": {"stickyRoundRobinLimit": 1}}
    )
    assert r.status_code == 200 and r.json()["strategy"] == "round-robin"
    assert r.json()["targets"] == created["targets"]
    d = api.http.delete(f"/api/combos/{created['id']}")
    assert d.status_code == 200 and d.json()["deleted"] == created["id"]
    assert api.http.get("/api/combos/crud").status_code == 404
    assert api.http.put("/api/combos/crud", json={"enabled": False}).status_code == 404
    assert api.http.delete("/api/combos/crud").status_code == 404


def test_validation_errors_are_clear_400s(api: Api) -> None:
    """COMBO-1: unknown strategy lists the valid ones; empty targets; weights out of range; bad
    options; duplicate names; fusion without members; pipeline without steps."""
    msg = error(post(api, {"name": "x", "strategy": "fastest", "targets": [O]}), "strategy")
    assert "round-robin" in msg and "cache-optimized" in msg and "pipeline" in msg
    error(post(api, {"name": "x", "targets": []}), "targets")
    error(post(api, {"name": "x", "targets": [{"model": O, "weight": 150}]}), "targets[0].weight")
    error(post(api, {"name": "x", "targets": [{"model": O, "combo_ref": "y"}]}), "targets[0]")
    error(post(api, {"name": "x", "targets": [O], "config": {"maxRetries": -1}}), "config.maxRetries")
    error(post(api, {"name": "x", "targets": [O], "bogus": 1}), "bogus")
    assert "fusion" in error(post(api, {"name": "f", "strategy": "fusion", "targets": []}), "targets")
    assert "pipeline" in error(post(api, {"name": "p", "strategy": "pipeline", "targets": []}), "targets")
    api.combo("dup", [O])
    assert "already exists" in error(post(api, {"name": "dup", "targets": [C]}), "name")
    api.combo("other", [O])
    error(api.http.put("/api/combos/other", json={"name": "dup"}), "name")


class LastFirst:
    """A strategy from outside the built-in 19: the last target first."""

    name = "last-first"
    expands_connections = False
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        return Ordering(list(reversed(ctx.targets)), "last target first")


def test_a_registered_strategy_is_used_by_a_combo_created_through_the_api(api: Api) -> None:
    """COMBO-3 regression: a strategy added with ``register_strategy`` is a valid name on the
    management API (any case, as the built-ins) and orders the combo's targets; it used to be
    accepted nowhere and, stored anyway, silently served as priority."""
    register_strategy("last-first", LastFirst())
    created = api.combo("custom", [O, C], strategy="Last_First")
    assert created["strategy"] == "last-first"
    r = api.chat("custom")
    assert r.status_code == 200, r.text
    assert r.headers["x-omniroute-provider"] == "local-c"
    assert r.headers["x-omniroute-strategy"] == "last-first"
    msg = error(post(api, {"name": "other", "strategy": "first-last", "targets": [O]}), "strategy")
    assert "unknown strategy 'first-last'" in msg and "last-first" in msg


def test_fusion_and_pipeline_names_are_accepted(api: Api) -> None:
    """COMBO-3: fusion and pipeline are valid strategies (their execution is COMBO-5/6)."""
    assert api.combo("fus", [O, C, G], strategy="fusion")["strategy"] == "fusion"
    assert (
        api.combo("pipe", [{"model": O, "prompt": "draft"}, C], strategy="pipeline")["targets"][0]["prompt"]
        == "draft"
    )


def test_unknown_provider_model_or_connection_warns_but_creates(api: Api) -> None:
    """COMBO-1: the catalog may be stale — warnings, 201."""
    body = api.combo("warned", ["mystery/model-x", "local-o/not-listed", {"model": O, "connection_id": "o9"}])
    assert [w["code"] for w in body["warnings"]] == [
        "UNKNOWN_PROVIDER",
        "UNKNOWN_MODEL",
        "UNKNOWN_CONNECTION",
    ]
    assert api.chat("warned").status_code == 200  # the listed-elsewhere model still answers


def test_combo_ref_cycles_and_depth_are_rejected(api: Api) -> None:
    """COMBO-1: A → B → A rejected with 400; self refs; unknown refs; depth > 3."""
    api.combo("A", [O])
    api.combo("B", [{"combo_ref": "A"}])
    assert "cycle" in error(api.http.put("/api/combos/A", json={"targets": [{"combo_ref": "B"}]}), "targets")
    assert "cycle" in error(post(api, {"name": "S", "targets": [{"combo_ref": "S"}]}), "targets")
    error(post(api, {"name": "U", "targets": [{"combo_ref": "nope"}]}), "targets[0].combo_ref")
    api.combo("C1", [{"combo_ref": "B"}])  # C1 → B → A: depth 2
    api.combo("D1", [{"combo_ref": "C1"}])  # depth 3
    msg = error(post(api, {"name": "E1", "targets": [{"combo_ref": "D1"}]}), "targets")
    assert "depth 4 > 3" in msg


def test_shadowing_warning_on_create_and_rename_only(api: Api) -> None:
    """SPEC §4: a combo named like a catalog model is allowed, with a non-blocking warning."""
    body = api.combo("model-c", [G])
    assert body["warning"] == {
        "code": "COMBO_NAME_SHADOWS_MODEL",
        "modelId": "model-c",
        "providerId": "local-c",
        "message": body["warning"]["message"],
    }
    assert api.chat("model-c").headers["x-omniroute-provider"] == "local-g"
    assert "warning" not in api.http.put("/api/combos/model-c", json={"description": "x"}).json()
    api.combo("plain", [G])
    renamed = api.http.put("/api/combos/plain", json={"name": "local-o/model-o"}).json()
    assert renamed["warning"]["providerId"] == "local-o" and renamed["warning"]["modelId"] == "model-o"
    assert api.http.get("/api/combos/local-o/model-o").json()["id"] == renamed["id"]  # names may hold '/'


def test_mapping_crud_and_validation(api: Api) -> None:
    """COMBO-2: glob pattern → combo, priority, enabled, description; 400 for an unknown combo."""
    combo = api.combo("X", [G])
    error(api.http.post("/api/model-combo-mappings", json={"pattern": "gpt-*", "combo": "nope"}), "combo")
    error(api.http.post("/api/model-combo-mappings", json={"pattern": "", "combo": "X"}), "pattern")
    r = api.http.post(
        "/api/model-combo-mappings",
        json={"pattern": "gpt-*", "combo_id": combo["id"], "priority": 3, "description": "all gpt"},
    )
    assert r.status_code == 201, r.text
    m = r.json()
    assert m["combo_name"] == "X" and m["priority"] == 3 and m["enabled"] is True
    assert api.http.get("/api/model-combo-mappings").json()["data"][0]["id"] == m["id"]
    assert api.http.get(f"/api/model-combo-mappings/{m['id']}").json()["pattern"] == "gpt-*"
    assert api.chat("gpt-anything").headers["x-omniroute-provider"] == "local-g"
    r = api.http.put(f"/api/model-combo-mappings/{m['id']}", json={"pattern": "claude-*"})
    assert r.status_code == 200 and r.json()["pattern"] == "claude-*"
    assert api.chat("gpt-anything").status_code == 404
    assert api.http.delete(f"/api/model-combo-mappings/{m['id']}").status_code == 200
    assert api.http.get(f"/api/model-combo-mappings/{m['id']}").status_code == 404
    assert api.http.delete(f"/api/model-combo-mappings/{m['id']}").status_code == 404


def test_mapping_priority_decides_between_matching_patterns(api: Api) -> None:
    """SPEC §4 step 3: highest priority first among matching mappings."""
    api.combo("low", [O])
    api.combo("high", [C])
    for pattern, name, prio in (("gpt-*", "low", 1), ("GPT-4?", "high", 9)):
        api.http.post("/api/model-combo-mappings", json={"pattern": pattern, "combo": name, "priority": prio})
    assert api.chat("gpt-4o").headers["x-omniroute-provider"] == "local-c"
    assert api.chat("gpt-3").headers["x-omniroute-provider"] == "local-o"


def test_deleting_a_referenced_combo_warns_about_dangling_refs(api: Api) -> None:
    api.combo("inner", [C])
    api.combo("outer", [{"combo_ref": "inner"}, O])
    r = api.http.delete("/api/combos/inner")
    assert r.json()["warnings"][0]["combo"] == "outer"
    assert api.chat("outer").headers["x-omniroute-provider"] == "local-o"


def test_admin_key_is_required_when_configured(
    make_gateway: MakeGateway, fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """API-8: the management API takes ``Authorization: Bearer <admin_key>``."""
    cfg = combo_config(fakes, tmp_path)
    cfg["server"] = {"admin_key": "adm"}
    gt = make_gateway(replace=cfg)
    assert httpx.get(f"{gt.url}/api/combos").status_code == 401
    ok = httpx.get(f"{gt.url}/api/combos", headers={"authorization": "Bearer adm"})
    assert ok.status_code == 200
    assert httpx.get(f"{gt.url}/api/model-combo-mappings").status_code == 401


def test_openapi_documents_the_combo_routes(api: Api) -> None:
    """COMBO-1/2: the routes and schemas are in ``/openapi.json``."""
    spec = api.http.get("/openapi.json").json()
    for path in (
        "/api/combos",
        "/api/combos/{combo_id}",
        "/api/model-combo-mappings",
        "/api/model-combo-mappings/{mapping_id}",
    ):
        assert path in spec["paths"]
    assert {"ComboIn", "ComboPatch", "TargetIn", "MappingIn"} <= set(spec["components"]["schemas"])


def test_config_declared_combos_and_the_startup_shadowing_log(
    make_gateway: MakeGateway,
    fakes: dict[str, FakeProviderThread],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """COMBO-1 config combos; SPEC §4: one start-up log line lists every shadowing combo."""
    combos = [
        {"name": "model-o", "strategy": "priority", "targets": [{"model": C}]},
        {"name": "fine", "strategy": "round_robin", "targets": [{"model": O}, {"model": G}]},
    ]
    with caplog.at_level(logging.WARNING, logger="omniroute"):
        gt = make_gateway(replace=combo_config(fakes, tmp_path, combos=combos))
    lines = [r.getMessage() for r in caplog.records if "COMBO_NAME_SHADOWS_MODEL" in r.getMessage()]
    assert len(lines) == 1 and "model-o" in lines[0] and "fine" not in lines[0]
    api = Api(gt)
    assert api.chat("model-o").headers["x-omniroute-provider"] == "local-c"
    assert api.http.get("/api/combos/fine").json()["strategy"] == "round-robin"


def test_cli_creates_lists_shows_and_deletes_combos(
    fakes: dict[str, FakeProviderThread], tmp_path: Path
) -> None:
    """OPS-1 / COMBO-1: ``omniroute combos list/show/create/delete`` over the same store and checks."""
    cfg_path = tmp_path / "omniroute.yaml"
    cfg_path.write_text(yaml.safe_dump(combo_config(fakes, tmp_path)))
    run = CliRunner().invoke
    weighted = [
        "-s",
        "weighted",
        "-t",
        f"{O},weight=70",
        "-t",
        f"{C},weight=30",
        "-o",
        "stickyWeightedLimit=2",
    ]
    r = run(cli_app, ["combos", "create", "cli-combo", "-c", str(cfg_path), *weighted])
    assert r.exit_code == 0, r.output
    assert "Created combo 'cli-combo'" in r.output
    r = run(cli_app, ["combos", "show", "cli-combo", "-c", str(cfg_path)])
    assert r.exit_code == 0 and '"weight": 70' in r.output and '"stickyWeightedLimit": 2' in r.output
    r = run(cli_app, ["combos", "create", "bad", "-c", str(cfg_path), "-s", "fastest", "-t", O])
    assert r.exit_code == 2 and "strategy" in r.output
    r = run(cli_app, ["combos", "create", "model-c", "-c", str(cfg_path), "-t", G])
    assert r.exit_code == 0 and "COMBO_NAME_SHADOWS_MODEL" in r.output
    r = run(cli_app, ["combos", "list", "-c", str(cfg_path)])
    assert r.exit_code == 0 and "cli-combo" in r.output and "weighted" in r.output
    r = run(cli_app, ["combos", "delete", "cli-combo", "-c", str(cfg_path)])
    assert r.exit_code == 0
    assert run(cli_app, ["combos", "show", "cli-combo", "-c", str(cfg_path)]).exit_code == 1
