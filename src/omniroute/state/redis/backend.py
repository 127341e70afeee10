"""Routing state in Redis for several replicas (STORE-2): the primitives of
:class:`~omniroute.state.primitives.StatePrimitives` as Redis commands.

* :meth:`~RedisRoutingState.update` is an optimistic transaction around the caller's pure rule:
  read the record; if the rule leaves it unchanged the answer is already linearisable at that read
  and nothing is written (the hot path: one ``GET``); otherwise ``WATCH`` → re-read → apply →
  ``MULTI``/``EXEC``, re-run on a conflict (bounded, :class:`StateContentionError` past the bound).
  Writers of one key inside a process queue on a local lock, so conflicts arise only between
  replicas. A typed record is a JSON string at ``<kind>:<id>`` listed in the index set ``<kind>s``.
* :meth:`~RedisRoutingState.read` is one ``MGET`` for every kind asked; counters are ``INCRBY``;
  windows are capped lists (``LPUSH`` + ``LTRIM`` in one ``MULTI``); scans, filtered removes and the
  per-replica in-flight counts are Lua scripts (:mod:`.scripts`).

Time is never Redis ``TIME``: deadlines inside records are the caller's ``now``, and the TTL of a
byte record is measured by the injected :class:`~omniroute.clock.Clock` (the deadline is stored with
the value; a Redis ``PEXPIRE`` of the same length only garbage-collects), exactly as the memory
backend does — so a :class:`~omniroute.clock.FakeClock` drives both in tests.

Keys are ``omniroute:{<prefix>}:<kind>:<id>``. The braces are a Redis Cluster hash tag: every key of
one deployment lands in one slot, so the multi-key scripts stay legal. The prefix separates
deployments (or test runs) sharing a Redis; it comes from the ``prefix`` argument, else a ``prefix``
query parameter of the URL (``redis://host:6379/0?prefix=blue``, removed before connecting), else the
environment variable ``OMNIROUTE_REDIS_PREFIX``, else ``default``.

Every key that grows with traffic expires (Redis ``PEXPIRE``, measured in Redis time; it only
garbage-collects — the records' own deadlines stay on the injected clock):

* a lockout record ``until`` its end plus :data:`RECORD_GRACE_S` (a day: the escalation level is
  remembered that long after the lockout ends); a cooldown likewise, except an invalid-credentials
  mark, which lasts until an operator fixes the connection (one per connection, so bounded);
* a latency/error window :data:`WINDOW_HORIZON_S` (7 days) after its last sample;
* a counter :data:`COUNTER_HORIZON_S` (35 days: longer than any fixed quota window of a month) after
  its last increment.

Breakers (one per provider) and quota snapshots (one per connection) are bounded by the
configuration. The per-kind index sets are pruned of ids whose record expired on every scan and
every :data:`INDEX_PRUNE_EVERY` record writes of this process.

In-flight counts are kept per replica (``inflight:<replica_id>`` hashes whose TTL every update
renews) and summed on read, so a replica that dies with attempts in flight stops counting after
:data:`INFLIGHT_TTL_S` instead of wedging ``max_concurrent`` (PROV-3) forever.
"""

from __future__ import annotations

import asyncio
import math
import os
import urllib.parse
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

import orjson
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from omniroute.clock import Clock, SystemClock
from omniroute.state.base import RoutingState
from omniroute.state.primitives import COOLDOWN, LOCKOUT, Kind, Query
from omniroute.state.records import WindowStats
from omniroute.state.redis import scripts
from omniroute.state.windows import DEFAULT_WINDOW_SIZE, EMPTY_STATS, compute_stats

__all__ = [
    "COUNTER_HORIZON_S",
    "DEFAULT_PREFIX",
    "DEFAULT_TIMEOUT_S",
    "ENV_REDIS_PREFIX",
    "FAILURES",
    "INDEX_PRUNE_EVERY",
    "INFLIGHT_TTL_S",
    "MAX_WATCH_RETRIES",
    "RECORD_GRACE_S",
    "UNAVAILABLE",
    "WINDOW_HORIZON_S",
    "RedisRoutingState",
    "StateContentionError",
    "record_ttl_s",
    "split_prefix",
]

