"""``omniroute demo``: the gateway with simulated providers and a sample combo (OPS-1)."""

from __future__ import annotations

import os
import tempfile


def run_demo(host: str, port: int) -> None:
    """Serve on ``host:port`` with a throw-away SQLite database and print a working curl line."""
    import uvicorn

    from omniroute.app import create_app
    from omniroute.config import Config, ServerConfig
    from omniroute.simulated import SAMPLE_COMBO

    tmp = tempfile.mkdtemp(prefix="omniroute-demo-")
    cfg = Config(server=ServerConfig(host=host, port=port), database_url=f"sqlite:///{tmp}/demo.db")
    app = create_app(cfg)
    os.environ.setdefault("OMNIROUTE_DEMO", "1")
    print(
        f"OmniRoute demo: simulated providers, sample combo '{SAMPLE_COMBO}'. Try:\n"
        f"  curl -s http://{host}:{port}/v1/chat/completions -H 'Content-Type: application/json' "
        f'-d \'{{"model": "{SAMPLE_COMBO}", "messages": [{{"role": "user", "content": "Hello"}}]}}\'\n'
        f"  curl -s http://{host}:{port}/v1/models\n",
        flush=True,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
