"""Health (OBS-4), metrics (OBS-3), decisions (OBS-2), usage log (OBS-1), embeddings (API-5),
admin auth (API-8), the keys CLI (OPS-1) and simulated mode with no configuration."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
from typer.testing import CliRunner

from omniroute.cli.main import app as cli_app
from omniroute.clock import FakeClock
from omniroute.config import Config, ServerConfig
from omniroute.testing.gateway import GatewayThread


def test_health_and_ready(gateway: GatewayThread) -> None:
    """OBS-4: liveness and readiness (database and state store reachable)."""
    assert httpx.get(f"{gateway.url}/health", timeout=5).json() == {"status": "ok"}
    ready = httpx.get(f"{gateway.url}/health/ready", timeout=5)
    assert ready.status_code == 200 and ready.json()["database"] is True and ready.json()["state"] is True


def test_metrics_exposes_requests_attempts_and_breakers(gateway: GatewayThread) -> None:
    """OBS-3: Prometheus text with request, attempt, token, cost and overhead series."""
    c = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
    c.chat.completions.create(model="local-o/model-o", messages=[{"role": "user", "content": "a b"}])
    text = httpx.get(f"{gateway.url}/metrics", timeout=5).text
    assert 'omniroute_requests_total{route="provider/model",status="200",strategy="single"} 1.0' in text
    assert 'omniroute_upstream_attempts_total{provider="local-o",status="200"} 1.0' in text
    assert 'omniroute_tokens_total{direction="input",model="model-o",provider="local-o"} 2.0' in text
    assert "omniroute_gateway_overhead_seconds_bucket" in text
    assert "omniroute_cost_usd_total" in text


def test_decision_and_usage_row_are_recorded(gateway: GatewayThread) -> None:
    """OBS-1/OBS-2: the decision is queryable by request id and the usage row has tokens and cost."""
    c = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
    raw = c.chat.completions.with_raw_response.create(
        model="local-o/model-o", messages=[{"role": "user", "content": "one two three four"}]
    )
    rid = raw.headers["x-request-id"]
    d = httpx.get(f"{gateway.url}/api/routing/decisions/{rid}", timeout=5).json()
    assert d["served"] == "local-o/model-o@o1"
    assert d["attempts"][0]["status"] == 200
    assert d["candidates"][0]["provider"] == "local-o"
    rows = httpx.get(f"{gateway.url}/api/usage", timeout=5).json()["data"]
    row = next(r for r in rows if r["request_id"] == rid)
    assert row["prompt_tokens"] == 4 and row["completion_tokens"] == 4  # "Hello from o (model-o)."
    assert abs(row["cost_usd"] - (4 * 1.0 + 4 * 2.0) / 1_000_000) < 1e-12
    assert row["connection_id"] == "o1" and row["status"] == 200
    assert httpx.get(f"{gateway.url}/api/routing/decisions/nope", timeout=5).status_code == 404


def test_stored_decisions_leave_memory_and_are_still_served_in_full(
    make_gateway: Callable[..., GatewayThread],
) -> None:
    """OBS-2/PERF-5: once the writer has stored a decision it is no longer held in memory, and
    ``GET /api/routing/decisions/{id}`` returns the same full decision from the store."""
    gateway = make_gateway(clock=FakeClock())
    c = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
    rid = c.chat.completions.with_raw_response.create(
        model="local-o/model-o", messages=[{"role": "user", "content": "x"}]
    ).headers["x-request-id"]
    first = httpx.get(f"{gateway.url}/api/routing/decisions/{rid}", timeout=5).json()
    assert rid in gateway.gateway.decisions  # nothing is written before the writer's interval
    gateway.advance(0.25)  # the writer flushes every 0.25 s
    assert rid not in gateway.gateway.decisions, "decision never left memory"
    stored = httpx.get(f"{gateway.url}/api/routing/decisions/{rid}", timeout=5).json()
    assert stored == first
    assert stored["served"] == "local-o/model-o@o1" and stored["attempts"][0]["status"] == 200


def test_embeddings_route_to_provider(gateway: GatewayThread) -> None:
    """API-5: embeddings through the gateway, with the routing headers."""
    c = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
    raw = c.embeddings.with_raw_response.create(model="local-o/model-o", input=["hello", "world"])
    resp = raw.parse()
    assert len(resp.data) == 2 and len(resp.data[0].embedding) == 8
    assert raw.headers["x-omniroute-provider"] == "local-o"
    bad = httpx.post(f"{gateway.base_url}/embeddings", json={"model": "local-o/model-o"}, timeout=5)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "input"


def test_admin_key_protects_management_api(make_gateway: Callable[..., GatewayThread]) -> None:
    """API-8: with server.admin_key the management API needs that bearer key."""
    gw = make_gateway({"server": {"admin_key": "${ADMIN}"}}, env={"ADMIN": "adm-123"})
    assert httpx.get(f"{gw.url}/api/resilience", timeout=5).status_code == 401
    ok = httpx.get(f"{gw.url}/api/resilience", headers={"authorization": "Bearer adm-123"}, timeout=5)
    assert ok.status_code == 200


def test_keys_created_through_api_work_and_are_revocable(make_gateway: Callable[..., GatewayThread]) -> None:
    """API-8: a key created via POST /api/keys is shown once, works at once, and stops after revoke."""
    gw = make_gateway({"server": {"require_api_key": True}})
    created = httpx.post(f"{gw.url}/api/keys", json={"name": "ci"}, timeout=5).json()
    key = created["key"]
    listed = httpx.get(f"{gw.url}/api/keys", timeout=5).json()["data"]
    assert all("key" not in k and key not in str(k) for k in listed)
    body = {"model": "local-o/model-o", "messages": [{"role": "user", "content": "x"}]}
    auth = {"authorization": f"Bearer {key}"}
    assert (
        httpx.post(f"{gw.base_url}/chat/completions", json=body, headers=auth, timeout=5).status_code == 200
    )
    assert httpx.delete(f"{gw.url}/api/keys/ci", timeout=5).status_code == 200
    assert (
        httpx.post(f"{gw.base_url}/chat/completions", json=body, headers=auth, timeout=5).status_code == 401
    )


def test_connection_secrets_are_masked(gateway: GatewayThread) -> None:
    """PROV-3: secrets never appear in management output."""
    data = httpx.get(f"{gateway.url}/api/connections", timeout=5).json()["data"]
    assert data and all("sk-o1" not in str(c) for c in data)


def test_keys_cli_prints_key_once_and_it_authenticates(
    tmp_path: Path, make_gateway: Callable[..., GatewayThread]
) -> None:
    """OPS-1/API-8: `omniroute keys create` prints a key once; with require_api_key it is accepted."""
    db = f"sqlite:///{tmp_path}/omniroute.db"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"database_url: '{db}'\n")
    result = CliRunner().invoke(cli_app, ["keys", "create", "laptop", "--config", str(cfg)])
    assert result.exit_code == 0, result.output
    key = result.output.strip().splitlines()[-1]
    assert key.startswith("sk-")
    listed = CliRunner().invoke(cli_app, ["keys", "list", "--config", str(cfg)])
    assert "laptop" in listed.output and key not in listed.output
    gw = make_gateway({"server": {"require_api_key": True}})
    body = {"model": "local-o/model-o", "messages": [{"role": "user", "content": "x"}]}
    assert (
        httpx.post(
            f"{gw.base_url}/chat/completions",
            json=body,
            timeout=5,
            headers={"authorization": f"Bearer {key}"},
        ).status_code
        == 200
    )


def test_invalid_config_fails_at_start_naming_the_key(tmp_path: Path) -> None:
    """OPS-2: an invalid file stops `serve` with a message that names the key."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("resilience:\n  cooldown: {base_seconds: 3}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "omniroute.cli", "serve", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 2
    assert "resilience.cooldown.base_seconds" in proc.stdout + proc.stderr


