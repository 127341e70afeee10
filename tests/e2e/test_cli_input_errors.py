"""Bad CLI input (unwritable or unreadable files, out-of-range options, unknown variants) ends with a
one-line message and exit status 2, never a Python traceback."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from omniroute.cli.main import app as cli_app


def _cli(cfg: Path, *args: str) -> Result:
    return CliRunner().invoke(cli_app, [*args, "--config", str(cfg)], env={"COLUMNS": "200"})


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "cli.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/omniroute.db'\n")
    return cfg


def test_usage_export_to_a_missing_directory_is_a_one_line_error(tmp_path: Path) -> None:
    target = tmp_path / "nonexistent-dir" / "x.jsonl"
    out = _cli(_config(tmp_path), "usage", "export", str(target))
    assert out.exit_code == 2, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)
    assert "Traceback" not in out.output
    assert f"Cannot write {target}" in " ".join(out.output.split())


def test_combos_create_from_a_missing_or_invalid_json_file_is_a_one_line_error(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    missing = tmp_path / "nonexistent.json"
    out = _cli(cfg, "combos", "create", "c1", "--json", str(missing))
    assert out.exit_code == 2, out.output
    assert isinstance(out.exception, SystemExit)
    assert "Cannot read" in out.output and "Traceback" not in out.output
    bad = tmp_path / "bad.json"
    bad.write_text("{bad")
    out = _cli(cfg, "combos", "create", "c1", "--json", str(bad))
    assert out.exit_code == 2, out.output
    assert "not valid JSON" in out.output
    arr = tmp_path / "arr.json"
    arr.write_text("[1, 2]")
    out = _cli(cfg, "combos", "create", "c1", "--json", str(arr))
    assert out.exit_code == 2, out.output
    assert "JSON object" in out.output
