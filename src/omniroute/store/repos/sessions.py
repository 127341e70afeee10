"""Signed-out console sessions, kept in ``store_meta`` so a sign-out holds on every worker and replica.

Console session cookies are stateless signed values (:mod:`omniroute.api.admin.session`); signing out
records the session id here as ``console_signed_out:<sid>`` with the time (epoch s) the cookie would
have expired anyway, and every request carrying that cookie is then refused. Entries past that time
are deleted on the next sign-out.
"""

from __future__ import annotations

from sqlalchemy import select

from omniroute.store.models import store_meta
from omniroute.store.repos._base import RepoBase

_PREFIX = "console_signed_out:"


class SessionsRepo(RepoBase):
    """Revocation of console sessions by id."""

    async def revoke_console_session(self, sid: str, until: float) -> None:
        """Refuse session ``sid`` from now on; ``until`` (epoch s) is when its cookie expires anyway,
        after which the entry is dropped. Also prunes entries whose ``until`` has passed."""
        now = self._now()
        async with self._engine.begin() as conn:
            rows = (
                await conn.execute(
                    select(store_meta.c.key, store_meta.c.value).where(store_meta.c.key.startswith(_PREFIX))
                )
            ).all()
            stale = [k for k, v in rows if _until(v) <= now]
            if stale:
                await conn.execute(store_meta.delete().where(store_meta.c.key.in_(stale)))
            stmt = self._upsert(store_meta, ["key"], ["value"]).values(key=_PREFIX + sid, value=repr(until))
            await conn.execute(stmt)

    async def console_session_revoked(self, sid: str) -> bool:
        """Whether session ``sid`` was signed out."""
        async with self._engine.connect() as conn:
            value = (
                await conn.execute(select(store_meta.c.value).where(store_meta.c.key == _PREFIX + sid))
            ).scalar()
        return value is not None


def _until(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0
