"""Redis-backed :class:`~omniroute.state.base.RoutingState` for several replicas (STORE-2).

N gateway replicas pointed at one Redis behave like one gateway: breaker states (RESIL-1), cooldown
deadlines and invalid marks (RESIL-2), model lockouts (RESIL-3), LKGP and other records, round-robin
counters and decks, in-flight counts, latency/error windows and quota snapshots all live in Redis,
and **every protocol method is one atomic operation** there:

* read-modify-write methods (breaker failure/success/claim/release, cooldown extend/success/
  invalid/valid, lockout extend) are optimistic transactions that apply the very same pure rules as
  the in-process backend (:mod:`omniroute.state.transitions`): read the record; if the rule leaves
  it unchanged the answer is already linearisable at that read and nothing is written (the hot path:
  one ``GET``); otherwise ``WATCH`` → re-read → apply → ``MULTI``/``EXEC``, retried on a conflict
  (bounded, :class:`StateContentionError` past the bound);
* counters are ``INCRBY``; windows are capped lists (``LPUSH`` + ``LTRIM`` in one ``MULTI``); the
  enumerations (``all_*``), the filtered resets and the in-flight counts are small Lua scripts.

Time is never Redis ``TIME``: deadlines use the ``now`` the caller passes and the TTL of generic
records is measured by the injected :class:`~omniroute.clock.Clock` (the deadline is stored
with the value; a Redis ``PEXPIRE`` of the same length only garbage-collects), exactly as the memory
backend does — so a :class:`~omniroute.clock.FakeClock` drives both in tests.

Keys are ``omniroute:{<prefix>}:<kind>:<id>``. The braces are a Redis Cluster hash tag: every key of
one deployment lands in one slot, so the multi-key scripts stay legal. The prefix separates
deployments (or test runs) sharing a Redis; it comes from the ``prefix`` argument, else a ``prefix``
query parameter of the URL (``redis://host:6379/0?prefix=blue``, removed before connecting), else the
environment variable ``OMNIROUTE_REDIS_PREFIX``, else ``default``.

In-flight counts are kept per replica (``inflight:<replica_id>`` hashes whose TTL every update
renews) and summed on read, so a replica that dies with attempts in flight stops counting after
:data:`INFLIGHT_TTL_S` instead of wedging ``max_concurrent`` (PROV-3) forever.

"Redis unavailable → degrade to local state with a warning, never fail requests":
:class:`ResilientRoutingState` wraps a :class:`RedisRoutingState` and an in-process fallback
(:class:`~omniroute.state.memory.MemoryRoutingState`). A connection error or timeout on any call logs
one warning, serves that call and every later one from the fallback, and a background task pings
Redis every ``retry_after_s`` seconds until it answers again. Sockets use short timeouts (0.5 s connect
and per command by default) so a dead Redis delays at most the one request that discovers it.
State written to the fallback while degraded stays local (it is not merged back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import random
import time
import urllib.parse
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import orjson
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError
from redis.exceptions import TimeoutError as RedisTimeoutError

from omniroute.clock import Clock, SystemClock
from omniroute.state import transitions as t
from omniroute.state.base import RoutingState
from omniroute.state.memory import DEFAULT_WINDOW_SIZE, MemoryRoutingState, _compute_stats
from omniroute.state.records import (
    BreakerRecord,
    Change,
    CooldownRecord,
    LockKey,
    LockoutRecord,
    ProbeVerdict,
    QuotaSnapshot,
    WindowStats,
)

__all__ = [
    "DEFAULT_PREFIX",
    "ENV_REDIS_PREFIX",
    "INFLIGHT_TTL_S",
    "RedisRoutingState",
    "ResilientRoutingState",
    "StateContentionError",
    "split_prefix",
]

log = logging.getLogger("omniroute.state")

T = TypeVar("T")

ENV_REDIS_PREFIX = "OMNIROUTE_REDIS_PREFIX"
"""Environment variable naming the key prefix when neither the caller nor the URL sets one."""

DEFAULT_PREFIX = "default"
"""Key prefix used when nothing else names one (``omniroute:{default}:…``)."""

INFLIGHT_TTL_S = 900.0
"""Seconds a replica's in-flight hash outlives its last update (longer than any attempt's total
timeout); after that a dead replica's attempts no longer count."""

DEFAULT_TIMEOUT_S = 0.5
"""Default socket connect and per-command timeout: a dead Redis must not stall a request for long."""

MAX_WATCH_RETRIES = 64
"""Optimistic-transaction attempts before :class:`StateContentionError` (never reached in practice:
a loser re-reads the winner's record, and most rules then leave it unchanged)."""

_UNAVAILABLE: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OSError)
_FAILURES: tuple[type[BaseException], ...] = (RedisError, *_UNAVAILABLE)

Write = Callable[[Pipeline], None]


class StateContentionError(RedisError):
    """An optimistic transaction lost :data:`MAX_WATCH_RETRIES` races in a row (STORE-2)."""


# -- Lua scripts (each runs atomically on the server) -------------------------------------------

