"""Processes under test: start pinned to a CPU, wait until they listen, read their CPU time and RSS
from ``/proc``, stop them (only the ones we started, by process group id).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository root (``bench`` is importable from here)."""
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

SERVER_CPU = 0
"""The CPU the server under test is pinned to."""
LOAD_CPU = 1
"""The CPU of the upstream, the load generator and this harness."""


def can_pin() -> bool:
    """Pinning needs ``taskset`` and at least two CPUs we may use."""
    return shutil.which("taskset") is not None and len(os.sched_getaffinity(0)) >= 2


def pin_self(cpu: int) -> bool:
    """Pin this (harness) process to ``cpu``; children started without ``taskset`` inherit it."""
    try:
        os.sched_setaffinity(0, {cpu})
        return True
    except OSError:
        return False


SHIELD_NICE = -10
"""Priority of every benchmark process when we may raise it (root): other work on the machine (a
test suite, say) then takes CPU from the measurement far less."""


def shield(pid: int = 0, nice: int = SHIELD_NICE) -> bool:
    """Raise ``pid``'s priority: its nice value and, with the kernel's autogroup scheduling on (each
    session shares CPU fairly with every other session whatever the nice values inside), its session's
    autogroup nice value. Best effort; ``False`` when not permitted."""
    pid = pid or os.getpid()
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError:
        return False
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Block until ``127.0.0.1:port`` accepts connections; raise if ``proc`` dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout_s:g}s")


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out.extend(int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(_children(p))
    return seen


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and its descendants, in seconds (``/proc/<pid>/stat`` fields 14, 15)."""
    total = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{p}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def rss_bytes(pid: int) -> int:
    """Resident set size of ``pid`` and its descendants (``/proc/<pid>/statm``)."""
    total = 0
    for p in process_tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * PAGE
    return total


def cpu_busy_seconds(cpu: int) -> float:
    """Seconds CPU ``cpu`` spent not idle since boot (``/proc/stat``), whoever ran on it."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith(f"cpu{cpu} "):
                v = [int(x) for x in line.split()[1:]]
                return (sum(v[:8]) - v[3] - v[4]) / CLK_TCK
    return 0.0


class Server:
    """A child process (in its own session), optionally pinned to one CPU with ``taskset``."""

    def __init__(
        self,
        name: str,
        cmd: Sequence[str],
        *,
        port: int | None,
        cpu: int | None,
        env: Mapping[str, str] | None = None,
        log_dir: Path,
        ready_timeout_s: float = 60.0,
    ) -> None:
        self.name = name
        self.cmd = list(cmd)
        self.port = port
        self.cpu = cpu
        self.env = {**os.environ, **(env or {})}
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), self.env.get("PYTHONPATH")) if p)
        self.log_path = log_dir / f"{name}.log"
        self.ready_timeout_s = ready_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.shielded = False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        prefix = ["taskset", "-c", str(self.cpu)] if self.cpu is not None else []
        log = self.log_path.open("ab")
        # taskset execs the command, so the pid we get is the server's own.
        self.proc = subprocess.Popen(
            [*prefix, *self.cmd],
            stdout=subprocess.PIPE if self.port is None else log,
            stderr=log,
            env=self.env,
            cwd=ROOT,
            start_new_session=True,
        )
        log.close()
        self.shielded = shield(self.proc.pid)
        if self.port is None:
            # The server picks its own port and prints "READY <port>".
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline().decode()
            if not line.startswith("READY "):
                self.stop()
                raise RuntimeError(f"{self.name} did not start: {line!r}; see {self.log_path}")
            self.port = int(line.split()[1])
        try:
            wait_port(self.port, self.ready_timeout_s, self.proc)
        except Exception:
            self.stop()
            raise RuntimeError(f"{self.name} did not start; log: {self.log_path}\n{self.tail()}") from None
        return self

    def tail(self, n: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        return ""

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        return rss_bytes(self.pid)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the process group we created, then SIGKILL it if it lingers."""
        if self.proc is None or self.proc.poll() is not None:
            return
        pgid = self.proc.pid  # start_new_session=True → the child leads its own group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def python() -> str:
    """This interpreter (the project venv's when run as ``.venv/bin/python -m bench``)."""
    return sys.executable
