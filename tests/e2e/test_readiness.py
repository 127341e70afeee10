"""A database unreachable at start-up: the gateway runs, answers 503 (readiness included) and starts
once the database answers, instead of failing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from conftest import base_config, merge
from omniroute.clock import FakeClock
from omniroute.config import config_from_dict
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread, free_port

PG_URL = os.environ.get("OMNIROUTE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
PG_HOST, PG_PORT = "127.0.0.1", 5432


class Forwarder:
    """A TCP forwarder on ``port`` to PostgreSQL, listening only once :meth:`open` is called: the
    database address that is unreachable first and answers later."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.server: socket.socket | None = None

    def open(self) -> None:
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self.server is not None
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection((PG_HOST, PG_PORT))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


async def _pg(sql: str) -> None:
    conn = await asyncpg.connect(PG_URL, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
def schema() -> Iterator[str]:
    try:
        socket.create_connection((PG_HOST, PG_PORT), timeout=2).close()
    except OSError as exc:
        pytest.skip(f"PostgreSQL unreachable: {exc}")
    name = f"omniroute_ready_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg(f'CREATE SCHEMA "{name}"'))
    yield name
    asyncio.run(_pg(f'DROP SCHEMA "{name}" CASCADE'))


def test_an_unreachable_database_at_start_means_503_until_it_answers(
    tmp_path: Path, fakes: dict[str, FakeProviderThread], schema: str
) -> None:
    forwarder = Forwarder(free_port())
    url = f"postgresql://postgres@127.0.0.1:{forwarder.port}/test?options=-csearch_path%3D{schema}"
    config = config_from_dict(merge(base_config(fakes, tmp_path), {"database_url": url}), env={})
    gw = GatewayThread(config, clock=FakeClock()).start()  # the server runs although the database is down
    try:
        ready = httpx.get(f"{gw.url}/health/ready", timeout=10)
        assert ready.status_code == 503 and ready.json()["database"] is False
        assert httpx.get(f"{gw.url}/health", timeout=10).status_code == 200
        chat = {"model": "local-o/model-o", "messages": [{"role": "user", "content": "hi"}]}
        refused = httpx.post(f"{gw.base_url}/chat/completions", json=chat, timeout=10)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "database_unavailable"
        assert refused.headers["retry-after"] == "2" and refused.headers["x-request-id"]
        assert httpx.get(f"{gw.url}/api/combos", timeout=10).status_code == 503

        gw.advance(2)  # a retry while the database is still down changes nothing
        assert httpx.get(f"{gw.url}/health/ready", timeout=10).status_code == 503

        forwarder.open()
        gw.advance(2)
        gw.call(_until_started)
        ready = httpx.get(f"{gw.url}/health/ready", timeout=10)
        assert ready.status_code == 200 and ready.json()["database"] is True
        served = httpx.post(f"{gw.base_url}/chat/completions", json=chat, timeout=10)
        assert served.status_code == 200 and served.headers["x-omniroute-provider"] == "local-o"
    finally:
        gw.stop()
        forwarder.close()


async def _until_started(gw: object) -> None:
    """Wait on the gateway's loop for the start-up attempt the clock woke to finish."""
    app_waiting = [t for t in asyncio.all_tasks() if t.get_name() == "wait-for-database"]
    if app_waiting:
        await asyncio.wait(app_waiting)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # uvicorn's exit
def test_a_database_file_that_cannot_be_created_still_stops_the_start(
    tmp_path: Path, fakes: dict[str, FakeProviderThread]
) -> None:
    """Only a database server that does not answer is waited for; a local problem is reported at once."""
    url = "sqlite:////proc/omniroute-cannot-write-here/gw.db"
    config = config_from_dict(merge(base_config(fakes, tmp_path), {"database_url": url}), env={})
    gw = GatewayThread(config)
    with pytest.raises(RuntimeError, match="did not start"):
        gw.start(timeout_s=30)
    assert gw.app.waiting is None
