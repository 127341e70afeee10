"""The public surface is pinned (DESIGN house style 12) and importing opens no sockets (style 8)."""

from __future__ import annotations

import subprocess
import sys


def test_public_names_are_pinned() -> None:
    import omniroute

    assert all(callable(getattr(omniroute, n)) for n in omniroute.__all__)
    assert sorted(omniroute.__all__) == [
        "Config",
        "ConfigError",
        "Gateway",
        "GatewayError",
        "OmniRouteApp",
        "create_app",
        "load_config",
    ]


def test_import_opens_no_sockets() -> None:
    code = (
        "import socket\n"
        "def boom(*a, **k):\n    raise AssertionError('socket opened at import')\n"
        "socket.socket.connect = boom\nsocket.create_connection = boom\n"
        "import omniroute, omniroute.app, omniroute.cli.main\nprint('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
