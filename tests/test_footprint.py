"""PERF-5 (≤ 120 MB RSS at rest): a started gateway does not load the optional heavy libraries it does
not use — Alembic when the schema is current or new, the Redis client without ``redis_url``, and
``cryptography`` while no secret is encrypted or decrypted, and Jinja2 until a console page is served."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_HEAVY = ("alembic", "redis", "cryptography", "rich", "jinja2")

_CODE = """
import json, sys, urllib.request
from omniroute.config import Config, ServerConfig
from omniroute.testing.gateway import GatewayThread

cfg = Config(server=ServerConfig(), database_url=sys.argv[1])
for _ in range(2):  # a new database, then a restart on the same one
    with GatewayThread(cfg) as gw:
        assert urllib.request.urlopen(gw.url + "/health/ready", timeout=10).status == 200
print(json.dumps({m: m in sys.modules for m in sys.argv[2:]}))
"""


def test_started_gateway_leaves_unused_heavy_libraries_unloaded(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CODE, f"sqlite:///{tmp_path}/g.db", *_HEAVY],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == dict.fromkeys(_HEAVY, False)