K = TypeVar("K")
R = TypeVar("R")
T = TypeVar("T")

ENV_REDIS_PREFIX = "OMNIROUTE_REDIS_PREFIX"
"""Environment variable naming the key prefix when neither the caller nor the URL sets one."""

DEFAULT_PREFIX = "default"
"""Key prefix used when nothing else names one (``omniroute:{default}:…``)."""

INFLIGHT_TTL_S = 900.0
"""Seconds a replica's in-flight hash outlives its last update (longer than any attempt's total
timeout); after that a dead replica's attempts no longer count."""

RECORD_GRACE_S = 86_400.0
"""Seconds a lockout or cooldown record outlives its ``until`` in Redis (escalation memory)."""

WINDOW_HORIZON_S = 7 * 86_400.0
"""Seconds a latency/error window outlives its last sample in Redis."""

COUNTER_HORIZON_S = 35 * 86_400.0
"""Seconds a counter outlives its last increment in Redis (longer than a monthly quota window)."""

INDEX_PRUNE_EVERY = 1024
"""Record writes of this process between two prunes of the written kind's index set."""

DEFAULT_TIMEOUT_S = 0.5
"""Default socket connect and per-command timeout: a dead Redis must not stall a request for long."""

MAX_CONNECTIONS = 100
"""Connections per replica's pool (redis-py's default size); past it a call waits for a free one, for
at most the per-command timeout, instead of failing at once."""

MAX_WATCH_RETRIES = 64
"""Optimistic-transaction attempts before :class:`StateContentionError` (never reached in practice:
every conflict means another writer committed, and a loser re-runs on the winner's record)."""

UNAVAILABLE: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OSError)
"""Errors meaning Redis cannot be reached (the resilient wrapper degrades on them)."""

FAILURES: tuple[type[BaseException], ...] = (RedisError, *UNAVAILABLE)
"""Every error a Redis call may raise."""

Write = Callable[[Pipeline], None]


class StateContentionError(RedisError):
    """An optimistic transaction lost :data:`MAX_WATCH_RETRIES` races in a row (STORE-2)."""


