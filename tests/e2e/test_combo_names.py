"""Combo names are what clients send as ``model`` and part of ``/api/combos/{name}``: the API, the
config file and the CLI accept the characters model ids use and refuse path-changing ones, naming
``name``."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from omniroute.cli.main import app as cli_app
from omniroute.config import ConfigError, config_from_dict
from omniroute.testing.gateway import GatewayThread

BAD_NAMES = ["../evil", "a/../b", "a//b", "/lead", "a b", "a?b", "a#b", "a%2Fb", "tab\tname", "./x"]
GOOD_NAMES = ["my-combo", "llama3.1:8b", "claude-3@20240620", "local-o/model-o", "A_B+c"]


def _combo(name: str) -> dict[str, object]:
    return {"name": name, "strategy": "priority", "targets": [{"model": "local-o/model-o"}]}


@pytest.mark.parametrize("name", BAD_NAMES)
def test_api_refuses_a_combo_name_with_path_characters(gateway: GatewayThread, name: str) -> None:
    r = httpx.post(f"{gateway.url}/api/combos", json=_combo(name), timeout=10)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "name" and err["message"].startswith("name: "), err
    assert httpx.get(f"{gateway.url}/api/combos", timeout=10).json()["data"] == []


def test_api_accepts_combo_names_in_model_id_characters(gateway: GatewayThread) -> None:
    for name in GOOD_NAMES:
        r = httpx.post(f"{gateway.url}/api/combos", json=_combo(name), timeout=10)
        assert r.status_code == 201, r.text
    names = {c["name"] for c in httpx.get(f"{gateway.url}/api/combos", timeout=10).json()["data"]}
    assert names == set(GOOD_NAMES)


def test_config_file_refuses_a_combo_name_with_path_characters(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(
            {"database_url": f"sqlite:///{tmp_path}/x.db", "combos": [_combo("../evil")]}, env={}
        )
    assert "combos[0].name" in str(info.value)


def test_cli_refuses_a_combo_name_with_path_characters(tmp_path: Path) -> None:
    cfg = tmp_path / "cli.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/omniroute.db'\n")
    out = CliRunner().invoke(
        cli_app,
        ["combos", "create", "../evil", "--target", "local-o/model-o", "--config", str(cfg)],
        env={"COLUMNS": "200"},
    )
    assert out.exit_code == 2, out.output
    assert "name:" in out.output and "not a valid combo name" in " ".join(out.output.split())
