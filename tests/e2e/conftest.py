"""Shared e2e fixtures: a real local model (llama.cpp's ``llama-server`` serving SmolLM2-135M-Instruct,
built from registry packages by ``scripts/build-llama-server.sh``) for the real-model and agent tests."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from omniroute.testing.gateway import free_port

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


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
