"""Errors raised by the store (STORE-1/2); the API edge maps them to HTTP statuses.

::

    StoreError
    ├── StoreConflict(ValueError)      a unique name is taken (COMBO-1: 400 on duplicate)
    ├── StoreNotFound(LookupError)     a referenced row does not exist (COMBO-2 mapping → combo)
    ├── SecretKeyMismatch              stored secrets cannot be decrypted with the configured key (PROV-3)
    └── SecretKeyMissing               secrets are stored but no key is configured (PROV-3)
"""

from __future__ import annotations

SECRET_KEY_ENV = "OMNIROUTE_SECRET_KEY"


class StoreError(Exception):
    """Base of every error the store raises on purpose."""


class StoreConflict(StoreError, ValueError):
    """A unique constraint would be violated, e.g. a duplicate combo name (COMBO-1, 400-worthy)."""


class StoreNotFound(StoreError, LookupError):
    """A row the operation refers to does not exist, e.g. a mapping's combo (COMBO-2)."""


class SecretKeyMismatch(StoreError):
    """A stored secret cannot be decrypted with the configured key (PROV-3 encryption at rest).

    Raised on read; the database was written with another key. Set ``OMNIROUTE_SECRET_KEY`` (or restore
    the ``secret.key`` file) to the key the secrets were written with.
    """

    def __init__(self, detail: str = "") -> None:
        msg = (
            "stored connection secrets cannot be decrypted with the configured secret key; "
            f"set {SECRET_KEY_ENV} (or restore the secret.key file) to the key they were written with"
        )
        super().__init__(f"{msg} ({detail})" if detail else msg)


class SecretKeyMissing(StoreError):
    """The store holds encrypted secrets but no key is configured and the key file is missing (PROV-3).

    Raised at start instead of generating a new key, which could never decrypt them.
    """

    def __init__(self, key_file: str) -> None:
        super().__init__(
            "the database holds encrypted connection secrets but no secret key was found; "
            f"set {SECRET_KEY_ENV} or restore the key file {key_file} (a new key cannot decrypt them)"
        )
