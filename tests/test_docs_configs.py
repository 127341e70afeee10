"""The configuration files a person copies from the README and ``deploy/`` work as written: each loads,
a gateway starts on it, and what it declares is routable. The deployment files carry what they promise
(two replicas on PostgreSQL and Redis behind a proxy, a non-root image with a health check, a systemd
unit that drains on SIGTERM)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from omniroute.config import config_from_dict
from omniroute.testing.gateway import GatewayThread

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    "OPENAI_API_KEY": "sk-test-openai",
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "GEMINI_API_KEY": "AIza-test",
    "OPENROUTER_API_KEY": "sk-or-test",
    "OMNIROUTE_ADMIN_KEY": "admin-test",
    "DEV_KEY": "dev-test",
    "LOCAL_B_KEY": "sk-b",
}


def _readme_yaml_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```yaml\n(.*?)```", text, flags=re.S)


def _documented_configs() -> list[Any]:
    blocks = [pytest.param(b, id=f"README-{i}") for i, b in enumerate(_readme_yaml_blocks())]
    deploy = (ROOT / "deploy" / "config.yaml").read_text(encoding="utf-8")
    return [*blocks, pytest.param(deploy, id="deploy-config")]


def test_readme_shows_every_kind_of_real_provider() -> None:
    text = "\n".join(_readme_yaml_blocks())
    for provider in ("openai", "anthropic", "gemini", "openrouter", "ollama", "llamacpp"):
        assert f"provider: {provider}" in text, provider


@pytest.mark.parametrize("block", _documented_configs())
def test_documented_config_starts_a_gateway_that_routes_what_it_declares(block: str, tmp_path: Path) -> None:
    data = yaml.safe_load(block)
    if not isinstance(data, dict) or not any(k in data for k in ("connections", "server", "combos")):
        pytest.skip("not a config file")
    data = {**data, "database_url": f"sqlite:///{tmp_path}/gw.db", "redis_url": None}
    data["server"] = {**(data.get("server") or {}), "host": "127.0.0.1"}
    data["server"].pop("port", None)
    cfg = config_from_dict(data, env=ENV)
    with GatewayThread(cfg) as gw:
        headers = {"authorization": f"Bearer {ENV['OMNIROUTE_ADMIN_KEY']}"}
        client_key = next((k.key for k in cfg.api_keys if k.key), None)
        v1 = {"authorization": f"Bearer {client_key}"} if client_key else {}
        models = {m["id"] for m in httpx.get(f"{gw.url}/v1/models", headers=v1, timeout=10).json()["data"]}
        for conn in cfg.connections:
            if conn.default_model:
                assert f"{conn.provider}/{conn.default_model}" in models, conn.id
        for combo in cfg.combos:
            assert combo.name in models, combo.name
        r = httpx.get(f"{gw.url}/api/combos", headers=headers, timeout=10)
        assert r.status_code == 200


def test_compose_runs_two_replicas_on_postgres_and_redis_behind_a_proxy() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text(encoding="utf-8"))
    services = compose["services"]
    gateways = [name for name in services if name.startswith("gateway-")]
    assert len(gateways) == 2
    for name in gateways:
        env = services[name]["environment"]
        assert env["OMNIROUTE_DATABASE_URL"].startswith("postgresql://")
        assert env["OMNIROUTE_REDIS_URL"].startswith("redis://")
        assert "OMNIROUTE_SECRET_KEY" in env
    assert {"postgres", "redis", "proxy"} <= set(services)
    nginx = (ROOT / "deploy" / "nginx.conf").read_text(encoding="utf-8")
    for name in gateways:
        assert f"server {name}:20128" in nginx
    assert "proxy_buffering off" in nginx  # streams are never buffered by the proxy


def test_image_runs_as_non_root_with_a_health_check() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^USER (?!root)\S+", dockerfile, flags=re.M)
    assert "HEALTHCHECK" in dockerfile and "/health" in dockerfile
    assert "-slim" in dockerfile


def test_systemd_unit_runs_the_gateway_unprivileged_and_stops_with_sigterm() -> None:
    unit = (ROOT / "deploy" / "omniroute.service").read_text(encoding="utf-8")
    assert re.search(r"^ExecStart=\S*omniroute serve --config ", unit, flags=re.M)
    assert re.search(r"^User=omniroute$", unit, flags=re.M)
    assert re.search(r"^KillSignal=SIGTERM$", unit, flags=re.M)
