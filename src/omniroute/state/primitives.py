"""The backend contract of routing state: a small set of generic atomic primitives (STORE-1, STORE-2).

A backend (in-process memory, Redis, …) implements the abstract methods of :class:`StatePrimitives`
and sets its :attr:`~StatePrimitives.local` attribute, nothing else. Every domain operation the ladder
and the strategies call (breaker failure, probe claim, cooldown extend, lockout clear, resets, the
ladder's bulk read …) is written once on top of them in :class:`~omniroute.state.base.RoutingState`,
and each of those is **one** primitive call, so atomicity — and the degrade-to-local switch of a
shared backend — is decided per primitive.

The primitives, and why each exists:

* typed records (:class:`Kind`: breakers, cooldowns, lockouts, quota snapshots) —
  :meth:`~StatePrimitives.read` (several kinds in one round trip: the per-request ladder read),
  :meth:`~StatePrimitives.update` (atomic read-modify-write applying a pure rule of
  :mod:`omniroute.state.transitions`; N concurrent updates of one key behave as if serial, on every
  replica), :meth:`~StatePrimitives.put` (blind write, one round trip), :meth:`~StatePrimitives.scan`
  (every record of a kind: the management snapshot), :meth:`~StatePrimitives.remove` (operator
  resets by field), and the attribute :attr:`~StatePrimitives.local` (the records themselves when
  they live in this process: the per-request ladder read and the success fast path then cost no
  call);
* latency/error windows — :meth:`~StatePrimitives.record_sample`, :meth:`~StatePrimitives.get_window_stats`
  (a backend may cache statistics between samples);
* counters — :meth:`~StatePrimitives.incr_counter`, :meth:`~StatePrimitives.get_counter`;
* byte records with an optional TTL — :meth:`~StatePrimitives.get_bytes`,
  :meth:`~StatePrimitives.set_bytes`, :meth:`~StatePrimitives.delete_record` (strings and JSON are
  encoded on top);
* in-flight counts — :meth:`~StatePrimitives.incr_inflight`, :meth:`~StatePrimitives.decr_inflight`,
  :meth:`~StatePrimitives.get_inflight` (a shared backend counts per replica so a dead replica's
  attempts stop counting; that is why they are not plain counters).

Times: deadlines inside records are epoch seconds chosen by the caller (``now``); TTLs of byte
records are measured by the backend's injected :class:`~omniroute.clock.Clock`. Nothing in a backend
reads the system time or sleeps except through that clock.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

from omniroute.state.records import (
    BreakerRecord,
    CooldownRecord,
    LockKey,
    LockoutRecord,
    QuotaSnapshot,
    WindowStats,
)

__all__ = [
    "BREAKER",
    "COOLDOWN",
    "KINDS",
    "LOCKOUT",
    "QUOTA",
    "Kind",
    "LocalRecords",
    "Query",
    "StatePrimitives",
]

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True, slots=True, eq=False)
class Kind(Generic[K, R]):
    """One kind of typed record: its ``name`` (``[a-z]+``, part of a shared backend's keys), how a key
    becomes a string and back (``key_str``/``parse_key``) and how a record becomes a JSON-ready dict
    and back (``dump``/``load``). Compared by identity, so it is a cheap dict key for backends."""

    name: str
    key_str: Callable[[K], str]
    parse_key: Callable[[str], K]
    dump: Callable[[R], dict[str, Any]]
    load: Callable[[dict[str, Any]], R]


def _same(key: str) -> str:
    return key


def _parse_lock_key(text: str) -> LockKey:
    provider, connection, model = text.split("\x1f")
    return LockKey(provider, connection, model)


BREAKER: Kind[str, BreakerRecord] = Kind(
    "breaker", _same, _same, BreakerRecord.to_dict, BreakerRecord.from_dict
)
"""Provider circuit breakers by provider id (RESIL-1). Absent = CLOSED with no failures."""

COOLDOWN: Kind[str, CooldownRecord] = Kind(
    "cooldown", _same, _same, CooldownRecord.to_dict, CooldownRecord.from_dict
)
"""Connection cooldowns and invalid marks by connection id (RESIL-2). Absent = usable."""

LOCKOUT: Kind[LockKey, LockoutRecord] = Kind(
    "lockout", LockKey.as_str, _parse_lock_key, LockoutRecord.to_dict, LockoutRecord.from_dict
)
"""Model lockouts by ``(provider, connection, model)`` (RESIL-3); stored ones may have expired."""

QUOTA: Kind[str, QuotaSnapshot] = Kind("quota", _same, _same, QuotaSnapshot.to_dict, QuotaSnapshot.from_dict)
"""The latest upstream quota snapshot by connection id (AUTO-3 quota, COMBO-3 reset-aware)."""

KINDS: tuple[Kind[Any, Any], ...] = (BREAKER, COOLDOWN, LOCKOUT, QUOTA)
"""Every kind a backend stores."""


LocalRecords: TypeAlias = tuple[
    Mapping[str, BreakerRecord],
    Mapping[str, CooldownRecord],
    Mapping[LockKey, LockoutRecord],
    Mapping[str, QuotaSnapshot],
]
"""One live mapping per kind, in the order of :data:`KINDS` (see :attr:`StatePrimitives.local`). A
plain tuple: unpacking a tuple subclass is measurably slower on the per-request path."""


Query: TypeAlias = tuple[Kind[Any, Any], Iterable[Any]]
"""One part of a :meth:`StatePrimitives.read`: a kind and the keys wanted of it."""


class StatePrimitives(ABC):
    """What a routing-state backend implements. Every method is one atomic operation on the state
    (for a shared backend: on the state every replica sees); every method is a coroutine."""

    __slots__ = ()

    local: LocalRecords | None
    """The typed records when this backend holds them in this process, so a synchronous read of them
    is exact (live, read-only mappings; do not keep them across an ``await``); ``None`` when they
    live elsewhere and only the coroutines can tell. An attribute, not a method, because the
    per-request ladder read and the success fast path look at it."""

    # -- typed records -------------------------------------------------------------------------
    @abstractmethod
    async def read(self, *queries: Query) -> tuple[dict[Any, Any], ...]:
        """For each ``(kind, keys)`` query, in order, the stored records of those keys (keys without a
        record are left out). One consistent read for all queries (one round trip for a remote
        backend). Duplicated keys are fine; a backend may skip iterating the keys of a kind it holds
        no record of, so lazy iterables cost nothing then."""

    @abstractmethod
    async def scan(self, kind: Kind[K, R]) -> dict[K, R]:
        """Every stored record of ``kind``, by key."""

    @abstractmethod
    async def update(self, kind: Kind[K, R], key: K, rule: Callable[[R | None], tuple[T, R | None]]) -> T:
        """Atomically read the record of ``key`` (``None`` when absent), apply ``rule`` to it, store what
        the rule returns second (``None`` deletes) and return what it returns first.

        ``rule`` must be pure: a shared backend may run it more than once (again after losing a race
        to another writer) and stores and returns the result of the last run. When the rule returns
        the record it was given (or an equal one) nothing is written. Concurrent updates of one key,
        from this process or any replica, take effect one after the other: none is lost."""

    @abstractmethod
    async def put(self, kind: Kind[K, R], key: K, record: R) -> None:
        """Store ``record`` under ``key``, replacing any previous one (a blind write)."""

    @abstractmethod
    async def remove(self, kind: Kind[Any, Any], match: Mapping[str, str]) -> None:
        """Delete every record of ``kind`` whose fields equal all of ``match`` (field name → value, as
        in the record's ``dump``); every record of the kind when ``match`` is empty."""

    # -- latency / error windows (AUTO-3, AUTO-5) ----------------------------------------------------
    @abstractmethod
    async def record_sample(
        self, key: str, now: float, *, latency_ms: float, ok: bool, ttft_ms: float | None = None
    ) -> None:
        """Append one attempt outcome taken at ``now`` (epoch s) to the rolling window of candidate
        ``key``, which keeps the last N samples (N is the backend's ``window_size``)."""

    @abstractmethod
    async def get_window_stats(self, keys: Iterable[str]) -> dict[str, WindowStats]:
        """Window statistics (:func:`~omniroute.state.windows.compute_stats`) for every key in
        ``keys`` (empty stats for keys without samples)."""

    # -- counters ------------------------------------------------------------------------------------
    @abstractmethod
    async def incr_counter(self, key: str, amount: int = 1) -> int:
        """Atomically add ``amount`` (may be negative) to integer counter ``key`` (created at 0);
        returns the new value."""

    @abstractmethod
    async def get_counter(self, key: str) -> int:
        """Current value of counter ``key`` (0 when absent)."""

    # -- byte records with TTL -----------------------------------------------------------------------
    @abstractmethod
    async def get_bytes(self, key: str) -> bytes | None:
        """Byte record ``key``, or ``None`` when absent or expired."""

    @abstractmethod
    async def set_bytes(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        """Store byte record ``key``, replacing any previous one (and its TTL); it expires ``ttl_s``
        seconds later on the backend's clock when given (at once when ``ttl_s <= 0``)."""

    @abstractmethod
    async def delete_record(self, key: str) -> None:
        """Remove record ``key`` (bytes, string or JSON); no error when absent."""

    # -- in-flight counts (AUTO-3 connectionDensity, PROV-3 max_concurrent) ----------------------------
    @abstractmethod
    async def incr_inflight(self, connection_id: str) -> int:
        """One more attempt in flight on the connection; returns the new count."""

    @abstractmethod
    async def decr_inflight(self, connection_id: str) -> int:
        """One attempt fewer (never below 0); returns the new count."""

    @abstractmethod
    async def get_inflight(self, connection_ids: Iterable[str]) -> dict[str, int]:
        """In-flight counts of ``connection_ids`` (0 when unknown)."""
