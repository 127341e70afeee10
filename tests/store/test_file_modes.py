"""The SQLite database holds conversations and key hashes: the gateway creates its folder 0700 and
the database, ``-wal`` and ``-shm`` files 0600, whatever the umask allows others."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import httpx

from omniroute.testing.gateway import GatewayThread


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_database_files_and_folder_are_private(
    make_gateway: Callable[..., GatewayThread], tmp_path: Path
) -> None:
    folder = tmp_path / "fresh" / "data"
    old = os.umask(0o022)  # the common default, which leaves new files world-readable
    try:
        gw = make_gateway({"database_url": f"sqlite:///{folder}/gw.db"})
    finally:
        os.umask(old)
    body = {"model": "local-o/model-o", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=10).status_code == 200
    assert httpx.get(f"{gw.url}/api/usage", timeout=10).json()["data"], "a usage row was written"
    assert mode(folder) == 0o700
    files = [folder / name for name in ("gw.db", "gw.db-wal", "gw.db-shm")]
    assert all(f.exists() for f in files), sorted(p.name for p in folder.iterdir())
    assert {f.name: oct(mode(f)) for f in files} == {f.name: "0o600" for f in files}
