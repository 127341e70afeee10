"""Safe operations (OPS-1, PROV-3): ``omniroute doctor`` checks the config, the database, the secret key
and upstream reachability without writing the database or creating a key file; ``omniroute secrets
rotate`` re-encrypts the stored secrets with a new key."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from omniroute.app import OmniRouteApp, create_app
from omniroute.cli.main import app as cli_app
from omniroute.config import load_config
from omniroute.gateway import Gateway
from omniroute.store import SecretKeyMismatch, Store
from omniroute.testing.fake_provider import FakeProviderThread
from omniroute.testing.gateway import GatewayThread

SECRET = "sk-doctor-secret-123456"
OTHER_KEY = "Zm9yLXRlc3RzLW9ubHktMzItYnl0ZXMtbG9uZy1rZXk="  # 32 bytes, not the store's key


@pytest.fixture
def upstream() -> Iterator[FakeProviderThread]:
    fake = FakeProviderThread(name="doc")
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def config(tmp_path: Path, upstream: FakeProviderThread, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OMNIROUTE_SECRET_KEY", raising=False)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"database_url: 'sqlite:///{tmp_path}/data/o.db'\n"
        f"providers: [{{id: mine, base_url: '{upstream.base_url}/v1', models: [{{id: m}}]}}]\n"
        f"connections: [{{id: c1, provider: mine, api_key: {SECRET}}}]\n"
    )
    return cfg


def _start_and_stop_gateway(cfg: Path) -> None:
    async def run() -> None:
        gw = Gateway(load_config(cfg))
        await gw.start()
        await gw.stop()

    asyncio.run(run())


def _doctor(cfg: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    out = CliRunner().invoke(cli_app, ["doctor", "--config", str(cfg)], env={"COLUMNS": "300", **(env or {})})
    return out.exit_code, out.output


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_doctor_checks_everything_and_leaves_database_and_key_file_untouched(
    config: Path, upstream: FakeProviderThread, tmp_path: Path
) -> None:
    """OPS-1: a healthy setup passes every check; the data folder is byte-for-byte and mtime the same."""
    _start_and_stop_gateway(config)
    before = _files(tmp_path / "data")
    assert "secret.key" in before
    code, output = _doctor(config)
    assert code == 0, output
    assert "schema" in output and "decrypts 1 stored secret(s)" in output
    assert f"GET {upstream.base_url}/v1/models → 200" in output
    listed = [r for r in upstream.requests if r.method == "GET" and r.path == "/v1/models"]
    assert listed and listed[0].headers["authorization"] == f"Bearer {SECRET}"
    assert _files(tmp_path / "data") == before


def test_doctor_never_creates_a_key_file_and_fails_naming_the_key_setting(
    config: Path, tmp_path: Path
) -> None:
    """OPS-1: with stored secrets and the key file gone, doctor fails and names how to give the key,
    and no new key file appears."""
    _start_and_stop_gateway(config)
    (tmp_path / "data" / "secret.key").unlink()
    before = _files(tmp_path / "data")
    code, output = _doctor(config)
    assert code == 1, output
    assert "OMNIROUTE_SECRET_KEY" in output and "secret.key" in output
    assert _files(tmp_path / "data") == before


def test_doctor_reports_a_key_that_cannot_decrypt_the_stored_secrets(config: Path, tmp_path: Path) -> None:
    """OPS-1: another key in the environment is reported as a mismatch; nothing is re-encrypted."""
    _start_and_stop_gateway(config)
    before = _files(tmp_path / "data")
    code, output = _doctor(config, {"OMNIROUTE_SECRET_KEY": OTHER_KEY})
    assert code == 1, output
    assert "cannot be decrypted" in output
    assert _files(tmp_path / "data") == before


def test_doctor_before_the_first_start_creates_no_database_and_no_key(config: Path, tmp_path: Path) -> None:
    """OPS-1: no database yet is a warning (the first start creates it); doctor creates nothing."""
    code, output = _doctor(config)
    assert code == 0, output
    assert "no database yet" in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml"]


def test_doctor_fails_on_an_unreachable_upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """OPS-1: a connection whose server does not answer fails the run with the address."""
    monkeypatch.delenv("OMNIROUTE_SECRET_KEY", raising=False)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"database_url: 'sqlite:///{tmp_path}/o.db'\n"
        "providers: [{id: gone, base_url: 'http://127.0.0.1:9/v1', models: [{id: m}]}]\n"
        "connections: [{id: g1, provider: gone, api_key: sk-x}]\n"
    )
    code, output = _doctor(cfg)
    assert code == 1, output
    assert "gone/g1" in output and "127.0.0.1:9" in output


def test_doctor_reports_another_key_even_with_no_secret_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPS-1/PROV-3: the stored key fingerprint tells doctor the key is not the store's one."""
    monkeypatch.delenv("OMNIROUTE_SECRET_KEY", raising=False)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"database_url: 'sqlite:///{tmp_path}/data/o.db'\n")
    _start_and_stop_gateway(cfg)
    code, output = _doctor(cfg, {"OMNIROUTE_SECRET_KEY": OTHER_KEY})
    assert code == 1, output
    assert "cannot be decrypted" in output


