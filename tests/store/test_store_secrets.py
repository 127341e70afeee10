"""Secrets at rest (PROV-3): key resolution, the 0600 key file, masking, and a wrong key."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import text

from omniroute.store import SecretKeyMismatch, SecretKeyMissing, Store, mask
from omniroute.store.models import store_meta
from omniroute.store.secrets import KEY_FILE_NAME, key_file_path, load_secret_box
from omniroute.values import Connection

SECRET = "sk-proj-live-0123456789abcdefXYZ9"


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMNIROUTE_SECRET_KEY", raising=False)


async def test_key_file_is_created_0600_next_to_the_sqlite_db(tmp_path: Path) -> None:
    """PROV-3: without a configured key, ``secret.key`` is generated beside the database, mode 0600."""
    url = f"sqlite:///{tmp_path}/data/omniroute.db"
    s = await Store.open(url)
    await s.upsert_connection(Connection(id="c", provider="openai", api_key=SECRET))
    await s.close()
    key_file = tmp_path / "data" / KEY_FILE_NAME
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    Fernet(key_file.read_bytes().strip())  # a valid Fernet key
    again = await Store.open(url)  # the same file is reused: secrets still decrypt
    try:
        c = await again.get_connection("c")
        assert c is not None and c.api_key == SECRET
    finally:
        await again.close()


def test_key_file_location_rules(tmp_path: Path) -> None:
    """data_dir wins, else the SQLite folder, else ~/.omniroute."""
    assert (
        key_file_path(sqlite_path=tmp_path / "a.db", data_dir=str(tmp_path / "d"))
        == tmp_path / "d" / KEY_FILE_NAME
    )
    assert key_file_path(sqlite_path=tmp_path / "a.db", data_dir=None) == tmp_path / KEY_FILE_NAME
    assert key_file_path(sqlite_path=None, data_dir=None) == Path.home() / ".omniroute" / KEY_FILE_NAME


def test_env_key_wins_over_the_key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("OMNIROUTE_SECRET_KEY", key)
    box = load_secret_box(data_dir=str(tmp_path))
    assert box.source == "OMNIROUTE_SECRET_KEY"
    assert not (tmp_path / KEY_FILE_NAME).exists()
    assert Fernet(key.encode()).decrypt(box.encrypt("x").encode()) == b"x"


def test_malformed_key_is_rejected_with_a_hint() -> None:
    with pytest.raises(ValueError, match="Fernet"):
        load_secret_box(secret_key="not-a-key")


def test_key_rotation_old_key_still_decrypts() -> None:
    """Comma-separated keys: the first encrypts, every one decrypts."""
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    token = load_secret_box(secret_key=old).encrypt("secret")
    rotated = load_secret_box(secret_key=f"{new},{old}")
    assert rotated.decrypt(token) == "secret"
    assert load_secret_box(secret_key=new).decrypt(rotated.encrypt("s2")) == "s2"


async def test_wrong_key_raises_secret_key_mismatch(db_url: str, tmp_path: Path) -> None:
    """PROV-3: reading secrets written under another key names the env var to fix."""
    s = await Store.open(db_url, secret_key=Fernet.generate_key().decode())
    await s.upsert_connection(Connection(id="c", provider="openai", api_key=SECRET))
    await s.close()
    with pytest.raises(SecretKeyMismatch, match="OMNIROUTE_SECRET_KEY"):
        await Store.open(db_url, secret_key=Fernet.generate_key().decode())


async def test_missing_key_with_stored_secrets_stops_start_and_creates_no_key_file(tmp_path: Path) -> None:
    """PROV-3: a lost key file is never replaced by a new key while secrets are stored; start-up stops
    naming the environment variable and the key file."""
    url = f"sqlite:///{tmp_path}/omniroute.db"
    s = await Store.open(url)
    await s.upsert_connection(Connection(id="c", provider="openai", api_key=SECRET))
    await s.close()
    key_file = tmp_path / KEY_FILE_NAME
    key_file.unlink()
    with pytest.raises(SecretKeyMissing, match="OMNIROUTE_SECRET_KEY") as err:
        await Store.open(url)
    assert str(key_file) in str(err.value)
    assert not key_file.exists()


async def test_other_key_is_refused_at_start_even_with_no_secret_left(db_url: str) -> None:
    """PROV-3: the key's fingerprint is stored, so another key is refused at start before it writes a
    secret the other replicas could not read."""
    key = Fernet.generate_key().decode()
    s = await Store.open(db_url, secret_key=key)
    await s.close()
    with pytest.raises(SecretKeyMismatch, match="OMNIROUTE_SECRET_KEY"):
        await Store.open(db_url, secret_key=Fernet.generate_key().decode())
    again = await Store.open(db_url, secret_key=f"{Fernet.generate_key().decode()},{key}")  # rotation list
    await again.close()


async def test_database_without_a_fingerprint_is_checked_by_decrypting_and_then_recorded(db_url: str) -> None:
    """PROV-3: a database written before fingerprints were kept accepts its own key (and records it)
    and refuses another."""
    key = Fernet.generate_key().decode()
    s = await Store.open(db_url, secret_key=key)
    await s.upsert_connection(Connection(id="c", provider="openai", api_key=SECRET))
    async with s.engine.begin() as conn:
        await conn.execute(store_meta.delete())
    await s.close()
    with pytest.raises(SecretKeyMismatch):
        await Store.open(db_url, secret_key=Fernet.generate_key().decode())
    s = await Store.open(db_url, secret_key=key)
    async with s.engine.connect() as conn:
        assert len((await conn.execute(store_meta.select())).all()) == 1
    await s.close()


async def test_secret_is_encrypted_in_the_raw_column(store: Store) -> None:
    """PROV-3: the database never holds the plaintext credential."""
    await store.upsert_connection(
        Connection(id="c", provider="x", auth_type="oauth", access_token="tok-0123456789abcdefgh")
    )
    await store.upsert_connection(Connection(id="d", provider="openai", api_key=SECRET))
    async with store.engine.connect() as conn:
        rows = (await conn.execute(text("SELECT api_key_enc, access_token_enc FROM connections"))).all()
    raw = " ".join(str(v) for row in rows for v in row)
    assert SECRET not in raw and "tok-0123456789abcdefgh" not in raw
    assert "0123456789" not in raw


@pytest.mark.parametrize(
    ("secret", "masked"),
    [
        ("sk-proj-abcdefghijkl1234", "sk-proj-…1234"),
        ("sk-abcdefghijklmnop9876", "sk-…9876"),
        ("randomsecretvalue42", "…ue42"),
        ("short", "…"),
        ("sk-short1234", "…1234"),
        (None, ""),
        ("", ""),
    ],
)
def test_mask_shows_at_most_the_last_four(secret: str | None, masked: str) -> None:
    """PROV-3: masked secrets keep only a public vendor prefix and at most 4 trailing characters."""
    assert mask(secret) == masked


@pytest.mark.parametrize(
    "key",
    [
        Fernet.generate_key(),
        b"too-short",
        b"!" * 44,
        Fernet.generate_key()[:-2],
        Fernet.generate_key().replace(b"=", b""),
        b"A" * 43 + b"=",
        b"",
    ],
)
def test_key_check_accepts_exactly_what_fernet_accepts(key: bytes) -> None:
    """Keys are checked without importing ``cryptography`` (PERF-5), to Fernet's own rule."""
    from omniroute.store.secrets import _is_fernet_key

    try:
        Fernet(key)
        fernet_ok = True
    except ValueError:
        fernet_ok = False
    assert _is_fernet_key(key) is fernet_ok