_SNAPSHOT_LUA = """
-- KEYS[1] index set; ARGV[1] record key prefix -> {id1, value1, id2, value2, ...}
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local v = redis.call('GET', ARGV[1] .. id)
  if v then
    out[#out + 1] = id
    out[#out + 1] = v
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return out
"""

_RESET_LUA = """
-- KEYS[1] index set; ARGV[1] record key prefix; ARGV[2..] (field, value) pairs that must all
-- equal the stored JSON record's fields (no pairs: every record). Returns the number removed.
local n = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[1] .. id
  local match = true
  if #ARGV > 1 then
    local v = redis.call('GET', key)
    if v then
      local rec = cjson.decode(v)
      for i = 2, #ARGV, 2 do
        if tostring(rec[ARGV[i]]) ~= ARGV[i + 1] then
          match = false
          break
        end
      end
    end
  end
  if match then
    redis.call('DEL', key)
    redis.call('SREM', KEYS[1], id)
    n = n + 1
  end
end
return n
"""

_INFLIGHT_SUM = """
local function totals(replicas, prefix, first)
  local sums = {}
  for i = first, #ARGV do sums[i - first + 1] = 0 end
  if #ARGV < first then return sums end
  for _, r in ipairs(redis.call('SMEMBERS', replicas)) do
    local key = prefix .. r
    if redis.call('EXISTS', key) == 0 then
      redis.call('SREM', replicas, r)
    else
      local vals = redis.call('HMGET', key, unpack(ARGV, first))
      for i, v in ipairs(vals) do
        if v then sums[i] = sums[i] + tonumber(v) end
      end
    end
  end
  return sums
end
"""

_INFLIGHT_GET_LUA = (
    _INFLIGHT_SUM
    + """
-- KEYS[1] replica set; ARGV[1] per-replica hash prefix; ARGV[2..] connection ids -> counts
return totals(KEYS[1], ARGV[1], 2)
"""
)

_INFLIGHT_ADD_LUA = (
    _INFLIGHT_SUM
    + """
-- KEYS[1] replica set, KEYS[2] this replica's hash; ARGV[1] hash prefix, ARGV[2] replica id,
-- ARGV[3] ttl ms, ARGV[4] delta (+1/-1), ARGV[5] connection id -> the connection's total count
local n = redis.call('HINCRBY', KEYS[2], ARGV[5], tonumber(ARGV[4]))
if n <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[5])
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  redis.call('SADD', KEYS[1], ARGV[2])
end
return totals(KEYS[1], ARGV[1], 5)[1]
"""
)


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


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def _raw(value: object) -> bytes | None:
    """A reply of a client without ``decode_responses`` as ``bytes | None``."""
    return cast("bytes | None", value)


