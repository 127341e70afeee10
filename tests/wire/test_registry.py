"""The wire-format registry (PROV-1): the gateway's routes, the valid provider formats (config,
management API) and the docs all come from :data:`omniroute.wire.FORMATS`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from omniroute.app import create_app
from omniroute.cli.main import app as cli_app
from omniroute.config import config_from_dict
from omniroute.errors import InvalidRequest
from omniroute.testing.gateway import GatewayThread
from omniroute.wire import FORMATS, upstream_formats
from omniroute.wire.base import Route, WireFormat

README = Path(__file__).resolve().parents[2] / "README.md"
PATTERN_SAMPLES = {"gemini": "/v1beta/models/local-o/model-o:generateContent"}
"""A concrete path for each format whose routes are path patterns."""
KNOWN = ", ".join(upstream_formats())


def _route_paths() -> list[tuple[WireFormat, str]]:
    """``(format, path)`` for every client route: each exact path, and a sample of each pattern."""
    out: list[tuple[WireFormat, str]] = []
    for fmt in FORMATS:
        routes: tuple[Route, ...] = fmt.client.routes if fmt.client is not None else ()
        for route in routes:
            out += [(fmt, p) for p in route.paths]
            if route.pattern is not None:
                assert fmt.name in PATTERN_SAMPLES, f"add a sample path of {fmt.name}'s route pattern"
                sample = PATTERN_SAMPLES[fmt.name]
                assert route.pattern.match(sample), sample
                out.append((fmt, sample))
    return out


@pytest.mark.parametrize(("fmt", "path"), _route_paths(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_registered_route_answers_a_bad_body_in_its_own_error_shape(
    gateway: GatewayThread, fmt: WireFormat, path: str
) -> None:
    """API-6: each route the registry lists is served, and a body that is not a JSON object is a 400
    naming ``body`` in that format's error shape."""
    assert fmt.client is not None
    r = httpx.post(f"{gateway.url}{path}", content=b"[]", headers={"content-type": "application/json"})
    expected = fmt.client.error_body(InvalidRequest("The request body must be a JSON object.", param="body"))
    assert (r.status_code, r.json()) == (400, expected)


async def test_an_unknown_provider_format_stops_the_start_naming_the_key(tmp_path: Path) -> None:
    """OPS-2/PROV-1: ``providers[].format`` is checked against the registry where the gateway starts:
    start-up fails with the key, the bad value and the known formats, before anything is stored."""
    db = tmp_path / "omniroute.db"
    config = config_from_dict(
        {
            "database_url": f"sqlite:///{db}",
            "providers": [{"id": "p", "format": "foo", "base_url": "http://127.0.0.1:9/v1"}],
        },
        env={},
    )
    app = create_app(config)
    sent: list[dict[str, Any]] = []
    inbox = [{"type": "lifespan.startup"}]

    async def receive() -> dict[str, Any]:
        return inbox.pop(0)

    async def send(msg: Any) -> None:
        sent.append(dict(msg))

    await app({"type": "lifespan"}, receive, send)
    assert sent == [
        {
            "type": "lifespan.startup.failed",
            "message": f"providers[0].format: unknown wire format 'foo' (known: {KNOWN})",
        }
    ]
    assert not db.exists()


def test_the_management_api_accepts_only_registered_provider_formats(gateway: GatewayThread) -> None:
    """PROV-1/API-6: ``POST /api/providers`` with a format the registry does not know is a 400 naming
    ``format`` and the known formats."""
    r = httpx.post(
        f"{gateway.url}/api/providers",
        json={"id": "p9", "format": "grpc", "base_url": "http://127.0.0.1:1/v1"},
        timeout=10,
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "format"
    assert f"unknown wire format 'grpc' (known: {KNOWN})" in r.json()["error"]["message"]


def test_readme_lists_every_upstream_format_and_client_route() -> None:
    """The operator docs list what the registry holds: the ``format`` values of a provider and every
    client route under ``/v1``."""
    text = README.read_text(encoding="utf-8")
    listed = re.search(r"format: \w+ +# (.+)", text)
    assert listed is not None and sorted(listed.group(1).split(" | ")) == list(upstream_formats())
    for _, path in _route_paths():
        if path.startswith("/v1/"):
            assert path in text, path


def test_cli_commands_reject_an_unknown_provider_format_naming_the_key(tmp_path: Path) -> None:
    """OPS-1/OPS-2: every CLI command checks the config's provider formats as ``serve`` does: exit 2
    with the key named, before anything is stored."""
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"database_url: 'sqlite:///{tmp_path}/omniroute.db'\n"
        "providers: [{id: p, format: foo, base_url: 'http://127.0.0.1:9/v1'}]\n"
    )
    result = CliRunner().invoke(cli_app, ["providers", "list", "--config", str(cfg)])
    assert result.exit_code == 2
    output = " ".join(result.output.split())  # the console wraps long lines
    assert f"providers[0].format: unknown wire format 'foo' (known: {KNOWN})" in output
    assert not (tmp_path / "omniroute.db").exists()
