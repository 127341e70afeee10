"""Usage rows and decisions survive a database that refuses writes: a batch the database cannot take
goes to an on-disk spool (0600) and is written once the database works again, after a restart or a
``kill -9`` too."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from omniroute.clock import FakeClock
from omniroute.config import config_from_dict
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread, free_port

MSGS = [{"role": "user", "content": "hi"}]
N = 20


def count(db: Path, table: str) -> int:
    with sqlite3.connect(db, timeout=30) as c:
        return int(c.execute(f"select count(*) from {table}").fetchone()[0])


def hold_write_lock(db: Path) -> sqlite3.Connection:
    """Another connection holding SQLite's write lock (as another process writing would)."""
    c = sqlite3.connect(db, timeout=30, isolation_level=None)
    c.execute("BEGIN IMMEDIATE")
    return c


def eventually(check: Callable[[], bool], step: Callable[[], Any], tries: int = 40) -> None:
    """Run ``step`` (e.g. advance the fake clock) until ``check`` holds; fail after ``tries``."""
    for _ in range(tries):
        if check():
            return
        step()
    assert check()


@pytest.fixture
def fake() -> Iterator[FakeProviderThread]:
    with FakeProviderThread(name="acct") as f:
        yield f


def config(tmp_path: Path, fake: FakeProviderThread) -> dict[str, Any]:
    return {
        "database_url": f"sqlite:///{tmp_path}/gw.db",
        "providers": [{"id": "p", "base_url": f"{fake.base_url}/v1", "models": [{"id": "m"}]}],
        "connections": [{"id": "c", "provider": "p", "api_key": "k"}],
    }


def test_rows_survive_a_write_lock_held_by_another_process(tmp_path: Path, fake: FakeProviderThread) -> None:
    db = tmp_path / "gw.db"
    gw = GatewayThread(config_from_dict(config(tmp_path, fake), env={}), clock=FakeClock()).start()
    try:
        lock = hold_write_lock(db)
        with httpx.Client(base_url=gw.url, timeout=30) as c:
            for _ in range(N):
                assert (
                    c.post("/v1/chat/completions", json={"model": "p/m", "messages": MSGS}).status_code == 200
                )
            spool = tmp_path / "spool" / "usage.jsonl"
            eventually(
                lambda: gw.gateway.usage is not None and gw.gateway.usage.spooled == N, lambda: gw.advance(1)
            )
            assert stat.S_IMODE(spool.stat().st_mode) == 0o600
            metrics = c.get("/metrics").text
            assert f'omniroute_accounting_spool_rows{{writer="usage"}} {N}.0' in metrics
            lock.rollback()
            lock.close()
            eventually(
                lambda: count(db, "usage_log") == N and count(db, "routing_decisions") == N,
                lambda: gw.advance(6),
            )
            assert not spool.exists()
            assert 'omniroute_accounting_spool_rows{writer="usage"} 0.0' in c.get("/metrics").text
    finally:
        gw.stop()


def test_rows_spooled_at_shutdown_are_written_at_the_next_start(
    tmp_path: Path, fake: FakeProviderThread
) -> None:
    db = tmp_path / "gw.db"
    cfg = config_from_dict(config(tmp_path, fake), env={})
    gw = GatewayThread(cfg, clock=FakeClock()).start()
    lock = hold_write_lock(db)
    with httpx.Client(base_url=gw.url, timeout=30) as c:
        for _ in range(N):
            c.post("/v1/chat/completions", json={"model": "p/m", "messages": MSGS})
    gw.stop()  # the final flush meets the lock: the rows stay on disk
    assert (tmp_path / "spool" / "usage.jsonl").exists()
    lock.rollback()
    lock.close()
    assert count(db, "usage_log") == 0
    again = GatewayThread(cfg, clock=FakeClock()).start()
    try:
        eventually(
            lambda: count(db, "usage_log") == N and count(db, "routing_decisions") == N,
            lambda: again.advance(1),
        )
    finally:
        again.stop()


def wait_for(proc: subprocess.Popen[bytes], check: Callable[[], bool], tries: int = 300) -> bool:
    """Poll ``check`` every 0.1 s while ``proc`` runs (at most ``tries`` times); its last result."""
    for _ in range(tries):
        if check() or proc.poll() is not None:
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.1)
    return check()


def serve(cfg_file: Path, port: int) -> subprocess.Popen[bytes]:
    """``omniroute serve`` in its own process, once it answers ``/health``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "omniroute.cli", "serve", "--config", str(cfg_file), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def healthy() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    if not wait_for(proc, healthy):
        proc.kill()
        raise AssertionError("the gateway did not start")
    return proc


def chats(port: int, n: int) -> None:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
        for _ in range(n):
            r = c.post("/v1/chat/completions", json={"model": "p/m", "messages": MSGS})
            assert r.status_code == 200


def test_spooled_rows_survive_kill_9(tmp_path: Path, fake: FakeProviderThread) -> None:
    """A gateway process killed with SIGKILL while the database is locked loses no spooled row."""
    db = tmp_path / "gw.db"
    cfg_file = tmp_path / "omniroute.yaml"
    cfg_file.write_text(yaml.safe_dump(config(tmp_path, fake)))
    port = free_port()
    spool = tmp_path / "spool" / "usage.jsonl"

    def spooled() -> int:
        return sum(1 for line in spool.read_bytes().splitlines() if line.strip()) if spool.exists() else 0

    proc = serve(cfg_file, port)
    lock = None
    try:
        chats(port, 1)
        lock = hold_write_lock(db)
        chats(port, N)
        assert wait_for(proc, lambda: spooled() >= N), "the writer spools once the busy timeout gives up"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if lock is not None:
            lock.rollback()
            lock.close()
        if proc.poll() is None:
            proc.kill()
    proc = serve(cfg_file, port)
    try:
        assert wait_for(proc, lambda: count(db, "usage_log") >= N + 1)
        assert count(db, "usage_log") == N + 1
    finally:
        proc.terminate()
        proc.wait(timeout=20)
