"""What every repository shares: the engine, the secret box, and a dialect-neutral upsert."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.dml import Insert

from omniroute.clock import Clock
from omniroute.store.secrets import SecretBox


class RepoBase:
    """State shared by the repository mixins; set once by ``Store.__init__``."""

    _engine: AsyncEngine
    _secrets: SecretBox
    _clock: Clock

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._engine.dialect.name

    def _upsert(self, table: Table, keys: Iterable[str], update: Iterable[str] | None = None) -> Insert:
        """``INSERT … ON CONFLICT (keys) DO UPDATE SET update = excluded.update`` (or ``DO NOTHING`` when
        ``update`` is empty); one statement on both databases, safe across replicas (STORE-2)."""
        stmt: Any = (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)
        cols = list(update) if update is not None else []
        if not cols:
            return stmt.on_conflict_do_nothing(index_elements=list(keys))  # type: ignore[no-any-return]
        return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
            index_elements=list(keys), set_={c: stmt.excluded[c] for c in cols}
        )

    def _now(self) -> float:
        """Current wall-clock time on the store's clock, epoch seconds."""
        return self._clock.time()
