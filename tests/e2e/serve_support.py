"""``omniroute serve`` as a real subprocess for the tests of what only a serving process does: its log
lines, several workers, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from omniroute.testing.gateway import free_port


class Served:
    """``omniroute serve --config <tmp>/config.yaml --port <free> *args``; stderr (and stdout too with
    ``with_stdout``) goes to a file (``log_path``) so a chatty process never blocks on a full pipe."""

    def __init__(
        self,
        tmp: Path,
        config: dict[str, Any],
        *args: str,
        env: dict[str, str] | None = None,
        with_stdout: bool = False,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = tmp / "config.yaml"
        cfg.write_text(yaml.safe_dump(config))
        self.log_path = tmp / "serve.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "omniroute.cli",
                "serve",
                "--config",
                str(cfg),
                "--port",
                str(self.port),
                *args,
            ],
            stdout=self._log if with_stdout else subprocess.DEVNULL,
            stderr=self._log,
            env={**os.environ, **(env or {})},
            cwd=tmp,
        )

    def wait_ready(self, timeout_s: float = 60.0) -> Served:
        """Block until ``/health/ready`` answers 200; raises with the log when the process ends first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if httpx.get(f"{self.url}/health/ready", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"serve never became ready:\n{self.log_text()}")

    def terminate(self, timeout_s: float = 60.0) -> int:
        """SIGTERM, then wait for the exit; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        finally:
            self._log.close()

    def kill(self) -> None:
        """End the process whatever its state (test clean-up)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def json_lines(self) -> list[dict[str, Any]]:
        """Every stderr line parsed as JSON (fails on a line that is not)."""
        return [json.loads(line) for line in self.log_text().splitlines() if line.strip()]
