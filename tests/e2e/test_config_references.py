"""References checked at start: a config file naming an unknown provider, model, connection or combo
stops start-up (and a reload) with the key path; a dangling reference in stored data is a loud warning
at start and in ``omniroute doctor``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from omniroute.cli.main import app as cli_app
from omniroute.config import load_config
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

DANGLING = """\
combos:
  - name: good
    targets: [{model: mine/m}]
  - name: bad
    targets:
      - {model: mine/m}
      - {model: mine/m, connection_id: x}
      - {combo_ref: nope}
      - {model: zzz/q}
      - {model: no-such-model}
model_combo_mappings: [{pattern: "gpt-*", combo: ghost}]
fallback_chains:
  mine/m: [{provider: nowhere}]
"""


def _base(tmp_path: Path, url: str) -> str:
    return (
        f"database_url: 'sqlite:///{tmp_path}/o.db'\n"
        f"providers: [{{id: mine, base_url: '{url}/v1', models: [{{id: m}}]}}]\n"
        "connections: [{id: c1, provider: mine, api_key: sk-1}]\n"
    )


def test_unknown_references_in_the_config_stop_start_up_naming_each_key(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(_base(tmp_path, "http://127.0.0.1:9") + DANGLING)
    proc = subprocess.run(
        [sys.executable, "-m", "omniroute.cli", "serve", "--config", str(cfg), "--port", "9"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    for line in (
        "combos[1].targets[1]: unknown connection 'x'",
        "combos[1].targets[2]: unknown combo 'nope'",
        "combos[1].targets[3]: unknown provider 'zzz'",
        "combos[1].targets[4]: unknown model 'no-such-model'",
        "model_combo_mappings[0].combo: unknown combo 'ghost'",
        "fallback_chains.mine/m[0].provider: unknown provider 'nowhere'",
    ):
        assert line in out, out
    assert "combos[0]" not in out and "combos[1].targets[0]" not in out
    assert "Traceback" not in out


def test_a_reload_with_an_unknown_reference_is_refused_and_the_running_config_kept(tmp_path: Path) -> None:
    with FakeProviderThread(name="mine") as fake:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(
            _base(tmp_path, fake.base_url) + "combos: [{name: good, targets: [{model: mine/m}]}]\n"
        )
        with GatewayThread(load_config(cfg)) as gw:
            cfg.write_text(
                _base(tmp_path, fake.base_url)
                + "combos: [{name: good, targets: [{model: mine/m, connection_id: gone}]}]\n"
            )
            r = httpx.post(f"{gw.url}/api/reload", timeout=10)
            assert r.status_code == 400, r.text
            assert "combos[0].targets[0]: unknown connection 'gone'" in r.json()["error"]["message"]
            body = {"model": "good", "messages": [{"role": "user", "content": "hi"}]}
            assert httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=10).status_code == 200


def test_a_dangling_reference_in_stored_data_is_a_warning_at_start_and_in_doctor(
    tmp_path: Path,
    make_gateway: Callable[..., GatewayThread],
    fakes: dict[str, FakeProviderThread],
    caplog: pytest.LogCaptureFixture,
) -> None:
    gw = make_gateway()
    api = httpx.Client(base_url=gw.url, timeout=10)
    r = api.post("/api/providers", json={"id": "newp", "base_url": f"{fakes['c'].base_url}/v1"})
    assert r.status_code == 201, r.text
    assert (
        api.post("/api/connections", json={"id": "n1", "provider": "newp", "api_key": "k"}).status_code == 201
    )
    pinned = {"name": "pinned", "targets": [{"model": "newp/m1", "connection_id": "n1"}, "local-o/model-o"]}
    assert api.post("/api/combos", json=pinned).status_code == 201
    assert api.delete("/api/connections/n1").status_code == 200
    gw.stop()
    caplog.set_level(logging.WARNING, logger="omniroute")
    again = make_gateway()  # same config and database
    assert "stored data: combo 'pinned' targets[0]: unknown connection 'n1'" in caplog.text
    body = {"model": "pinned", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{again.base_url}/chat/completions", json=body, timeout=10).status_code == 200
    again.stop()
    cfg = tmp_path / "doctor.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/omniroute.db'\n")
    out = CliRunner().invoke(cli_app, ["doctor", "--config", str(cfg)], env={"COLUMNS": "300"})
    text = " ".join(out.output.split())
    assert "stored data" in text and "combo 'pinned' targets[0]: unknown connection 'n1'" in text, out.output