def test_no_config_serves_simulated_providers(tmp_path: Path) -> None:
    """OPS-1: with nothing configured the gateway answers from built-in simulated providers,
    labelled simulated in /v1/models, and the sample combo works."""
    cfg = Config(server=ServerConfig(), database_url=f"sqlite:///{tmp_path}/sim.db")
    with GatewayThread(cfg) as gw:
        models = httpx.get(f"{gw.base_url}/models", timeout=5).json()["data"]
        sims = [m for m in models if m.get("simulated")]
        assert len(sims) >= 3 and all(m["owned_by"] == "simulated" for m in sims)
        assert any(m["id"] == "sim-combo" for m in models)
        c = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)
        r = c.chat.completions.create(model="sim-combo", messages=[{"role": "user", "content": "hi"}])
        assert r.choices[0].message.content
        text = "".join(
            ch.choices[0].delta.content or ""
            for ch in c.chat.completions.create(
                model="sim-fast/fast-1", messages=[{"role": "user", "content": "hi"}], stream=True
            )
            if ch.choices
        )
        assert text


def test_usage_rows_are_flushed_on_shutdown(
    tmp_path: Path, make_gateway: Callable[..., GatewayThread]
) -> None:
    """OBS-1: rows queued by the background writer are written when the gateway stops."""
    import asyncio

    from omniroute.store import Store

    gw = make_gateway()
    c = openai.OpenAI(base_url=gw.base_url, api_key="x", max_retries=0)
    ids = [
        c.chat.completions.with_raw_response.create(
            model="local-o/model-o", messages=[{"role": "user", "content": "x"}]
        ).headers["x-request-id"]
        for _ in range(5)
    ]
    gw.stop()

    async def rows() -> list[str]:
        store = await Store.open(f"sqlite:///{tmp_path}/omniroute.db", data_dir=str(tmp_path))
        try:
            return [r["request_id"] for r in await store.recent_usage(limit=50)]
        finally:
            await store.close()

    assert set(ids) <= set(asyncio.run(rows()))


