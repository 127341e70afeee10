"""What the ``omniroute`` command shows a person: ``--version`` and help texts free of the team's
internal requirement ids (operators never see ``API-8`` or ``PROV-2``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import typer
from typer.testing import CliRunner

from omniroute import __version__
from omniroute.cli.main import app

REQUIREMENT_ID = re.compile(
    r"\b(?:API|PROV|RES|RESIL|COMBO|AUTO|OBS|OPS|STORE|BEYOND|PERF|SEC|MONEY|FID)-\d+[a-z]?\b"
)


def _command_paths(command: object, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for name, sub in getattr(command, "commands", {}).items():
        yield from _command_paths(sub, (*prefix, name))


def test_version_flag_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"omniroute {__version__}"


def test_no_help_text_shows_an_internal_requirement_id() -> None:
    root = typer.main.get_command(app)
    paths = list(_command_paths(root))
    assert len(paths) > 10  # every command group and command is walked
    for path in paths:
        result = CliRunner().invoke(app, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output)
        found = REQUIREMENT_ID.findall(result.output)
        assert not found, f"omniroute {' '.join(path)} --help shows {found}"


def test_openapi_document_shows_no_internal_requirement_id() -> None:
    """``/openapi.json`` and ``/docs`` are read by operators: endpoint and model descriptions leave the
    team's requirement ids out (the docstrings keep them for the code's readers)."""
    import orjson

    from omniroute.app import create_app
    from omniroute.config import Config

    text = orjson.dumps(create_app(Config()).admin.openapi()).decode()
    assert '"paths"' in text
    assert not REQUIREMENT_ID.findall(text)
