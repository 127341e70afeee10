"""Secrets at rest (PROV-3): the Fernet key, encryption of connection credentials, and masking.

The key comes, in order, from the ``secret_key`` argument, the ``OMNIROUTE_SECRET_KEY`` environment
variable, or a generated key file ``secret.key`` (mode 0600) in the data directory — next to the SQLite
database, or ``~/.omniroute/`` for other databases. Several comma-separated keys may be given to rotate:
the first encrypts, every one decrypts (``cryptography``'s ``MultiFernet``). An in-memory SQLite
database with no configured key gets an ephemeral key (its data dies with the process anyway).

``cryptography`` (several MB of resident memory) is imported on the first encryption or decryption, not
at start-up: keys are checked and generated with the standard library, to the same rule as
``Fernet(key)`` (32 bytes in URL-safe base64) and as ``Fernet.generate_key()`` (PERF-5).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from omniroute.store.errors import SECRET_KEY_ENV, SecretKeyMismatch

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

__all__ = [
    "KEY_FILE_NAME",
    "SecretBox",
    "existing_secret_box",
    "generate_key",
    "key_file_path",
    "load_secret_box",
    "mask",
    "parse_keys",
    "replace_key_file",
]

log = logging.getLogger(__name__)

KEY_FILE_NAME = "secret.key"
_HOME_DIR = Path("~/.omniroute")
# Public, fixed vendor prefixes: showing them reveals nothing secret and tells the operator which key it is.
_KNOWN_PREFIXES = (
    "sk-or-v1-",
    "sk-proj-",
    "sk-ant-",
    "sk-or-",
    "sk-",
    "gsk_",
    "xai-",
    "pplx-",
    "nvapi-",
    "csk-",
    "fw_",
    "hf_",
    "r8_",
    "AIza",
)
_MASK_MIN_LEN_FOR_TAIL = 12
_MASK_TAIL = 4
_GENERATE_HINT = (
    'generate one with: python -c "from cryptography.fernet import Fernet; '
    'print(Fernet.generate_key().decode())"'
)


_FERNET_KEY_BYTES = 32
_FINGERPRINT_PURPOSE = b"omniroute secret key fingerprint"


def generate_key() -> bytes:
    """A new Fernet key: 32 random bytes in URL-safe base64 (what ``Fernet.generate_key()`` returns)."""
    return base64.urlsafe_b64encode(os.urandom(_FERNET_KEY_BYTES))


def _is_fernet_key(key: bytes) -> bool:
    """Whether ``Fernet(key)`` would accept ``key``: it decodes (URL-safe base64) to exactly 32 bytes."""
    try:
        return len(base64.urlsafe_b64decode(key)) == _FERNET_KEY_BYTES
    except (binascii.Error, ValueError):
        return False


class SecretBox:
    """Encrypts and decrypts credentials with one or more Fernet keys (first key encrypts).

    The ``MultiFernet`` is built on first use, so a process that never touches a secret never imports
    ``cryptography``.
    """

    __slots__ = ("_fernet", "_keys", "source")

    def __init__(self, keys: list[bytes], *, source: str) -> None:
        if not keys:
            raise ValueError("at least one secret key is required")
        for k in keys:
            if not _is_fernet_key(k):
                raise ValueError("Fernet key must be 32 url-safe base64-encoded bytes.")
        self._keys = tuple(keys)
        self._fernet: MultiFernet | None = None
        self.source = source

    def _cipher(self) -> MultiFernet:
        if self._fernet is None:
            from cryptography.fernet import Fernet, MultiFernet

            self._fernet = MultiFernet([Fernet(k) for k in self._keys])
        return self._fernet

    def encrypt(self, plaintext: str) -> str:
        """Fernet token (URL-safe base64 text) for ``plaintext``."""
        return self._cipher().encrypt(plaintext.encode()).decode("ascii")

    def derive(self, purpose: bytes) -> bytes:
        """A 32-byte key for ``purpose`` (HMAC-SHA256 of the encrypting key), so other signers share
        the secret every worker and replica already has without reusing the Fernet key itself."""
        return hmac.new(self._keys[0], purpose, hashlib.sha256).digest()

    def fingerprints(self) -> tuple[str, ...]:
        """A short public identifier of each key, encrypting key first: the first 16 hex digits of
        HMAC-SHA256(key, ``b"omniroute secret key fingerprint"``). Stored in the database to recognise
        the key its secrets were written with; it reveals nothing about the key."""
        return tuple(hmac.new(k, _FINGERPRINT_PURPOSE, hashlib.sha256).hexdigest()[:16] for k in self._keys)

    def decrypt(self, token: str) -> str:
        """Plaintext of a token written by :meth:`encrypt`.

        Raises :class:`SecretKeyMismatch` when no configured key opens it.
        """
        from cryptography.fernet import InvalidToken

        try:
            return self._cipher().decrypt(token.encode("ascii")).decode()
        except (InvalidToken, ValueError) as exc:
            raise SecretKeyMismatch(f"key source: {self.source}") from exc


def mask(secret: str | None) -> str:
    """Display form of a credential: a short vendor prefix and at most the last 4 characters.

    ``"sk-proj-abcdefghijkl1234"`` → ``"sk-proj-…1234"``; only well-known public vendor prefixes are
    shown; secrets under 12 characters show no tail; ``None``/empty → ``""``. Never returns enough to
    reuse the secret (PROV-3).
    """
    if not secret:
        return ""
    prefix = next((p for p in _KNOWN_PREFIXES if secret.startswith(p)), "")
    if len(secret) - len(prefix) < _MASK_MIN_LEN_FOR_TAIL:
        prefix = ""
    tail = secret[-_MASK_TAIL:] if len(secret) >= _MASK_MIN_LEN_FOR_TAIL else ""
    return f"{prefix}…{tail}"


def key_file_path(*, sqlite_path: Path | None, data_dir: str | None) -> Path:
    """The generated key file: in ``data_dir``, else beside the SQLite file, else in ``~/.omniroute/``."""
    if data_dir is not None:
        return Path(data_dir).expanduser() / KEY_FILE_NAME
    if sqlite_path is not None:
        return sqlite_path.parent / KEY_FILE_NAME
    return _HOME_DIR.expanduser() / KEY_FILE_NAME


def parse_keys(raw: str, origin: str) -> list[bytes]:
    """Comma-separated Fernet keys from ``raw``; ``ValueError`` naming ``origin`` for a bad one."""
    keys = [k.strip().encode("ascii") for k in raw.split(",") if k.strip()]
    if not keys:
        raise ValueError(f"{origin} is empty; {_GENERATE_HINT}")
    for k in keys:
        if not _is_fernet_key(k):
            raise ValueError(
                f"{origin} must hold Fernet keys (32 url-safe base64-encoded bytes); {_GENERATE_HINT}"
            )
    return keys


def _read_or_create_key_file(path: Path) -> bytes:
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            log.warning("secret key file %s is readable by others (mode %o); chmod 600 it", path, mode)
        return path.read_bytes().strip()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = generate_key()
    # Write a private temp file then hard-link it into place: the link fails if another worker won the
    # race, and no reader ever sees a half-written key.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, key + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        key = path.read_bytes().strip()
    finally:
        tmp.unlink(missing_ok=True)
    log.info("generated secret key file %s (back it up: connection secrets need it)", path)
    return key


def _configured_box(secret_key: str | None) -> SecretBox | None:
    """The box for an explicit ``secret_key`` argument, else ``OMNIROUTE_SECRET_KEY``, else ``None``."""
    if secret_key:
        return SecretBox(parse_keys(secret_key, "secret_key"), source="secret_key argument")
    env = os.environ.get(SECRET_KEY_ENV)
    if env:
        return SecretBox(parse_keys(env, SECRET_KEY_ENV), source=SECRET_KEY_ENV)
    return None


def replace_key_file(path: Path, key: bytes) -> None:
    """Write ``key`` to ``path`` (mode 0600) through a private temp file renamed over it, so a reader
    sees the old key or the new one, never half a key."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, key + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def load_secret_box(
    *,
    secret_key: str | None = None,
    sqlite_path: Path | None = None,
    data_dir: str | None = None,
    ephemeral: bool = False,
) -> SecretBox:
    """Resolve the Fernet key(s) as described in the module docstring and return a :class:`SecretBox`.

    ``ephemeral`` (in-memory database) generates a throwaway key instead of a key file. Raises
    ``ValueError`` for a malformed key.
    """
    box = _configured_box(secret_key)
    if box is not None:
        return box
    if ephemeral and data_dir is None:
        return SecretBox([generate_key()], source="ephemeral key (in-memory database)")
    path = key_file_path(sqlite_path=sqlite_path, data_dir=data_dir)
    key = _read_or_create_key_file(path)
    return SecretBox(parse_keys(key.decode("ascii"), str(path)), source=str(path))


def existing_secret_box(
    *,
    secret_key: str | None = None,
    sqlite_path: Path | None = None,
    data_dir: str | None = None,
    ephemeral: bool = False,
) -> SecretBox | None:
    """The key :func:`load_secret_box` would use, without ever creating a key file: ``None`` when no key
    is configured and the key file does not exist (read-only checks such as ``omniroute doctor``).
    ``ephemeral`` (in-memory database) never looks for a key file. Raises ``ValueError`` for a
    malformed key."""
    box = _configured_box(secret_key)
    if box is not None or (ephemeral and data_dir is None):
        return box
    path = key_file_path(sqlite_path=sqlite_path, data_dir=data_dir)
    if not path.exists():
        return None
    return SecretBox(parse_keys(path.read_text("ascii").strip(), str(path)), source=str(path))