def test_demo_prints_a_curl_line_that_works(tmp_path: Path) -> None:
    """OPS-1: `omniroute demo` serves simulated providers and prints a working curl line."""
    import shlex
    import time

    from omniroute.testing.gateway import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "omniroute.cli", "demo", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = ""
        deadline = time.monotonic() + 30
        while "curl" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        out = subprocess.run(shlex.split(line.strip()), capture_output=True, text=True, timeout=30)
        assert '"choices"' in out.stdout, out.stdout + out.stderr
    finally:
        proc.terminate()
        proc.wait(10)


def test_providers_and_connections_cli_list_with_masked_secrets(tmp_path: Path) -> None:
    """OPS-1/PROV-3: `omniroute providers list` and `connections list` show config objects, secrets masked."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"database_url: 'sqlite:///{tmp_path}/o.db'\n"
        "providers: [{id: mine, base_url: 'http://127.0.0.1:9/v1', models: [{id: m}]}]\n"
        "connections: [{id: c1, provider: mine, api_key: sk-very-secret-9999}]\n"
    )
    runner = CliRunner()
    out = runner.invoke(cli_app, ["providers", "list", "--config", str(cfg)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "mine" in out.output and "openai" in out.output
    out = runner.invoke(cli_app, ["connections", "list", "--config", str(cfg)], env={"COLUMNS": "200"})
    assert out.exit_code == 0 and "c1" in out.output
    assert "sk-very-secret-9999" not in out.output


def test_serve_behind_a_local_reverse_proxy_keeps_the_admin_api_loopback_only(tmp_path: Path) -> None:
    """API-8: with no admin key, a request a local reverse proxy forwards for a remote client
    (``X-Forwarded-For``) is not a loopback client, so `serve` refuses it on /api/*."""
    import time

    from omniroute.testing.gateway import free_port

    port = free_port()
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"server: {{port: {port}}}\ndatabase_url: sqlite:///{tmp_path}/o.db\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "omniroute.cli", "serve", "--config", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/api/resilience"
        deadline = time.monotonic() + 60
        while True:
            try:
                local = httpx.get(url, timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.2)
        assert local.status_code == 200
        forwarded = httpx.get(url, headers={"x-forwarded-for": "203.0.113.7"}, timeout=5)
        assert forwarded.status_code == 403
        assert forwarded.json()["error"]["code"] == "admin_loopback_only"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_running_gateway_picks_up_keys_created_and_revoked_by_the_cli_within_seconds(
    tmp_path: Path, make_gateway: Callable[..., GatewayThread]
) -> None:
    """API-8/OPS-1: `omniroute keys create/revoke` in another process write the database a running
    gateway serves from; the gateway notices within STORE_POLL_S, so a revoked key gets 401."""
    from omniroute.gateway import STORE_POLL_S

    gw = make_gateway({"server": {"require_api_key": True}}, clock=FakeClock())
    cfg = tmp_path / "cli.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/omniroute.db'\n")

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "omniroute.cli", *args, "--config", str(cfg)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "NO_COLOR": "1"},
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    body = {"model": "local-o/model-o", "messages": [{"role": "user", "content": "x"}]}

    def status(key: str) -> int:
        auth = {"authorization": f"Bearer {key}"}
        return httpx.post(f"{gw.base_url}/chat/completions", json=body, headers=auth, timeout=5).status_code

    key = cli("keys", "create", "laptop").strip().splitlines()[-1]
    assert key.startswith("sk-")
    gw.advance(STORE_POLL_S)
    assert status(key) == 200
    cli("keys", "revoke", "laptop")
    gw.advance(STORE_POLL_S)
    assert status(key) == 401
