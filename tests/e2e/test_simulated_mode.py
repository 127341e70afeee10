"""Simulated mode: the sample combo is a stored combo the API and the CLI list, simulated providers are
labelled wherever they are listed, and a real connection switches them off with a log line saying so."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from omniroute.cli.main import app as cli_app
from omniroute.config import load_config
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread


def _config_file(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "omniroute.yaml"
    path.write_text(f"database_url: 'sqlite:///{tmp_path}/o.db'\n{extra}")
    return path


def _chat(gw: GatewayThread, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=10)


def test_sample_combo_is_a_stored_combo_listed_by_the_api_the_cli_and_the_model_list(tmp_path: Path) -> None:
    cfg = _config_file(tmp_path)
    with GatewayThread(load_config(cfg)) as gw:
        api = httpx.Client(base_url=gw.url, timeout=10)
        combos = {c["name"]: c for c in api.get("/api/combos").json()["data"]}
        assert [t["model"] for t in combos["sim-combo"]["targets"]] == [
            "sim-smart/smart-1",
            "sim-fast/fast-1",
            "sim-cheap/cheap-1",
        ]
        listed = {m["id"]: m for m in httpx.get(f"{gw.base_url}/models", timeout=10).json()["data"]}
        assert listed["sim-combo"]["simulated"] is True and listed["sim-combo"]["owned_by"] == "simulated"
        assert all(
            listed[f"{p}/{m}"]["simulated"] for p, m in [("sim-fast", "fast-1"), ("sim-cheap", "cheap-1")]
        )
        providers = {p["id"]: p for p in api.get("/api/providers").json()["data"]}
        assert providers["sim-smart"]["simulated"] is True and "(simulated)" in providers["sim-smart"]["name"]
        assert api.get("/health/ready").json()["simulated"] is True
        assert _chat(gw, "sim-combo").status_code == 200
        out = CliRunner().invoke(cli_app, ["combos", "list", "--config", str(cfg)], env={"COLUMNS": "200"})
        assert out.exit_code == 0, out.output
        assert "sim-combo" in out.output and "sim-smart/smart-1" in out.output


def test_a_connection_added_at_run_time_switches_the_simulated_providers_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="omniroute")
    with FakeProviderThread(name="real") as fake, GatewayThread(load_config(_config_file(tmp_path))) as gw:
        api = httpx.Client(base_url=gw.url, timeout=10)
        assert "simulated mode" in caplog.text
        r = api.post(
            "/api/providers", json={"id": "real", "base_url": f"{fake.base_url}/v1", "models": [{"id": "m1"}]}
        )
        assert r.status_code == 201, r.text
        r = api.post("/api/connections", json={"id": "r1", "provider": "real", "api_key": "sk-real-1"})
        assert r.status_code == 201, r.text
        assert "simulated providers off: connection r1 added (real)" in caplog.text
        assert "sample combo 'sim-combo' was removed" in caplog.text
        ids = {m["id"]: m for m in httpx.get(f"{gw.base_url}/models", timeout=10).json()["data"]}
        assert (
            "real/m1" in ids and not any(m.get("simulated") for m in ids.values()) and "sim-combo" not in ids
        )
        assert "sim-combo" not in {c["name"] for c in api.get("/api/combos").json()["data"]}
        assert not any(p["simulated"] for p in api.get("/api/providers").json()["data"])
        assert api.get("/health/ready").json()["simulated"] is False
        assert _chat(gw, "sim-combo").status_code == 404
        served = _chat(gw, "real/m1")
        assert served.status_code == 200 and served.headers["x-omniroute-connection"] == "r1"


def test_start_up_after_a_connection_was_configured_says_the_simulated_providers_are_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="omniroute")
    with GatewayThread(load_config(_config_file(tmp_path))) as gw:  # a first, simulated run
        assert "sim-combo" in {
            c["name"] for c in httpx.get(f"{gw.url}/api/combos", timeout=10).json()["data"]
        }
    caplog.clear()
    with FakeProviderThread(name="real") as fake:
        extra = (
            f"providers: [{{id: real, base_url: '{fake.base_url}/v1', models: [{{id: m1}}]}}]\n"
            "connections: [{id: r1, provider: real, api_key: sk-real-1}]\n"
        )
        with GatewayThread(load_config(_config_file(tmp_path, extra))) as gw:
            assert "simulated providers off: 1 connection(s) configured (real)" in caplog.text
            assert "the sample combo 'sim-combo' was removed" in caplog.text
            assert "simulated mode" not in caplog.text
            combos = httpx.get(f"{gw.url}/api/combos", timeout=10).json()["data"]
            assert "sim-combo" not in {c["name"] for c in combos}
            assert _chat(gw, "real/m1").status_code == 200
