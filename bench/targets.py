"""The configurations under test and how to start them: (a) direct to the upstream, (b) the bare proxy,
(c) the gateway (``provider/model``, a 3-target priority combo, ``auto`` over 50 connections) with auth,
usage logging and routing headers on, (d) LiteLLM's proxy in its own virtual environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.procs import SERVER_CPU, Server, free_port

GATEWAY_KEY = "sk-bench-client-key"
LITELLM_KEY = "sk-bench-litellm-master"
POOL = 50
"""Connections in the gateway config: the ``auto`` pool size (one candidate per active connection)."""
LITELLM_VENV = Path(
    os.environ.get("OMNIROUTE_BENCH_LITELLM_VENV", "~/.cache/omniroute/bench-litellm")
).expanduser()
LITELLM_SPEC = os.environ.get("OMNIROUTE_BENCH_LITELLM_SPEC", "litellm[proxy]")
GATEWAY_SRC = os.environ.get("OMNIROUTE_BENCH_GATEWAY_SRC", "")
"""A ``src`` directory to import the gateway from instead of this checkout's (before/after runs)."""


@dataclass(frozen=True)
class Route:
    """One configuration row of the report: where to send, which model, which headers."""

    label: str
    server: str  # direct | bare | gateway | litellm
    model: str
    stamp_model: str
    headers: dict[str, str] = field(default_factory=dict)


DIRECT = Route("direct", "direct", "m", "stamp")
BARE = Route("bare", "bare", "m", "stamp")
GW_MODEL = Route("gw-model", "gateway", "bench-p00/m", "bench-p00/stamp",
                 {"Authorization": f"Bearer {GATEWAY_KEY}"})
GW_COMBO = Route("gw-combo", "gateway", "bench-combo", "bench-combo",
                 {"Authorization": f"Bearer {GATEWAY_KEY}"})
GW_AUTO = Route("gw-auto", "gateway", "auto", "auto", {"Authorization": f"Bearer {GATEWAY_KEY}"})
LITELLM = Route("litellm", "litellm", "bench-m", "bench-stamp", {"Authorization": f"Bearer {LITELLM_KEY}"})
ALL_ROUTES = (DIRECT, BARE, GW_MODEL, GW_COMBO, GW_AUTO, LITELLM)
GATEWAY_ROUTES = (GW_MODEL, GW_COMBO, GW_AUTO)

LABELS = {
    "direct": "(a) direct",
    "bare": "(b) bare proxy",
    "gw-model": "(c) gateway provider/model",
    "gw-combo": "(c) gateway 3-target combo",
    "gw-auto": "(c) gateway auto (50)",
    "litellm": "(d) LiteLLM",
}


def gateway_config(upstream: str, port: int, tmp: Path) -> dict[str, object]:
    """Auth on (one key), usage logging (always on), SQLite in ``tmp``; 50 providers with one
    connection each on the same upstream; ``bench-combo`` = priority over the first three."""
    providers = [
        {
            "id": f"bench-p{i:02d}",
            "format": "openai",
            "base_url": f"{upstream}/v1",
            "models": [
                {"id": "m", "input_price": 1.0 + i / 100, "output_price": 2.0, "context_window": 128000,
                 "max_output_tokens": 8192, "capabilities": ["tools"]},
                {"id": "stamp", "input_price": 1.0, "output_price": 2.0, "context_window": 128000,
                 "max_output_tokens": 8192},
            ],
        }
        for i in range(POOL)
    ]
    providers[0]["models"].append(  # type: ignore[union-attr]
        {"id": "long", "input_price": 1.0, "output_price": 2.0, "context_window": 128000,
         "max_output_tokens": 8192})  # the 200-chunk stream of the per-chunk cost (bench/scale.py)
    connections = [
        {"id": f"c{i:02d}", "provider": f"bench-p{i:02d}", "api_key": f"sk-up-{i:02d}",
         "default_model": "m", "priority": i + 1}
        for i in range(POOL)
    ]
    return {
        "server": {"host": "127.0.0.1", "port": port, "require_api_key": True},
        "database_url": f"sqlite:///{tmp}/omniroute-bench.db",
        "api_keys": [{"name": "bench", "key": GATEWAY_KEY}],
        "providers": providers,
        "connections": connections,
        "combos": [
            {"name": "bench-combo", "strategy": "priority", "description": "benchmark: 3-target priority",
             "targets": [{"model": f"bench-p{i:02d}/m"} for i in range(3)]},
        ],
        "resilience": {"timeouts": {"connect_s": 5, "ttft_s": 30, "idle_s": 30, "total_s": 60}},
    }