def test_secrets_rotate_reencrypts_with_a_generated_key_that_replaces_the_key_file(
    config: Path, tmp_path: Path
) -> None:
    """PROV-3: `omniroute secrets rotate` prints the new key once, writes it to the key file, and the
    store opens with it (fingerprint updated) and still decrypts the secret; the old key is refused."""
    _start_and_stop_gateway(config)
    key_file = tmp_path / "data" / "secret.key"
    old_key = key_file.read_text().strip()
    out = CliRunner().invoke(cli_app, ["secrets", "rotate", "--config", str(config)], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    new_key = key_file.read_text().strip()
    assert new_key != old_key and new_key in out.output and "1 connection(s)" in out.output

    async def reopen(key: str | None) -> str | None:
        store = await Store.open(f"sqlite:///{tmp_path}/data/o.db", secret_key=key)
        try:
            conn = await store.get_connection("c1")
            return None if conn is None else conn.api_key
        finally:
            await store.close()

    assert asyncio.run(reopen(None)) == SECRET
    with pytest.raises(SecretKeyMismatch):
        asyncio.run(reopen(old_key))


def test_secrets_rotate_to_a_key_from_the_environment(config: Path, tmp_path: Path) -> None:
    """PROV-3: OMNIROUTE_NEW_SECRET_KEY is the key rotated to; the key file is left alone."""
    _start_and_stop_gateway(config)
    key_file = tmp_path / "data" / "secret.key"
    before = key_file.read_bytes()
    out = CliRunner().invoke(
        cli_app,
        ["secrets", "rotate", "--config", str(config)],
        env={"COLUMNS": "300", "OMNIROUTE_NEW_SECRET_KEY": OTHER_KEY},
    )
    assert out.exit_code == 0, out.output
    assert OTHER_KEY not in out.output and "OMNIROUTE_SECRET_KEY" in out.output
    assert key_file.read_bytes() == before

    async def reopen() -> str | None:
        store = await Store.open(f"sqlite:///{tmp_path}/data/o.db", secret_key=OTHER_KEY)
        try:
            conn = await store.get_connection("c1")
            return None if conn is None else conn.api_key
        finally:
            await store.close()

    assert asyncio.run(reopen()) == SECRET


def test_reload_applies_an_edited_config_file_and_refuses_an_invalid_one(
    tmp_path: Path, upstream: FakeProviderThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPS-2: `POST /api/reload` re-reads the file: a key added to it works without a restart; a file
    with an unknown provider is refused with the reason and the running config keeps serving."""
    monkeypatch.delenv("OMNIROUTE_SECRET_KEY", raising=False)
    cfg = tmp_path / "cfg.yaml"
    base = (
        f"database_url: 'sqlite:///{tmp_path}/o.db'\n"
        "server: {require_api_key: true}\n"
        f"providers: [{{id: mine, base_url: '{upstream.base_url}/v1', models: [{{id: m}}]}}]\n"
        "connections: [{id: c1, provider: mine, api_key: sk-up}]\n"
    )
    cfg.write_text(base + "api_keys: [{name: first, key: sk-client-first}]\n")
    gw = GatewayThread(load_config(cfg))
    gw.start()
    try:

        def chat(key: str) -> int:
            body = {"model": "mine/m", "messages": [{"role": "user", "content": "hi"}]}
            headers = {"Authorization": f"Bearer {key}"}
            return httpx.post(
                f"{gw.base_url}/chat/completions", json=body, headers=headers, timeout=10
            ).status_code

        assert chat("sk-client-second") == 401
        cfg.write_text(
            base + "api_keys: [{name: first, key: sk-client-first}, {name: second, key: sk-client-second}]\n"
        )
        r = httpx.post(f"{gw.url}/api/reload", timeout=10)
        assert r.status_code == 200, r.text
        assert chat("sk-client-second") == 200

        cfg.write_text(base.replace("provider: mine", "provider: nowhere"))
        r = httpx.post(f"{gw.url}/api/reload", timeout=10)
        assert r.status_code == 400
        assert "connections[0].provider" in r.json()["error"]["message"]
        assert chat("sk-client-second") == 200
    finally:
        gw.stop()


def test_sighup_reloads_the_config_file_and_an_invalid_one_is_logged_and_kept_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """OPS-2: SIGHUP to `omniroute serve` re-reads the config file (instead of ending the process); an
    invalid file is logged and the running config kept."""
    monkeypatch.delenv("OMNIROUTE_SECRET_KEY", raising=False)
    cfg = tmp_path / "cfg.yaml"
    base = f"database_url: 'sqlite:///{tmp_path}/o.db'\n"
    cfg.write_text(base + "api_keys: [{name: first, key: sk-client-first}]\n")

    async def hup(app: OmniRouteApp) -> None:
        os.kill(os.getpid(), signal.SIGHUP)
        while not app.reloads:  # the loop's signal wake-up schedules the reload
            await asyncio.sleep(0)
        await asyncio.gather(*app.reloads)

    async def run() -> tuple[list[str], list[str]]:
        app = create_app(load_config(cfg), reload_on_sighup=True)
        await app.start()
        try:
            cfg.write_text(base + "api_keys: [{name: first, key: sk-a}, {name: second, key: sk-b}]\n")
            await hup(app)
            after_good = [k.name for k in app.gateway.config.api_keys]
            cfg.write_text(base + "connections: [{id: c, provider: nowhere}]\n")
            await hup(app)
            return after_good, [k.name for k in app.gateway.config.api_keys]
        finally:
            await app.stop()

    after_good, after_bad = asyncio.run(run())
    assert after_good == ["first", "second"]
    assert after_bad == ["first", "second"]
    assert "configuration not reloaded" in caplog.text and "connections[0].provider" in caplog.text


def test_doctor_on_an_in_memory_database_warns_and_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPS-1: an in-memory database has nothing to check; doctor says so without failing."""
    monkeypatch.delenv("OMNIROUTE_SECRET_KEY", raising=False)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("database_url: 'sqlite://'\n")
    code, output = _doctor(cfg)
    assert code == 0, output
    assert "in memory" in output


def test_a_stream_in_flight_finishes_across_a_reload(
    tmp_path: Path, upstream: FakeProviderThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPS-2: a reload swaps the routing snapshot under a running stream, which finishes whole."""
    monkeypatch.delenv("OMNIROUTE_SECRET_KEY", raising=False)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"database_url: 'sqlite:///{tmp_path}/o.db'\n"
        f"providers: [{{id: mine, base_url: '{upstream.base_url}/v1',"
        " models: [{id: 'm+slow-ttft-300'}]}]\n"
        "connections: [{id: c1, provider: mine, api_key: sk-up}]\n"
    )
    gw = GatewayThread(load_config(cfg))
    gw.start()
    try:
        body = {
            "model": "mine/m+slow-ttft-300",
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        }
        with httpx.stream("POST", f"{gw.base_url}/chat/completions", json=body, timeout=30) as stream:
            assert stream.status_code == 200  # headers are out; the first content chunk is still held back
            assert httpx.post(f"{gw.url}/api/reload", timeout=10).status_code == 200
            text = "".join(stream.iter_text())
        assert "[DONE]" in text and '"content"' in text
    finally:
        gw.stop()
