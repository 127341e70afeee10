"""Persistence for config and usage (STORE-1 SQLite, STORE-2 PostgreSQL): the :class:`Store` facade.

``await Store.open(url)`` connects, runs the Alembic migrations and loads the secret key; see
:mod:`omniroute.store.store` for the methods and :mod:`omniroute.store.secrets` for where the key lives.
"""

from omniroute.store.errors import (
    SecretKeyMismatch,
    SecretKeyMissing,
    StoreConflict,
    StoreError,
    StoreNotFound,
)
from omniroute.store.migrations import migrate
from omniroute.store.repos.api_keys import hash_key
from omniroute.store.repos.connections import UNSET
from omniroute.store.repos.usage import UsageRecord
from omniroute.store.secrets import mask
from omniroute.store.store import Store

__all__ = [
    "UNSET",
    "SecretKeyMismatch",
    "SecretKeyMissing",
    "Store",
    "StoreConflict",
    "StoreError",
    "StoreNotFound",
    "UsageRecord",
    "hash_key",
    "mask",
    "migrate",
]
