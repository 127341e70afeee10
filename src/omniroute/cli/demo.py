"""``omniroute demo``: the gateway with simulated providers and a sample combo (OPS-1)."""

from __future__ import annotations

import tempfile


def run_demo(host: str, port: int) -> None:
    """Serve on ``host:port`` with a throw-away SQLite database (removed on exit) and print a working
    curl line."""
    with tempfile.TemporaryDirectory(prefix="omniroute-demo-") as tmp:
        _serve(host, port, tmp)


def _serve(host: str, port: int, tmp: str) -> None:
    import uvicorn

    from omniroute.app import create_app
    from omniroute.config import Config, ServerConfig
    from omniroute.simulated import SAMPLE_COMBO

    cfg = Config(server=ServerConfig(host=host, port=port), database_url=f"sqlite:///{tmp}/demo.db")
    app = create_app(cfg)
    print(
        f"OmniRoute demo: simulated providers, sample combo '{SAMPLE_COMBO}'. Try:\n"
        f"  curl -s http://{host}:{port}/v1/chat/completions -H 'Content-Type: application/json' "
        f'-d \'{{"model": "{SAMPLE_COMBO}", "messages": [{{"role": "user", "content": "Hello"}}]}}\'\n'
        f"  curl -s http://{host}:{port}/v1/models\n",
        flush=True,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
