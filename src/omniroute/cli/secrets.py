"""``omniroute secrets rotate``: re-encrypt every stored connection secret with a new key (PROV-3)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from omniroute.config import Config
from omniroute.gateway import data_dir_for
from omniroute.store import Store
from omniroute.store.db import parse_database_url
from omniroute.store.errors import SECRET_KEY_ENV
from omniroute.store.secrets import SecretBox, generate_key, key_file_path, parse_keys, replace_key_file

if TYPE_CHECKING:
    from omniroute.cli.common import LazyConsole

__all__ = ["NEW_KEY_ENV", "rotate_secrets"]

NEW_KEY_ENV = "OMNIROUTE_NEW_SECRET_KEY"
"""Environment variable holding the key to rotate to; without it a key is generated."""


async def rotate_secrets(cfg: Config, console: LazyConsole) -> None:
    """Open the store with the current key, re-encrypt every secret with the new key in one transaction
    and record its fingerprint. A generated key replaces the key file when the current key came from it,
    and is printed once either way. Raises what :meth:`Store.open` raises (missing or wrong current key)
    and ``ValueError`` for a malformed new key."""
    data_dir = data_dir_for(cfg.database_url)
    key_file = key_file_path(sqlite_path=parse_database_url(cfg.database_url).sqlite_path, data_dir=data_dir)
    given = os.environ.get(NEW_KEY_ENV)
    keys = parse_keys(given, NEW_KEY_ENV) if given else [generate_key()]
    store = await Store.open(cfg.database_url, data_dir=data_dir)
    try:
        from_file = store.key_source == str(key_file)
        count = await store.rotate_secrets(SecretBox(keys, source=NEW_KEY_ENV if given else "generated key"))
    finally:
        await store.close()
    console.print(f"Re-encrypted the secrets of {count} connection(s) with the new key.")
    if given:
        console.print(f"Set {SECRET_KEY_ENV} to the new key on every instance before restarting them.")
        return
    if from_file:
        console.print(f"The new key replaces {key_file}; it is shown once, keep a copy:")
    else:
        console.print(f"Set {SECRET_KEY_ENV} to the new key on every instance; it is shown once:")
    # Printed before the key file is written: were that write to fail, the key is not lost.
    print(keys[0].decode())  # plain, so no console styling or wrapping alters it
    if from_file:
        replace_key_file(key_file, keys[0])