def split_prefix(url: str) -> tuple[str, str | None]:
    """``url`` without its ``prefix`` query parameter, and that parameter (``None`` when absent)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.query:
        return url, None
    prefix: str | None = None
    kept: list[tuple[str, str]] = []
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if name == "prefix":
            prefix = value
        else:
            kept.append((name, value))
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(kept))), prefix


def record_ttl_s(kind: Kind[Any, Any], record: object, now: float) -> float | None:
    """Seconds a typed record is kept in Redis from ``now`` (epoch s), ``None`` for no expiry: a
    lockout until its ``until`` plus :data:`RECORD_GRACE_S`; a cooldown too unless it marks invalid
    credentials; other kinds (bounded by the configuration) never expire."""
    if kind is LOCKOUT or (kind is COOLDOWN and not getattr(record, "invalid", False)):
        return max(float(getattr(record, "until", 0.0)) - now, 0.0) + RECORD_GRACE_S
    return None


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _raw(value: object) -> bytes | None:
    """A reply of a client without ``decode_responses`` as ``bytes | None``."""
    return cast("bytes | None", value)


def _load(kind: Kind[Any, R], raw: bytes) -> R:
    return kind.load(orjson.loads(raw))


class RedisRoutingState(RoutingState):
    """Routing state in Redis, shared by every replica using the same URL and prefix (STORE-2).

    Give either a ready ``client`` (a ``redis.asyncio.Redis`` without ``decode_responses``) or a
    ``url``; with a URL the client is created on first use, inside the running event loop, with
    ``connect_timeout_s``/``timeout_s`` socket timeouts and a single reconnect retry. ``prefix``
    namespaces the keys (see the module docstring); ``clock`` measures record TTLs (default
    :class:`SystemClock`); ``window_size`` samples are kept per latency/error window (default 100);
    ``replica_id`` names this replica's in-flight hash (default: random). Raises :class:`ValueError`
    without a client or URL, or for a prefix containing braces.
    """

    def __init__(
        self,
        client: aioredis.Redis | None = None,
        *,
        url: str | None = None,
        prefix: str | None = None,
        clock: Clock | None = None,
        window_size: int = DEFAULT_WINDOW_SIZE,
        replica_id: str | None = None,
        connect_timeout_s: float = DEFAULT_TIMEOUT_S,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_watch_retries: int = MAX_WATCH_RETRIES,
    ) -> None:
        if client is None and url is None:
            raise ValueError("RedisRoutingState needs a client or a url")
        url_prefix = None
        if url is not None:
            url, url_prefix = split_prefix(url)
        chosen = prefix or url_prefix or os.environ.get(ENV_REDIS_PREFIX) or DEFAULT_PREFIX
        if "{" in chosen or "}" in chosen:
            raise ValueError(f"Redis key prefix may not contain braces: {chosen!r}")
        self.prefix = chosen
        self.clock: Clock = clock or SystemClock()
        self.replica_id = replica_id or uuid.uuid4().hex[:12]
        self._url = url
        self._client_obj = client
        self._owns_client = client is None
        self._connect_timeout_s = connect_timeout_s
        self._timeout_s = timeout_s
        self._window_size = window_size
        self._max_retries = max_watch_retries
        self._base = f"omniroute:{{{chosen}}}:"
        self._scripts: dict[str, Any] = {}
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self.local = None  # other replicas write the records: only a read of Redis can tell
        self._writes = 0

    # -- plumbing ----------------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        """The key prefix every key of this state starts with, ``omniroute:{<prefix>}:``."""
        return self._base

    def key(self, kind: str, ident: str | None = None) -> str:
        """The Redis key of record ``ident`` of ``kind`` (``breaker``, ``cooldown``, …), or of the
        per-deployment structure ``kind`` when ``ident`` is ``None`` (``key(kind, "")`` is the prefix
        shared by every record of ``kind``)."""
        return f"{self._base}{kind}" if ident is None else f"{self._base}{kind}:{ident}"

    def _client(self) -> aioredis.Redis:
        if self._client_obj is None:
            assert self._url is not None
            # A blocking pool: a call that finds every connection busy waits (up to ``timeout_s``)
            # for one to come back instead of failing with "Too many connections", which under load
            # would drop this replica to its in-process state and stop sharing it.
            pool = aioredis.BlockingConnectionPool.from_url(
                self._url,
                max_connections=MAX_CONNECTIONS,
                timeout=self._timeout_s,
                socket_connect_timeout=self._connect_timeout_s,
                socket_timeout=self._timeout_s,
                retry=Retry(NoBackoff(), 1),
            )
            self._client_obj = aioredis.Redis.from_pool(pool)
        return self._client_obj

    async def _eval(self, source: str, keys: list[str], args: list[Any]) -> Any:
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self._client().register_script(source)
        return await script(keys=keys, args=args)

    async def run_script(self, source: str, keys: list[str], args: list[Any]) -> Any:
        """Run the Lua script ``source`` (cached by SHA after the first call) atomically on this
        state's Redis, for other shared counters of the deployment (key budgets); raises the
        client's errors (``FAILURES`` for an unreachable Redis)."""
        return await self._eval(source, keys, args)

    async def check(self) -> BaseException | None:
        """``PING`` Redis: ``None`` when it answers, else the error (never raises)."""
        try:
            await self._client().ping()
        except FAILURES as exc:
            return exc
        return None

    async def ping(self) -> bool:
        """Whether Redis answers a ``PING`` right now (OBS-4); never raises."""
        return await self.check() is None

    async def aclose(self) -> None:
        """Close the connection pool when this object created the client (a given one is the
        caller's to close)."""
        if self._owns_client and self._client_obj is not None:
            client, self._client_obj = self._client_obj, None
            self._scripts.clear()
            await client.aclose()

    async def clear(self) -> int:
        """Delete every key of this prefix (``SCAN`` + ``DEL``); returns how many (tests, ops)."""
        r = self._client()
        n = 0
        batch: list[bytes] = []
        async for k in r.scan_iter(match=_glob_escape(self._base) + "*", count=500):
            batch.append(k)
            if len(batch) >= 500:
                n += int(await r.delete(*batch))
                batch = []
        if batch:
            n += int(await r.delete(*batch))
        return n

    async def _atomic(self, key: str, decide: Callable[[bytes | None], tuple[T, Write | None]]) -> T:
        """One atomic read-modify-write of ``key``: ``decide(raw) -> (result, write or None)``."""
        r = self._client()
        result, write = decide(_raw(await r.get(key)))
        if write is None:  # unchanged at a single read: already atomic, nothing to write
            return result
        guard = self._locks.get(key)
        if guard is None:
            guard = self._locks[key] = asyncio.Lock()
        async with guard:
            for _ in range(self._max_retries):
                async with r.pipeline(transaction=True) as pipe:
                    await pipe.watch(key)
                    result, write = decide(_raw(await pipe.get(key)))
                    if write is None:
                        return result
                    pipe.multi()  # type: ignore[no-untyped-call]
                    write(pipe)
                    try:
                        await pipe.execute()
                    except WatchError:  # another replica committed first: re-run on its record
                        continue
                    return result
        raise StateContentionError(f"gave up updating {key!r} after {self._max_retries} conflicts")

    def _store(self, kind: Kind[Any, Any], ident: str, record: object | None) -> Write:
        """A write storing (or with ``None`` deleting) record ``ident`` and its index entry."""
        key, index = self.key(kind.name, ident), self.key(kind.name + "s")
        value = None if record is None else orjson.dumps(kind.dump(record))
        ttl_s = None if record is None else record_ttl_s(kind, record, self.clock.time())
        ttl_ms = None if ttl_s is None else max(1, math.ceil(ttl_s * 1000))

        def write(pipe: Pipeline) -> None:
            if value is None:
                pipe.delete(key)
                pipe.srem(index, ident)
            else:
                pipe.set(key, value, px=ttl_ms)
                pipe.sadd(index, ident)

        return write

    # -- typed records -------------------------------------------------------------------------
    async def read(self, *queries: Query) -> tuple[dict[Any, Any], ...]:
        wanted = [(kind, list(dict.fromkeys(keys))) for kind, keys in queries]
        names = [self.key(kind.name, kind.key_str(k)) for kind, keys in wanted for k in keys]
        raws = [_raw(r) for r in await self._client().mget(names)] if names else []
        out: list[dict[Any, Any]] = []
        i = 0
        for kind, keys in wanted:
            found: dict[Any, Any] = {}
            for k, raw in zip(keys, raws[i : i + len(keys)], strict=True):
                if raw is not None:
                    found[k] = _load(kind, raw)
            i += len(keys)
            out.append(found)
        return tuple(out)

    async def scan(self, kind: Kind[K, R]) -> dict[K, R]:
        flat = await self._eval(scripts.SCAN, [self.key(kind.name + "s")], [self.key(kind.name, "")])
        return {kind.parse_key(flat[i].decode()): _load(kind, flat[i + 1]) for i in range(0, len(flat), 2)}

    async def update(self, kind: Kind[K, R], key: K, rule: Callable[[R | None], tuple[T, R | None]]) -> T:
        ident = kind.key_str(key)

        def decide(raw: bytes | None) -> tuple[T, Write | None]:
            before = None if raw is None else _load(kind, raw)
            result, after = rule(before)
            if after is before or after == before:
                return result, None
            return result, self._store(kind, ident, after)

        result = await self._atomic(self.key(kind.name, ident), decide)
        await self._count_write(kind)
        return result

    async def put(self, kind: Kind[K, R], key: K, record: R) -> None:
        async with self._client().pipeline(transaction=True) as pipe:
            self._store(kind, kind.key_str(key), record)(pipe)
            await pipe.execute()
        await self._count_write(kind)

    async def _count_write(self, kind: Kind[Any, Any]) -> None:
        """Every :data:`INDEX_PRUNE_EVERY` writes, drop ids of expired records from ``kind``'s index
        (the scan script does it), so the index set stays as small as the live records."""
        self._writes += 1
        if self._writes % INDEX_PRUNE_EVERY == 0:
            await self._eval(scripts.SCAN, [self.key(kind.name + "s")], [self.key(kind.name, "")])

    async def remove(self, kind: Kind[Any, Any], match: Mapping[str, str]) -> None:
        args = [self.key(kind.name, "")]
        for field, value in match.items():
            args += [field, value]
        await self._eval(scripts.REMOVE, [self.key(kind.name + "s")], args)

    # -- latency / error windows (AUTO-3, AUTO-5) ------------------------------------------------
    async def record_sample(
        self, key: str, now: float, *, latency_ms: float, ok: bool, ttft_ms: float | None = None
    ) -> None:
        k = self.key("window", key)
        async with self._client().pipeline(transaction=True) as pipe:
            pipe.lpush(k, orjson.dumps([latency_ms, ok, ttft_ms, now]))
            pipe.ltrim(k, 0, self._window_size - 1)
            pipe.pexpire(k, int(WINDOW_HORIZON_S * 1000))
            await pipe.execute()

    async def get_window_stats(self, keys: Iterable[str]) -> dict[str, WindowStats]:
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        async with self._client().pipeline(transaction=True) as pipe:
            for k in wanted:
                pipe.lrange(self.key("window", k), 0, -1)
            lists = await pipe.execute()
        out: dict[str, WindowStats] = {}
        for k, raws in zip(wanted, lists, strict=True):
            if not raws:
                out[k] = EMPTY_STATS
                continue
            items = [orjson.loads(raw) for raw in raws]  # newest first
            samples = [
                (float(lat), bool(ok), None if ttft is None else float(ttft))
                for lat, ok, ttft, _ in reversed(items)
            ]
            out[k] = compute_stats(samples, float(items[0][3]))
        return out

    # -- counters ------------------------------------------------------------------------------
    async def incr_counter(self, key: str, amount: int = 1) -> int:
        k = self.key("counter", key)
        async with self._client().pipeline(transaction=True) as pipe:
            pipe.incrby(k, amount)
            pipe.pexpire(k, int(COUNTER_HORIZON_S * 1000))
            value, _ = await pipe.execute()
        return int(value)

    async def get_counter(self, key: str) -> int:
        raw = await self._client().get(self.key("counter", key))
        return 0 if raw is None else int(raw)

    # -- byte records with TTL -----------------------------------------------------------------
    async def get_bytes(self, key: str) -> bytes | None:
        value, expires = await self._client().hmget(self.key("record", key), ["v", "x"])
        if value is None:
            return None
        if expires is not None and float(expires) <= self.clock.time():
            return None
        return _raw(value)

    async def set_bytes(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        k = self.key("record", key)
        async with self._client().pipeline(transaction=True) as pipe:
            pipe.delete(k)
            if ttl_s is None:
                pipe.hset(k, "v", value)
            elif (ttl_ms := math.ceil(ttl_s * 1000)) > 0:  # else already expired: nothing to store
                pipe.hset(k, mapping={"v": value, "x": repr(self.clock.time() + ttl_s)})
                pipe.pexpire(k, ttl_ms)
            await pipe.execute()

    async def delete_record(self, key: str) -> None:
        await self._client().delete(self.key("record", key))

    # -- in-flight counts (AUTO-3 connectionDensity, PROV-3 max_concurrent) ----------------------
    async def _inflight_add(self, connection_id: str, delta: int) -> int:
        keys = [self.key("inflight-replicas"), self.key("inflight", self.replica_id)]
        args = [self.key("inflight", ""), self.replica_id, int(INFLIGHT_TTL_S * 1000), delta, connection_id]
        return max(0, int(await self._eval(scripts.INFLIGHT_ADD, keys, args)))

    async def incr_inflight(self, connection_id: str) -> int:
        return await self._inflight_add(connection_id, 1)

    async def decr_inflight(self, connection_id: str) -> int:
        return await self._inflight_add(connection_id, -1)

    async def get_inflight(self, connection_ids: Iterable[str]) -> dict[str, int]:
        ids = list(connection_ids)
        if not ids:
            return {}
        counts = await self._eval(
            scripts.INFLIGHT_GET, [self.key("inflight-replicas")], [self.key("inflight", ""), *ids]
        )
        return {c: max(0, int(n)) for c, n in zip(ids, counts, strict=True)}
