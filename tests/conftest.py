"""Shared fixtures: fake providers as real HTTP servers, gateways served by uvicorn on 127.0.0.1, and a real
local model (llama.cpp's ``llama-server`` serving SmolLM2-135M-Instruct, built from registry packages by
``scripts/build-llama-server.sh``) for the real-model and agent tests."""

from __future__ import annotations

import copy
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from omniroute.clock import Clock
from omniroute.config import config_from_dict
from omniroute.extensions import Extensions
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread, free_port

ROOT = Path(__file__).resolve().parents[1]
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
FAKE_NAMES = ("o", "c", "g")

MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "o": {
        "id": "model-o",
        "input_price": 1.0,
        "output_price": 2.0,
        "context_window": 128000,
        "max_output_tokens": 16384,
        "capabilities": ["tools", "vision"],
        "tier": "standard",
    },
    "c": {
        "id": "model-c",
        "input_price": 0.5,
        "output_price": 1.0,
        "context_window": 200000,
        "max_output_tokens": 8192,
        "capabilities": ["tools"],
        "tier": "standard",
    },
    "g": {
        "id": "model-g",
        "input_price": 0.1,
        "output_price": 0.4,
        "context_window": 1000000,
        "max_output_tokens": 8192,
        "capabilities": ["tools", "vision"],
        "tier": "free",
    },
}


@pytest.fixture(scope="session")
def fakes() -> Iterator[dict[str, FakeProviderThread]]:
    """Three OpenAI/Anthropic/Gemini-speaking fake providers O, C, G (real sockets)."""
    fs = {n: FakeProviderThread(name=n) for n in FAKE_NAMES}
    for f in fs.values():
        f.start()
    yield fs
    for f in fs.values():
        f.stop()


def base_config(fakes: dict[str, FakeProviderThread], tmp: Path) -> dict[str, Any]:
    """Providers local-o/c/g (OpenAI format) with one connection each (o1, c1, g1)."""
    return {
        "database_url": f"sqlite:///{tmp}/omniroute.db",
        "providers": [
            {
                "id": f"local-{n}",
                "format": "openai",
                "base_url": f"{f.base_url}/v1",
                "models": [MODEL_DEFAULTS[n]],
            }
            for n, f in fakes.items()
        ],
        "connections": [
            {
                "id": f"{n}1",
                "provider": f"local-{n}",
                "api_key": f"sk-{n}1",
                "priority": i + 1,
                "default_model": MODEL_DEFAULTS[n]["id"],
            }
            for i, n in enumerate(fakes)
        ],
        "resilience": {"timeouts": {"connect_s": 2, "ttft_s": 5, "idle_s": 3, "total_s": 30}},
    }


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``extra`` into a copy of ``base`` (lists are replaced)."""
    out = copy.deepcopy(base)
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


@pytest.fixture
def make_gateway(
    tmp_path: Path, fakes: dict[str, FakeProviderThread]
) -> Iterator[Callable[..., GatewayThread]]:
    """``make_gateway(extra_config=None, env=None, clock=None, extensions=None)`` → a started gateway
    in front of the fakes (on ``clock``, e.g. a :class:`~omniroute.clock.FakeClock`; default the
    process clock; with ``extensions`` passed to ``create_app``)."""
    started: list[GatewayThread] = []
    for f in fakes.values():
        f.reset()

    def make(
        extra: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        replace: dict[str, Any] | None = None,
        clock: Clock | None = None,
        extensions: Extensions | None = None,
    ) -> GatewayThread:
        data = replace if replace is not None else merge(base_config(fakes, tmp_path), extra or {})
        gt = GatewayThread(config_from_dict(data, env=env or {}), clock=clock, extensions=extensions).start()
        started.append(gt)
        return gt

    yield make
    for g in started:
        g.stop()


@pytest.fixture
def gateway(make_gateway: Callable[..., GatewayThread]) -> GatewayThread:
    """A gateway with the default three-provider config."""
    return make_gateway()


def llama_cache() -> Path:
    """The build cache; builds llama-server and fetches the model when missing (minutes, once)."""
    cache = Path(os.environ.get("OMNIROUTE_LLAMA_CACHE") or Path.home() / ".cache/omniroute/llama")
    if not (cache / "bin/llama-server").exists() or not (cache / MODEL_FILE).exists():
        subprocess.run(
            ["bash", str(ROOT / "scripts/build-llama-server.sh")],
            check=True,
            env={**os.environ, "OMNIROUTE_LLAMA_CACHE": str(cache)},
        )
    return cache


@pytest.fixture(scope="session")
def llama_url() -> Iterator[str]:
    """A running llama-server on 127.0.0.1 (``--jinja``), stopped after the session."""
    cache = llama_cache()
    port = free_port()
    proc = subprocess.Popen(
        [
            str(cache / "bin/llama-server"),
            "-m",
            str(cache / MODEL_FILE),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--jinja",
            "-c",
            "4096",
            "-t",
            "2",
            "--no-webui",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(
                f"llama-server exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}"
            )
        time.sleep(0.3)
    else:
        proc.kill()
        raise RuntimeError("llama-server did not become healthy within 120 s")
    yield url
    proc.terminate()
    proc.wait(10)