def gateway_server(
    upstream: str, tmp: Path, log_dir: Path, cpu: int | None = SERVER_CPU, *,
    extra: dict[str, Any] | None = None,
) -> Server:
    """``omniroute serve --config`` (one worker, uvloop + httptools, access log off). ``extra``:
    ``redis_url`` (shared state on Redis) and ``workers`` (worker processes) for the scale rows."""
    port = free_port()
    cfg = tmp / "gateway.yaml"
    doc = gateway_config(upstream, port, tmp)
    extra = dict(extra or {})
    if "workers" in extra:
        doc["server"]["workers"] = extra.pop("workers")  # type: ignore[index]
    doc.update(extra)
    cfg.write_text(yaml.safe_dump(doc, sort_keys=False))
    for old in tmp.glob("omniroute-bench.db*"):
        old.unlink()
    cmd = [sys.executable, "-c", "from omniroute.cli.main import main; main()", "serve", "--config", str(cfg)]
    env = {"OMNIROUTE_LOG_LEVEL": "WARNING"}
    if GATEWAY_SRC:  # measure another checkout's gateway (e.g. the tree before a tuning change)
        env["PYTHONPATH"] = GATEWAY_SRC
    return Server("gateway", cmd, port=port, cpu=cpu, log_dir=log_dir, env=env)


def bare_server(upstream: str, log_dir: Path, cpu: int | None = SERVER_CPU) -> Server:
    port = free_port()
    cmd = [sys.executable, "-m", "bench.bare_proxy", "--port", str(port), "--upstream", upstream]
    return Server("bare", cmd, port=port, cpu=cpu, log_dir=log_dir)


def upstream_server(log_dir: Path, cpu: int | None, stamp_interval_ms: float = 2.0) -> Server:
    cmd = [sys.executable, "-m", "bench.upstream", "--port", "0",
           "--stamp-interval-ms", str(stamp_interval_ms)]
    return Server("upstream", cmd, port=None, cpu=cpu, log_dir=log_dir)


# -- LiteLLM ---------------------------------------------------------------------------------------------


def ensure_litellm(log: object = print) -> Path | None:
    """LiteLLM's proxy in its own venv (never the project's); returns the ``litellm`` CLI or ``None``."""
    exe = LITELLM_VENV / "bin" / "litellm"
    if exe.exists():
        return exe
    say = log if callable(log) else print
    say(f"installing {LITELLM_SPEC} into {LITELLM_VENV} (once; reused afterwards) …")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(LITELLM_VENV)], check=True)
        pip = str(LITELLM_VENV / "bin" / "pip")
        subprocess.run([pip, "install", "-q", "--upgrade", "pip"], check=True, timeout=600)
        subprocess.run([pip, "install", "-q", LITELLM_SPEC], check=True, timeout=1800)
    except (subprocess.SubprocessError, OSError) as exc:
        say(f"LiteLLM could not be installed: {exc}")
        return None
    return exe if exe.exists() else None


def litellm_version() -> str | None:
    py = LITELLM_VENV / "bin" / "python"
    if not py.exists():
        return None
    out = subprocess.run(
        [str(py), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True, text=True, check=False,
    )
    return out.stdout.strip() or None


def litellm_config(upstream: str) -> dict[str, object]:
    """Two model names on the same upstream; every callback, spend log and DB feature off."""
    params = {"api_base": f"{upstream}/v1", "api_key": "sk-up-litellm"}
    return {
        "model_list": [
            {"model_name": "bench-m", "litellm_params": {"model": "openai/m", **params}},
            {"model_name": "bench-stamp", "litellm_params": {"model": "openai/stamp", **params}},
        ],
        "litellm_settings": {
            "callbacks": [],
            "success_callback": [],
            "failure_callback": [],
            "set_verbose": False,
            "json_logs": False,
            "turn_off_message_logging": True,
            "drop_params": True,
            "telemetry": False,
        },
        "general_settings": {
            "master_key": LITELLM_KEY,
            "disable_spend_logs": True,
            "disable_error_logs": True,
            "disable_adding_master_key_hash_to_db": True,
            "allow_requests_on_db_unavailable": True,
        },
    }


def litellm_server(
    exe: Path, upstream: str, tmp: Path, log_dir: Path, cpu: int | None = SERVER_CPU
) -> Server:
    port = free_port()
    cfg = tmp / "litellm.yaml"
    cfg.write_text(yaml.safe_dump(litellm_config(upstream), sort_keys=False))
    cmd = [str(exe), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    env = {
        "LITELLM_MASTER_KEY": LITELLM_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "DISABLE_SCHEMA_UPDATE": "True",
        "DATABASE_URL": "",
    }
    env = {k: v for k, v in env.items() if v} | {"NO_DOCS": "True"}
    server = Server("litellm", cmd, port=port, cpu=cpu, log_dir=log_dir, env=env, ready_timeout_s=180)
    server.env.pop("DATABASE_URL", None)
    return server