def test_generated_keys_are_fernet_keys() -> None:
    from omniroute.store.secrets import generate_key

    box = load_secret_box(ephemeral=True)
    assert box.decrypt(box.encrypt(SECRET)) == SECRET
    Fernet(generate_key())


def test_cryptography_is_imported_on_the_first_secret_only(tmp_path: Path) -> None:
    """PERF-5: resolving (even generating) the key file loads no ``cryptography``; encrypting does."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from omniroute.store.secrets import load_secret_box\n"
        f"box = load_secret_box(sqlite_path=Path({str(tmp_path / 'x.db')!r}))\n"
        "print('cryptography' in sys.modules)\n"
        "box.decrypt(box.encrypt('x'))\n"
        "print('cryptography' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "True"]
    assert (tmp_path / KEY_FILE_NAME).exists()


async def test_rotation_is_all_or_nothing_and_moves_the_fingerprint(db_url: str) -> None:
    """PROV-3: rotating re-encrypts every secret in one transaction; a secret the current key cannot
    read aborts it with nothing changed, and after a rotation only the new key opens the store."""
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    s = await Store.open(db_url, secret_key=old)
    await s.upsert_connection(Connection(id="a", provider="openai", api_key=SECRET))
    await s.upsert_connection(Connection(id="b", provider="openai", access_token="tok-b", auth_type="oauth"))
    stranger = load_secret_box(secret_key=Fernet.generate_key().decode()).encrypt("x")
    async with s.engine.begin() as conn:
        await conn.execute(text("UPDATE connections SET api_key_enc = :t WHERE id = 'b'"), {"t": stranger})
    with pytest.raises(SecretKeyMismatch):
        await s.rotate_secrets(load_secret_box(secret_key=new))
    a = await s.get_connection("a")
    assert a is not None and a.api_key == SECRET  # still under the old key
    async with s.engine.begin() as conn:
        await conn.execute(text("UPDATE connections SET api_key_enc = NULL WHERE id = 'b'"))
    assert await s.rotate_secrets(load_secret_box(secret_key=new)) == 2
    await s.close()
    with pytest.raises(SecretKeyMismatch):
        await Store.open(db_url, secret_key=old)
    s = await Store.open(db_url, secret_key=new)
    try:
        conns = {c.id: c for c in await s.list_connections()}
        assert conns["a"].api_key == SECRET and conns["b"].access_token == "tok-b"
    finally:
        await s.close()