class RedisRoutingState:
    """Routing state in Redis, shared by every replica using the same URL and prefix (STORE-2).

    Give either a ready ``client`` (a ``redis.asyncio.Redis`` without ``decode_responses``) or a
    ``url``; with a URL the client is created on first use, inside the running event loop, with
    ``connect_timeout_s``/``timeout_s`` socket timeouts and a single reconnect retry. ``prefix``
    namespaces the keys (see the module docstring); ``clock`` measures record TTLs (default
    :class:`SystemClock`); ``window_size`` samples are kept per latency/error window (default 100);
    ``replica_id`` names this replica's in-flight hash (default: random).
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
            self._client_obj = aioredis.Redis.from_url(
                self._url,
                socket_connect_timeout=self._connect_timeout_s,
                socket_timeout=self._timeout_s,
                retry=Retry(NoBackoff(), 1),
            )
        return self._client_obj

    def _script(self, name: str, source: str) -> Any:
        script = self._scripts.get(name)
        if script is None:
            script = self._scripts[name] = self._client().register_script(source)
        return script

    async def _eval(self, name: str, source: str, keys: list[str], args: list[Any]) -> Any:
        return await self._script(name, source)(keys=keys, args=args)

    async def check(self) -> BaseException | None:
        """``PING`` Redis: ``None`` when it answers, else the error (never raises)."""
        try:
            await self._client().ping()
        except _FAILURES as exc:
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
        """One atomic read-modify-write of ``key``: ``decide(raw) -> (result, write or None)``.

        Writers of one key inside this process queue on a local lock, so ``WATCH`` conflicts arise
        only between replicas (a burst of N local updates costs N transactions, not N²)."""
        r = self._client()
        result, write = decide(_raw(await r.get(key)))
        if write is None:  # unchanged at a single read: already atomic, nothing to write
            return result
        guard = self._locks.get(key)
        if guard is None:
            guard = self._locks[key] = asyncio.Lock()
        async with guard:
            for attempt in range(self._max_retries):
                async with r.pipeline(transaction=True) as pipe:
                    await pipe.watch(key)
                    result, write = decide(_raw(await pipe.get(key)))
                    if write is None:
                        return result
                    pipe.multi()  # type: ignore[no-untyped-call]
                    write(pipe)
                    try:
                        await pipe.execute()
                    except WatchError:  # another replica won the race: re-read and re-apply
                        await asyncio.sleep(random.uniform(0, 0.0002 * attempt))
                        continue
                    return result
        raise StateContentionError(f"gave up updating {key!r} after {self._max_retries} conflicts")

    async def _snapshot(self, kind: str) -> list[tuple[str, bytes]]:
        flat = await self._eval("snapshot", _SNAPSHOT_LUA, [self.key(kind + "s")], [self.key(kind, "")])
        return [(flat[i].decode(), flat[i + 1]) for i in range(0, len(flat), 2)]

    async def _reset(self, kind: str, match: dict[str, str]) -> None:
        args: list[str] = [self.key(kind, "")]
        for field, value in match.items():
            args += [field, value]
        await self._eval("reset", _RESET_LUA, [self.key(kind + "s")], args)

    def _put(self, kind: str, ident: str, value: bytes | None) -> Write:
        """A write storing (or with ``None`` deleting) record ``ident`` and its index entry."""
        key, index = self.key(kind, ident), self.key(kind + "s")

        def write(pipe: Pipeline) -> None:
            if value is None:
                pipe.delete(key)
                pipe.srem(index, ident)
            else:
                pipe.set(key, value)
                pipe.sadd(index, ident)

        return write

    # -- RESIL-1 breaker -----------------------------------------------------------------------
    @staticmethod
    def _breaker(provider: str, raw: bytes | None) -> BreakerRecord:
        if raw is None:
            return BreakerRecord(provider=provider)
        return BreakerRecord.from_dict(orjson.loads(raw))

    def _breaker_op(
        self, provider: str, rule: Callable[[BreakerRecord], tuple[T, BreakerRecord]]
    ) -> Callable[[bytes | None], tuple[tuple[T, Change[BreakerRecord]], Write | None]]:
        def decide(raw: bytes | None) -> tuple[tuple[T, Change[BreakerRecord]], Write | None]:
            before = self._breaker(provider, raw)
            result, after = rule(before)
            write = None if after == before else self._put("breaker", provider, _dumps(after.to_dict()))
            return (result, Change(before, after)), write

        return decide

    async def get_breakers(self, providers: Iterable[str]) -> dict[str, BreakerRecord]:
        ids = list(providers)
        if not ids:
            return {}
        raws = await self._client().mget([self.key("breaker", p) for p in ids])
        return {p: self._breaker(p, _raw(raw)) for p, raw in zip(ids, raws, strict=True)}

    async def all_breakers(self) -> dict[str, BreakerRecord]:
        return {p: self._breaker(p, raw) for p, raw in await self._snapshot("breaker")}

    async def breaker_failure(
        self,
        provider: str,
        now: float,
        *,
        failure_threshold: int,
        reset_timeout_s: float,
        max_multiplier: float,
        reason: str,
    ) -> Change[BreakerRecord]:
        def rule(rec: BreakerRecord) -> tuple[None, BreakerRecord]:
            after = t.breaker_on_failure(
                rec,
                now,
                failure_threshold=failure_threshold,
                reset_timeout_s=reset_timeout_s,
                max_multiplier=max_multiplier,
                reason=reason,
            )
            return None, after

        _, change = await self._atomic(self.key("breaker", provider), self._breaker_op(provider, rule))
        return change

    async def breaker_success(
        self, provider: str, now: float, *, reset_timeout_s: float
    ) -> Change[BreakerRecord]:
        def rule(rec: BreakerRecord) -> tuple[None, BreakerRecord]:
            return None, t.breaker_on_success(rec, now, reset_timeout_s=reset_timeout_s)

        _, change = await self._atomic(self.key("breaker", provider), self._breaker_op(provider, rule))
        return change

    async def breaker_claim_probe(
        self, provider: str, now: float, *, half_open_probes: int, probe_lease_s: float
    ) -> tuple[ProbeVerdict, Change[BreakerRecord]]:
        def rule(rec: BreakerRecord) -> tuple[ProbeVerdict, BreakerRecord]:
            return t.breaker_on_claim(
                rec, now, half_open_probes=half_open_probes, probe_lease_s=probe_lease_s
            )

        return await self._atomic(self.key("breaker", provider), self._breaker_op(provider, rule))

    async def breaker_release_probe(self, provider: str, now: float) -> Change[BreakerRecord]:
        def rule(rec: BreakerRecord) -> tuple[None, BreakerRecord]:
            return None, t.breaker_on_release(rec, now)

        _, change = await self._atomic(self.key("breaker", provider), self._breaker_op(provider, rule))
        return change

    async def reset_breakers(self, provider: str | None = None) -> None:
        if provider is None:
            await self._reset("breaker", {})
            return
        async with self._client().pipeline(transaction=True) as pipe:
            self._put("breaker", provider, None)(pipe)
            await pipe.execute()

    # -- RESIL-2 cooldown and validity ---------------------------------------------------------
    @staticmethod
    def _cooldown(connection_id: str, raw: bytes | None) -> CooldownRecord:
        if raw is None:
            return CooldownRecord(connection_id=connection_id)
        return CooldownRecord.from_dict(orjson.loads(raw))

    def _cooldown_op(
        self, connection_id: str, rule: Callable[[CooldownRecord], CooldownRecord]
    ) -> Callable[[bytes | None], tuple[Change[CooldownRecord], Write | None]]:
        def decide(raw: bytes | None) -> tuple[Change[CooldownRecord], Write | None]:
            before = self._cooldown(connection_id, raw)
            after = rule(before)
            if after == before:
                return Change(before, after), None
            value = None if after.is_default else _dumps(after.to_dict())
            return Change(before, after), self._put("cooldown", connection_id, value)

        return decide

    async def _cooldown_update(
        self, connection_id: str, rule: Callable[[CooldownRecord], CooldownRecord]
    ) -> Change[CooldownRecord]:
        return await self._atomic(self.key("cooldown", connection_id), self._cooldown_op(connection_id, rule))

    async def get_cooldowns(self, connection_ids: Iterable[str]) -> dict[str, CooldownRecord]:
        ids = list(connection_ids)
        if not ids:
            return {}
        raws = await self._client().mget([self.key("cooldown", c) for c in ids])
        return {c: self._cooldown(c, _raw(raw)) for c, raw in zip(ids, raws, strict=True) if raw is not None}

    async def all_cooldowns(self) -> dict[str, CooldownRecord]:
        return {c: self._cooldown(c, raw) for c, raw in await self._snapshot("cooldown")}

    async def cooldown_extend(
        self,
        connection_id: str,
        now: float,
        *,
        provider: str,
        hint_s: float | None,
        base_s: float,
        max_s: float,
        max_hint_s: float,
        reason: str,
        last_error: str,
    ) -> Change[CooldownRecord]:
        def rule(rec: CooldownRecord) -> CooldownRecord:
            return t.cooldown_on_limit(
                rec,
                now,
                provider=provider,
                hint_s=hint_s,
                base_s=base_s,
                max_s=max_s,
                max_hint_s=max_hint_s,
                reason=reason,
                last_error=last_error,
            )

        return await self._cooldown_update(connection_id, rule)

    async def cooldown_success(self, connection_id: str) -> Change[CooldownRecord]:
        return await self._cooldown_update(connection_id, t.cooldown_on_success)

    async def mark_invalid(
        self, connection_id: str, now: float, *, provider: str, reason: str
    ) -> Change[CooldownRecord]:
        def rule(rec: CooldownRecord) -> CooldownRecord:
            return t.cooldown_on_invalid(rec, now, provider=provider, reason=reason)

        return await self._cooldown_update(connection_id, rule)

    async def mark_valid(self, connection_id: str) -> Change[CooldownRecord]:
        return await self._cooldown_update(connection_id, t.cooldown_on_valid)

    async def reset_cooldowns(self, *, connection: str | None = None, provider: str | None = None) -> None:
        match: dict[str, str] = {}
        if connection is not None:
            match["connection_id"] = connection
        if provider is not None:
            match["provider"] = provider
        await self._reset("cooldown", match)

    # -- RESIL-3 lockout -----------------------------------------------------------------------
    @staticmethod
    def _lockout(raw: bytes | None) -> LockoutRecord | None:
        return None if raw is None else LockoutRecord.from_dict(orjson.loads(raw))

    async def get_lockouts(self, keys: Iterable[LockKey]) -> dict[LockKey, LockoutRecord]:
        wanted = [LockKey(*k) for k in keys]
        if not wanted:
            return {}
        raws = await self._client().mget([self.key("lockout", k.as_str()) for k in wanted])
        found: dict[LockKey, LockoutRecord] = {}
        for k, raw in zip(wanted, raws, strict=True):
            rec = self._lockout(_raw(raw))
            if rec is not None:
                found[k] = rec
        return found

    async def get_ladder_records(
        self, providers: Iterable[str], connection_ids: Iterable[str], lock_keys: Iterable[LockKey]
    ) -> tuple[dict[str, BreakerRecord], dict[str, CooldownRecord], dict[LockKey, LockoutRecord]]:
        pids = list(dict.fromkeys(providers))
        cids = list(dict.fromkeys(connection_ids))
        lks = list(dict.fromkeys(LockKey(*k) for k in lock_keys))
        keys = [self.key("breaker", p) for p in pids] + [self.key("cooldown", c) for c in cids]
        keys += [self.key("lockout", k.as_str()) for k in lks]
        if not keys:
            return {}, {}, {}
        raws = [_raw(r) for r in await self._client().mget(keys)]  # one round trip for the three kinds
        nb, nc = len(pids), len(pids) + len(cids)
        breakers = {p: self._breaker(p, r) for p, r in zip(pids, raws[:nb], strict=True) if r is not None}
        cooldowns = {c: self._cooldown(c, r) for c, r in zip(cids, raws[nb:nc], strict=True) if r is not None}
        locks: dict[LockKey, LockoutRecord] = {}
        for k, r in zip(lks, raws[nc:], strict=True):
            rec = self._lockout(r)
            if rec is not None:
                locks[k] = rec
        return breakers, cooldowns, locks

    async def all_lockouts(self) -> list[LockoutRecord]:
        out: list[LockoutRecord] = []
        for _, raw in await self._snapshot("lockout"):
            rec = self._lockout(raw)
            if rec is not None:
                out.append(rec)
        return out

    async def lockout_extend(
        self,
        key: LockKey,
        now: float,
        *,
        base_s: float,
        max_s: float,
        until: float | None,
        hint_s: float | None,
        max_hint_s: float,
        reason: str,
    ) -> Change[LockoutRecord | None]:
        key = LockKey(*key)
        ident = key.as_str()

        def decide(raw: bytes | None) -> tuple[Change[LockoutRecord | None], Write | None]:
            before = self._lockout(raw)
            after = t.lockout_on_failure(
                before,
                key,
                now,
                base_s=base_s,
                max_s=max_s,
                until=until,
                hint_s=hint_s,
                max_hint_s=max_hint_s,
                reason=reason,
            )
            write = None if after == before else self._put("lockout", ident, _dumps(after.to_dict()))
            return Change(before, after), write

        return await self._atomic(self.key("lockout", ident), decide)

    async def lockout_clear(self, key: LockKey) -> Change[LockoutRecord | None]:
        ident = LockKey(*key).as_str()
        async with self._client().pipeline(transaction=True) as pipe:
            pipe.get(self.key("lockout", ident))
            self._put("lockout", ident, None)(pipe)
            raw, *_ = await pipe.execute()
        return Change(self._lockout(_raw(raw)), None)

    async def reset_lockouts(self, *, provider: str | None = None, connection: str | None = None) -> None:
        match: dict[str, str] = {}
        if provider is not None:
            match["provider"] = provider
        if connection is not None:
            match["connection"] = connection
        await self._reset("lockout", match)

    def success_is_noop(self, provider: str, connection_id: str, model: str) -> bool:
        return False  # other replicas write these records: only a read of Redis can tell

    # -- latency / error windows (AUTO-3, AUTO-5) ------------------------------------------------
    async def record_sample(
        self, key: str, now: float, *, latency_ms: float, ok: bool, ttft_ms: float | None = None
    ) -> None:
        k = self.key("window", key)
        async with self._client().pipeline(transaction=True) as pipe:
            pipe.lpush(k, _dumps([latency_ms, ok, ttft_ms, now]))
            pipe.ltrim(k, 0, self._window_size - 1)
            await pipe.execute()

    async def get_window_stats(self, keys: Iterable[str]) -> dict[str, WindowStats]:
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        async with self._client().pipeline(transaction=True) as pipe:
            for k in wanted:
                pipe.lrange(self.key("window", k), 0, -1)
            lists = await pipe.execute()
        empty = WindowStats()
        out: dict[str, WindowStats] = {}
        for k, raws in zip(wanted, lists, strict=True):
            if not raws:
                out[k] = empty
                continue
            items = [orjson.loads(raw) for raw in raws]  # newest first
            samples = [
                (float(lat), bool(ok), None if ttft is None else float(ttft))
                for lat, ok, ttft, _ in reversed(items)
            ]
            out[k] = _compute_stats(samples, float(items[0][3]))
        return out

    # -- quota snapshots -----------------------------------------------------------------------
    async def set_quota(self, connection_id: str, snapshot: QuotaSnapshot) -> None:
        await self._client().hset(self.key("quota"), connection_id, _dumps(snapshot.to_dict()))

    async def get_quota(self, connection_id: str) -> QuotaSnapshot | None:
        raw = await self._client().hget(self.key("quota"), connection_id)
        return None if raw is None else QuotaSnapshot.from_dict(orjson.loads(raw))

    async def get_quotas(self, connection_ids: Iterable[str]) -> dict[str, QuotaSnapshot]:
        ids = list(dict.fromkeys(connection_ids))
        if not ids:
            return {}
        raws = await self._client().hmget(self.key("quota"), ids)
        return {
            c: QuotaSnapshot.from_dict(orjson.loads(raw))
            for c, raw in zip(ids, raws, strict=True)
            if raw is not None
        }

    # -- in-flight counts (AUTO-3 connectionDensity, PROV-3 max_concurrent) ----------------------
    async def _inflight_add(self, connection_id: str, delta: int) -> int:
        keys = [self.key("inflight-replicas"), self.key("inflight", self.replica_id)]
        args = [
            self.key("inflight", ""),
            self.replica_id,
            int(INFLIGHT_TTL_S * 1000),
            delta,
            connection_id,
        ]
        return max(0, int(await self._eval("inflight_add", _INFLIGHT_ADD_LUA, keys, args)))

    async def incr_inflight(self, connection_id: str) -> int:
        return await self._inflight_add(connection_id, 1)

    async def decr_inflight(self, connection_id: str) -> int:
        return await self._inflight_add(connection_id, -1)

    async def get_inflight(self, connection_ids: Iterable[str]) -> dict[str, int]:
        ids = list(connection_ids)
        if not ids:
            return {}
        counts = await self._eval(
            "inflight_get",
            _INFLIGHT_GET_LUA,
            [self.key("inflight-replicas")],
            [self.key("inflight", ""), *ids],
        )
        return {c: max(0, int(n)) for c, n in zip(ids, counts, strict=True)}

    # -- generic counters and records ----------------------------------------------------------
    async def incr_counter(self, key: str, amount: int = 1) -> int:
        return int(await self._client().incrby(self.key("counter", key), amount))

    async def get_counter(self, key: str) -> int:
        raw = await self._client().get(self.key("counter", key))
        return 0 if raw is None else int(raw)

    async def _get_kv(self, key: str) -> bytes | None:
        value, expires = await self._client().hmget(self.key("record", key), ["v", "x"])
        if value is None:
            return None
        if expires is not None and float(expires) <= self.clock.time():
            return None
        return _raw(value)

    async def _set_kv(self, key: str, value: bytes, ttl_s: float | None) -> None:
        k = self.key("record", key)
        async with self._client().pipeline(transaction=True) as pipe:
            pipe.delete(k)
            if ttl_s is None:
                pipe.hset(k, "v", value)
            else:
                ttl_ms = math.ceil(ttl_s * 1000)
                if ttl_ms <= 0:  # already expired: nothing to store
                    await pipe.execute()
                    return
                pipe.hset(k, mapping={"v": value, "x": repr(self.clock.time() + ttl_s)})
                pipe.pexpire(k, ttl_ms)
            await pipe.execute()

    async def get_record(self, key: str) -> str | None:
        value = await self._get_kv(key)
        return None if value is None else value.decode()

    async def set_record(self, key: str, value: str, ttl_s: float | None = None) -> None:
        await self._set_kv(key, value.encode(), ttl_s)

    async def delete_record(self, key: str) -> None:
        await self._client().delete(self.key("record", key))

    async def get_json(self, key: str) -> Any | None:
        value = await self._get_kv(key)
        if value is None:
            return None
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None

    async def set_json(self, key: str, value: Any, ttl_s: float | None = None) -> None:
        await self._set_kv(key, _dumps(value), ttl_s)


class ResilientRoutingState:
    """Redis routing state that degrades to in-process state instead of failing (STORE-2).

    Every call goes to ``primary`` while Redis answers. A connection error or timeout trips it:
    one warning is logged (repeats at most every ``warn_every_s``), that call and every later one
    are served by ``fallback`` (default: a :class:`MemoryRoutingState` on the primary's clock), and
    a background task pings Redis every ``retry_after_s`` seconds; when it answers, calls go back
    to Redis. Any other Redis error serves just that call from the fallback. In-flight counts are
    balanced across the switch: a decrement goes to the backend that counted the increment, and
    decrements owed to Redis while it was down are replayed when it is back.
    """

    def __init__(
        self,
        primary: RedisRoutingState,
        fallback: RoutingState | None = None,
        *,
        retry_after_s: float = 5.0,
        warn_every_s: float = 60.0,
    ) -> None:
        self.primary = primary
        self.fallback: RoutingState = fallback or MemoryRoutingState(primary.clock)
        self.retry_after_s = retry_after_s
        self.warn_every_s = warn_every_s
        self._degraded = False
        self._last_warn: float | None = None
        self._probe_task: asyncio.Task[None] | None = None
        self._closed = False
        self._held: dict[str, int] = {}  # this replica's increments counted in Redis, per connection
        self._owed: dict[str, int] = {}  # decrements Redis missed while it was down

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str | None = None,
        clock: Clock | None = None,
        retry_after_s: float = 5.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> ResilientRoutingState:
        """A resilient state over ``RedisRoutingState(url=url, prefix=prefix, …)``."""
        primary = RedisRoutingState(
            url=url, prefix=prefix, clock=clock, connect_timeout_s=timeout_s, timeout_s=timeout_s
        )
        return cls(primary, retry_after_s=retry_after_s)

    @property
    def degraded(self) -> bool:
        """True while calls are served from the in-process fallback."""
        return self._degraded

    async def ready(self) -> bool:
        """Readiness of the shared state (OBS-4): ``False`` while degraded, else a live ``PING``."""
        if self._degraded:
            return False
        error = await self.primary.check()
        if error is None:
            return True
        self._trip(error)
        return False

    async def aclose(self) -> None:
        """Stop the reconnect task and close the Redis connection pool."""
        self._closed = True
        task, self._probe_task = self._probe_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.primary.aclose()

    # -- degradation -------------------------------------------------------------------------
    def _should_warn(self) -> bool:
        now = time.monotonic()
        if self._last_warn is None or now - self._last_warn >= self.warn_every_s:
            self._last_warn = now
            return True
        return False

    def _trip(self, exc: BaseException) -> None:
        if not self._degraded:
            self._degraded = True
            if self._should_warn():
                log.warning(
                    "STORE-2: Redis routing state unavailable (%s: %s); serving routing state from "
                    "this process and retrying Redis every %g s",
                    type(exc).__name__,
                    exc,
                    self.retry_after_s,
                )
        if not self._closed and (self._probe_task is None or self._probe_task.done()):
            self._probe_task = asyncio.get_running_loop().create_task(self._probe())

    async def _probe(self) -> None:
        while self._degraded and not self._closed:
            await asyncio.sleep(self.retry_after_s)
            if await self.primary.ping():
                try:
                    await self._replay_owed()
                except _FAILURES:
                    continue
                self._degraded = False
                log.warning("STORE-2: Redis routing state reachable again; shared state resumed")
                return
            if self._should_warn():
                log.warning("STORE-2: Redis routing state still unavailable; serving local state")

    async def _replay_owed(self) -> None:
        for cid in list(self._owed):
            while self._owed.get(cid, 0) > 0:
                await self.primary.decr_inflight(cid)
                self._owed[cid] -= 1
            self._owed.pop(cid, None)

    def _on_error(self, exc: RedisError) -> None:
        if self._should_warn():
            log.warning("STORE-2: Redis routing state call failed (%s); served locally", exc)

    async def _run(self, op: Callable[[RoutingState], Awaitable[T]]) -> T:
        if not self._degraded:
            try:
                return await op(self.primary)
            except _UNAVAILABLE as exc:
                self._trip(exc)
            except RedisError as exc:
                self._on_error(exc)
        return await op(self.fallback)

    # -- RESIL-1 breaker -----------------------------------------------------------------------
    async def get_breakers(self, providers: Iterable[str]) -> dict[str, BreakerRecord]:
        ids = list(providers)
        return await self._run(lambda s: s.get_breakers(ids))

    async def all_breakers(self) -> dict[str, BreakerRecord]:
        return await self._run(lambda s: s.all_breakers())

    async def breaker_failure(
        self,
        provider: str,
        now: float,
        *,
        failure_threshold: int,
        reset_timeout_s: float,
        max_multiplier: float,
        reason: str,
    ) -> Change[BreakerRecord]:
        return await self._run(
            lambda s: s.breaker_failure(
                provider,
                now,
                failure_threshold=failure_threshold,
                reset_timeout_s=reset_timeout_s,
                max_multiplier=max_multiplier,
                reason=reason,
            )
        )

    async def breaker_success(
        self, provider: str, now: float, *, reset_timeout_s: float
    ) -> Change[BreakerRecord]:
        return await self._run(lambda s: s.breaker_success(provider, now, reset_timeout_s=reset_timeout_s))

    async def breaker_claim_probe(
        self, provider: str, now: float, *, half_open_probes: int, probe_lease_s: float
    ) -> tuple[ProbeVerdict, Change[BreakerRecord]]:
        return await self._run(
            lambda s: s.breaker_claim_probe(
                provider, now, half_open_probes=half_open_probes, probe_lease_s=probe_lease_s
            )
        )

    async def breaker_release_probe(self, provider: str, now: float) -> Change[BreakerRecord]:
        return await self._run(lambda s: s.breaker_release_probe(provider, now))

    async def reset_breakers(self, provider: str | None = None) -> None:
        await self._run(lambda s: s.reset_breakers(provider))

    # -- RESIL-2 cooldown ----------------------------------------------------------------------
    async def get_cooldowns(self, connection_ids: Iterable[str]) -> dict[str, CooldownRecord]:
        ids = list(connection_ids)
        return await self._run(lambda s: s.get_cooldowns(ids))

    async def all_cooldowns(self) -> dict[str, CooldownRecord]:
        return await self._run(lambda s: s.all_cooldowns())

    async def cooldown_extend(
        self,
        connection_id: str,
        now: float,
        *,
        provider: str,
        hint_s: float | None,
        base_s: float,
        max_s: float,
        max_hint_s: float,
        reason: str,
        last_error: str,
    ) -> Change[CooldownRecord]:
        return await self._run(
            lambda s: s.cooldown_extend(
                connection_id,
                now,
                provider=provider,
                hint_s=hint_s,
                base_s=base_s,
                max_s=max_s,
                max_hint_s=max_hint_s,
                reason=reason,
                last_error=last_error,
            )
        )

    async def cooldown_success(self, connection_id: str) -> Change[CooldownRecord]:
        return await self._run(lambda s: s.cooldown_success(connection_id))

    async def mark_invalid(
        self, connection_id: str, now: float, *, provider: str, reason: str
    ) -> Change[CooldownRecord]:
        return await self._run(lambda s: s.mark_invalid(connection_id, now, provider=provider, reason=reason))

    async def mark_valid(self, connection_id: str) -> Change[CooldownRecord]:
        return await self._run(lambda s: s.mark_valid(connection_id))

    async def reset_cooldowns(self, *, connection: str | None = None, provider: str | None = None) -> None:
        await self._run(lambda s: s.reset_cooldowns(connection=connection, provider=provider))

    # -- RESIL-3 lockout -----------------------------------------------------------------------
    async def get_ladder_records(
        self, providers: Iterable[str], connection_ids: Iterable[str], lock_keys: Iterable[LockKey]
    ) -> tuple[dict[str, BreakerRecord], dict[str, CooldownRecord], dict[LockKey, LockoutRecord]]:
        pids, cids, lks = list(providers), list(connection_ids), list(lock_keys)
        return await self._run(lambda s: s.get_ladder_records(pids, cids, lks))

    async def get_lockouts(self, keys: Iterable[LockKey]) -> dict[LockKey, LockoutRecord]:
        wanted = list(keys)
        return await self._run(lambda s: s.get_lockouts(wanted))

    async def all_lockouts(self) -> list[LockoutRecord]:
        return await self._run(lambda s: s.all_lockouts())

    async def lockout_extend(
        self,
        key: LockKey,
        now: float,
        *,
        base_s: float,
        max_s: float,
        until: float | None,
        hint_s: float | None,
        max_hint_s: float,
        reason: str,
    ) -> Change[LockoutRecord | None]:
        return await self._run(
            lambda s: s.lockout_extend(
                key,
                now,
                base_s=base_s,
                max_s=max_s,
                until=until,
                hint_s=hint_s,
                max_hint_s=max_hint_s,
                reason=reason,
            )
        )

    async def lockout_clear(self, key: LockKey) -> Change[LockoutRecord | None]:
        return await self._run(lambda s: s.lockout_clear(key))

    async def reset_lockouts(self, *, provider: str | None = None, connection: str | None = None) -> None:
        await self._run(lambda s: s.reset_lockouts(provider=provider, connection=connection))

    def success_is_noop(self, provider: str, connection_id: str, model: str) -> bool:
        # degraded: the local fallback holds the records and can answer; else Redis must be asked
        return self._degraded and self.fallback.success_is_noop(provider, connection_id, model)

    # -- windows, quota ------------------------------------------------------------------------
    async def record_sample(
        self, key: str, now: float, *, latency_ms: float, ok: bool, ttft_ms: float | None = None
    ) -> None:
        await self._run(lambda s: s.record_sample(key, now, latency_ms=latency_ms, ok=ok, ttft_ms=ttft_ms))

    async def get_window_stats(self, keys: Iterable[str]) -> dict[str, WindowStats]:
        wanted = list(keys)
        return await self._run(lambda s: s.get_window_stats(wanted))

    async def set_quota(self, connection_id: str, snapshot: QuotaSnapshot) -> None:
        await self._run(lambda s: s.set_quota(connection_id, snapshot))

    async def get_quota(self, connection_id: str) -> QuotaSnapshot | None:
        return await self._run(lambda s: s.get_quota(connection_id))

    async def get_quotas(self, connection_ids: Iterable[str]) -> dict[str, QuotaSnapshot]:
        ids = list(connection_ids)
        return await self._run(lambda s: s.get_quotas(ids))

    # -- in-flight (balanced across a switch, see the class docstring) ----------------------------
    async def incr_inflight(self, connection_id: str) -> int:
        if not self._degraded:
            try:
                n = await self.primary.incr_inflight(connection_id)
            except _UNAVAILABLE as exc:
                self._trip(exc)
            except RedisError as exc:
                self._on_error(exc)
            else:
                self._held[connection_id] = self._held.get(connection_id, 0) + 1
                return n
        return await self.fallback.incr_inflight(connection_id)

    async def decr_inflight(self, connection_id: str) -> int:
        held = self._held.get(connection_id, 0)
        if held <= 0:  # the increment was counted locally
            return await self.fallback.decr_inflight(connection_id)
        if held == 1:
            del self._held[connection_id]
        else:
            self._held[connection_id] = held - 1
        if not self._degraded:
            try:
                return await self.primary.decr_inflight(connection_id)
            except _UNAVAILABLE as exc:
                self._trip(exc)
            except RedisError as exc:
                self._on_error(exc)
        self._owed[connection_id] = self._owed.get(connection_id, 0) + 1
        return (await self.get_inflight([connection_id]))[connection_id]

    async def get_inflight(self, connection_ids: Iterable[str]) -> dict[str, int]:
        ids = list(connection_ids)
        local = await self.fallback.get_inflight(ids)
        if not self._degraded:
            try:
                shared = await self.primary.get_inflight(ids)
            except _UNAVAILABLE as exc:
                self._trip(exc)
            except RedisError as exc:
                self._on_error(exc)
            else:
                return {c: shared.get(c, 0) + local.get(c, 0) for c in ids}
        return {c: local.get(c, 0) + self._held.get(c, 0) for c in ids}

    # -- counters and records ------------------------------------------------------------------
    async def incr_counter(self, key: str, amount: int = 1) -> int:
        return await self._run(lambda s: s.incr_counter(key, amount))

    async def get_counter(self, key: str) -> int:
        return await self._run(lambda s: s.get_counter(key))

    async def get_record(self, key: str) -> str | None:
        return await self._run(lambda s: s.get_record(key))

    async def set_record(self, key: str, value: str, ttl_s: float | None = None) -> None:
        await self._run(lambda s: s.set_record(key, value, ttl_s))

    async def delete_record(self, key: str) -> None:
        await self._run(lambda s: s.delete_record(key))

    async def get_json(self, key: str) -> Any | None:
        return await self._run(lambda s: s.get_json(key))

    async def set_json(self, key: str, value: Any, ttl_s: float | None = None) -> None:
        await self._run(lambda s: s.set_json(key, value, ttl_s))


if TYPE_CHECKING:

    def _conforms(a: RedisRoutingState, b: ResilientRoutingState) -> tuple[RoutingState, RoutingState]:
        return a, b  # mypy proves both backends meet the protocol
