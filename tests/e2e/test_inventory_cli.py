"""``omniroute providers add`` and ``omniroute connections add``: the same checks as the management API,
secrets from an environment variable or a hidden prompt (never argv), and a connection added this way
serves requests of a running gateway."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
from typer.testing import CliRunner, Result

from omniroute.cli.main import app as cli_app
from omniroute.clock import FakeClock
from omniroute.config import load_config
from omniroute.gateway import STORE_POLL_S
from omniroute.testing import FakeProviderThread
from omniroute.testing.gateway import GatewayThread


def _cli(cfg: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Result:
    return CliRunner().invoke(
        cli_app, [*args, "--config", str(cfg)], env={"COLUMNS": "200", **(env or {})}, input=stdin
    )


def _chat(gw: GatewayThread, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{gw.base_url}/chat/completions", json=body, timeout=10)


def test_connection_added_with_a_key_from_the_environment_serves_a_running_gateway(
    tmp_path: Path,
    make_gateway: Callable[..., GatewayThread],
    fakes: dict[str, FakeProviderThread],
) -> None:
    gw = make_gateway(clock=FakeClock())
    cfg = tmp_path / "cli.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/omniroute.db'\n")
    assert _chat(gw, "newp/m1").status_code == 404
    out = _cli(
        cfg, "providers", "add", "newp", "--base-url", f"{fakes['c'].base_url}/v1", "--model",
        "m1,input_price=1,output_price=2,context_window=8000",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    out = _cli(cfg, "connections", "add", "n1", "--provider", "newp", "--api-key-env", "NEWP_KEY",
               env={"NEWP_KEY": "sk-from-env-4242"})  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "sk-from-env-4242" not in out.output
    listed = _cli(cfg, "connections", "list")
    assert "n1" in listed.output and "sk-from-env-4242" not in listed.output
    gw.advance(STORE_POLL_S)  # the running gateway's store watch sees the new rows
    fakes["c"].reset()
    served = _chat(gw, "newp/m1")
    assert served.status_code == 200, served.text
    assert served.headers["x-omniroute-connection"] == "n1"
    assert fakes["c"].requests[-1].headers["authorization"] == "Bearer sk-from-env-4242"
    providers = {p["id"]: p for p in httpx.get(f"{gw.url}/api/providers", timeout=10).json()["data"]}
    assert providers["newp"]["connected"] is True


def test_api_key_from_a_hidden_prompt_is_not_echoed(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/o.db'\n")
    with FakeProviderThread(name="remote") as fake:
        # a host name with dots is not a local endpoint: a key is asked for
        url = fake.base_url.replace("127.0.0.1", "remote.example.test")
        assert _cli(cfg, "providers", "add", "remote", "--base-url", f"{url}/v1").exit_code == 0
        out = _cli(cfg, "connections", "add", "r1", "--provider", "remote", stdin="sk-typed-7777\n")
        assert out.exit_code == 0, out.output
        assert "API key" in out.output and "sk-typed-7777" not in out.output
        assert "…7777" in _cli(cfg, "connections", "list").output


def test_a_local_provider_takes_a_connection_without_a_key_that_serves_requests(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/o.db'\n")
    with FakeProviderThread(name="llama") as fake:
        out = _cli(
            cfg, "providers", "add", "llamacpp", "--base-url", f"{fake.base_url}/v1", "--model", "smol"
        )
        assert out.exit_code == 0, out.output
        out = _cli(cfg, "connections", "add", "local", "--provider", "llamacpp")  # no prompt: local
        assert out.exit_code == 0 and "without an API key" in out.output, out.output
        with GatewayThread(load_config(cfg)) as gw:
            served = _chat(gw, "llamacpp/smol")
            assert served.status_code == 200 and served.headers["x-omniroute-connection"] == "local"
            assert "authorization" not in fake.requests[-1].headers
            auto = _chat(gw, "auto")
            assert auto.status_code == 200 and auto.headers["x-omniroute-connection"] == "local", auto.text
            api = httpx.Client(base_url=gw.url, timeout=10)
            r = api.post("/api/connections", json={"id": "local2", "provider": "llamacpp"})
            assert r.status_code == 201, r.text


def test_invalid_input_is_refused_naming_the_field(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/o.db'\n")
    cases = [
        (("providers", "add", "p1"), "base_url: required"),
        (("providers", "add", "p1", "--base-url", "ftp://x"), "base_url: "),
        (("providers", "add", "p1", "--base-url", "http://h/v1", "--format", "acme"), "format: "),
        (("providers", "add", "p1", "--base-url", "http://h/v1", "--model", "m,input_price=-1"),
         "models[0].input_price"),
        (("connections", "add", "c1", "--provider", "nope", "--no-prompt"), "unknown provider 'nope'"),
        (("connections", "add", "c1", "--provider", "openai", "--priority", "high"), "priority: "),
        (("connections", "add", "c1", "--provider", "openai", "--no-prompt"), "api_key: required"),
        (("connections", "add", "c1", "--provider", "openai", "--api-key-env", "UNSET_KEY_VAR"),
         "UNSET_KEY_VAR is not set"),
    ]  # fmt: skip
    for args, expected in cases:
        out = _cli(cfg, *args)
        assert out.exit_code == 2, (args, out.output)
        assert expected in " ".join(out.output.split()), (args, out.output)
    listed = _cli(cfg, "connections", "list")
    assert "c1" not in listed.output
