"""The secret key guard (PROV-3): a store opens only with the key its secrets were written with.

The fingerprint of the encrypting key (:meth:`SecretBox.fingerprints`) is kept in ``store_meta``. At
open, :func:`check_key` accepts a key when any configured key's fingerprint matches; a database from
before fingerprints were kept is checked by decrypting one stored secret, then its fingerprint is
recorded. Anything else raises :class:`SecretKeyMismatch` before a byte is written with the wrong key.
"""

from __future__ import annotations

from sqlalchemy import func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from omniroute.store.errors import SecretKeyMismatch
from omniroute.store.models import ConnectionRow, connections, store_meta
from omniroute.store.secrets import SecretBox

__all__ = ["FINGERPRINT_KEY", "check_key", "encrypted_secret_count", "reencrypt", "stored_fingerprint"]

FINGERPRINT_KEY = "secret_key_fingerprint"
_meta = store_meta
_ENCRYPTED = or_(ConnectionRow.api_key_enc.is_not(None), ConnectionRow.access_token_enc.is_not(None))


async def encrypted_secret_count(engine: AsyncEngine) -> int:
    """How many connections hold an encrypted API key or access token."""
    async with engine.connect() as conn:
        count = (await conn.execute(select(func.count()).where(_ENCRYPTED))).scalar_one()
        await conn.rollback()
    return int(count)


async def stored_fingerprint(engine: AsyncEngine) -> str | None:
    """The recorded fingerprint, ``None`` before one was recorded."""
    async with engine.connect() as conn:
        value = (await conn.execute(select(_meta.c.value).where(_meta.c.key == FINGERPRINT_KEY))).scalar()
        await conn.rollback()
    return None if value is None else str(value)


async def _one_token(engine: AsyncEngine) -> str | None:
    c = ConnectionRow
    async with engine.connect() as conn:
        row = (
            await conn.execute(select(c.api_key_enc, c.access_token_enc).where(_ENCRYPTED).limit(1))
        ).first()
        await conn.rollback()
    return None if row is None else str(row[0] if row[0] is not None else row[1])


async def check_key(engine: AsyncEngine, box: SecretBox, *, key_file: str) -> None:
    """Raise :class:`SecretKeyMismatch` (naming ``key_file``) unless ``box`` holds the key the stored
    secrets were written with; record the fingerprint when none is recorded yet."""
    detail = f"key source: {box.source}; key file: {key_file}"
    recorded = await stored_fingerprint(engine)
    if recorded is not None:
        if recorded not in box.fingerprints():
            raise SecretKeyMismatch(detail)
        return
    token = await _one_token(engine)
    if token is not None:
        try:
            box.decrypt(token)
        except SecretKeyMismatch:
            raise SecretKeyMismatch(detail) from None
    try:
        async with engine.begin() as conn:
            await conn.execute(_meta.insert().values(key=FINGERPRINT_KEY, value=box.fingerprints()[0]))
    except IntegrityError:  # another replica recorded it first; it must be ours too
        if await stored_fingerprint(engine) not in box.fingerprints():
            raise SecretKeyMismatch(detail) from None


async def reencrypt(engine: AsyncEngine, old: SecretBox, new: SecretBox) -> int:
    """Re-encrypt every stored secret from ``old`` to ``new`` and record ``new``'s fingerprint, in one
    transaction (all or nothing); the number of connections rewritten. Raises
    :class:`SecretKeyMismatch` when ``old`` cannot decrypt a secret (nothing is changed then)."""
    c = connections
    async with engine.begin() as conn:
        rows = (
            await conn.execute(select(c.c.id, c.c.api_key_enc, c.c.access_token_enc).where(_ENCRYPTED))
        ).all()
        for id_, api_key, token in rows:
            values = {
                "api_key_enc": None if api_key is None else new.encrypt(old.decrypt(api_key)),
                "access_token_enc": None if token is None else new.encrypt(old.decrypt(token)),
            }
            await conn.execute(c.update().where(c.c.id == id_).values(**values))
        await conn.execute(_meta.delete().where(_meta.c.key == FINGERPRINT_KEY))
        await conn.execute(_meta.insert().values(key=FINGERPRINT_KEY, value=new.fingerprints()[0]))
    return len(rows)
