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


def test_keys_create_refuses_a_negative_budget_as_the_api_does(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    out = _cli(cfg, "keys", "create", "cli4", "--budget", "-1")
    assert out.exit_code == 2, out.output
    assert "--budget: Input should be greater than or equal to 0" in " ".join(out.output.split())
    assert "cli4" not in _cli(cfg, "keys", "list").output


def test_keys_update_error_has_no_pydantic_prefix(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert _cli(cfg, "keys", "create", "k1").exit_code == 0
    out = _cli(cfg, "keys", "update", "k1", "--expires", "tomorrow")
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert "--expires: must be epoch seconds or an ISO 8601 date-time" in text
    assert "Value error" not in text


def test_revoking_an_already_revoked_key_says_so(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert _cli(cfg, "keys", "create", "k1").exit_code == 0
    first = _cli(cfg, "keys", "revoke", "k1")
    assert first.exit_code == 0 and "Revoked 'k1'" in first.output
    again = _cli(cfg, "keys", "revoke", "k1")
    assert again.exit_code == 1
    assert "already revoked" in again.output


def test_connections_add_priority_is_an_integer_option(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    helptext = " ".join(_cli(cfg, "connections", "add", "--help").output.split())
    assert "--priority <int>" in helptext and "<str>" not in helptext.split("--priority")[1][:40]
    out = _cli(cfg, "connections", "add", "x1", "--provider", "openai", "--priority", "high")
    assert out.exit_code == 2 and "priority: 'high' is not an integer" in out.output


def test_simulate_refuses_an_unknown_variant(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        cli_app,
        ["simulate", "--scenario", "outage", "--limit", "20", "--compare", "priority,bogus-strategy",
         "--no-progress"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert out.exit_code == 2, out.output
    assert "unknown variant 'bogus-strategy'" in out.output
    assert "%" not in out.output  # nothing was replayed


def test_adding_a_provider_under_a_taken_alias_names_it_once(tmp_path: Path) -> None:
    out = _cli(_config(tmp_path), "providers", "add", "gem", "--base-url", "http://127.0.0.1:9/v1")
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert text.count("provider 'gem'") == 1, text
    assert "alias of 'gemini'" in text


def test_connection_added_through_a_provider_alias_says_which_provider(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    out = CliRunner().invoke(
        cli_app,
        [
            "connections",
            "add",
            "gem-1",
            "--provider",
            "gem",
            "--api-key-env",
            "GEM_KEY",
            "--config",
            str(cfg),
        ],
        env={"COLUMNS": "200", "GEM_KEY": "k-123"},
    )
    assert out.exit_code == 0, out.output
    assert "provider 'gemini' ('gem' is its alias)" in " ".join(out.output.split())
    listed = " ".join(_cli(cfg, "connections", "list").output.split())
    assert "gem-1" in listed and "gemini" in listed
