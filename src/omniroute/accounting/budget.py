"""Key budgets that hold across every worker and replica (API-8): reserve before the call, settle after.

Before a call the gateway reserves the call's estimated cost (:func:`estimate_usd`) against the key's
budget in one atomic step, and refuses it with 402 when ``spent + reserved + estimate`` would pass the
cap (or nothing is left). After the call it settles: the real cost (from the upstream's usage) is added
to the spend and the estimate released, again atomically. Any number of processes therefore commit at
most the cap; a call can only go over by what its real cost exceeds its estimate, at most one request's
estimate when the estimate is right.

Where the counters live: in Redis when ``redis_url`` is configured (one hash per key and period, two
Lua scripts, :data:`RESERVE_LUA` and :data:`SETTLE_LUA`), else in the database (one conditional
``UPDATE`` each way, :meth:`~omniroute.store.repos.api_keys.ApiKeysRepo.reserve_spend` and
``settle_spend``). An unreachable Redis falls back to the database for that call. A Redis reservation
that nothing settles (its process died mid-call) is released after ``hold_s``; a database one is held
until the key's period ends. The database's
``spent_usd`` is kept up to date in both cases (the usage writer adds each batch), so listings and a
Redis that lost its keys start from the stored spend.

Fusion and pipeline combos reserve the sum of one estimate per member call
(:func:`omniroute.routing.member_estimate.multi_call_estimate_usd`) and are settled with the cost of all
their calls.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from omniroute.accounting.periods import period_bounds
from omniroute.clock import Clock
from omniroute.errors import BudgetExceeded
from omniroute.values import Candidate, ChatRequest

if TYPE_CHECKING:
    from omniroute.state.redis import RedisRoutingState
    from omniroute.store import Store

__all__ = [
    "ESTIMATE_OUTPUT_CAP",
    "Budgets",
    "Reservation",
    "asked_output",
    "budget_error",
    "estimate_tokens",
    "estimate_usd",
    "prompt_tokens",
    "update_key",
]

log = logging.getLogger("omniroute.budget")

ESTIMATE_OUTPUT_CAP: Final = 4096
"""Output tokens assumed for a call that sets no ``max_tokens`` (or the model's own maximum output
when that is smaller): the cap on the estimate of an unbounded call. A call that sets ``max_tokens``
is estimated at that (capped at the model's maximum output)."""

_PURGE_LUA: Final = """
local function purge(h, z, now)
  local dead = redis.call('ZRANGEBYSCORE', z, '-inf', now)
  for _, rid in ipairs(dead) do
    local amt = redis.call('HGET', h, 'r:' .. rid)
    if amt then
      redis.call('HINCRBYFLOAT', h, 'reserved', -tonumber(amt))
      redis.call('HDEL', h, 'r:' .. rid)
    end
  end
  if #dead > 0 then redis.call('ZREMRANGEBYSCORE', z, '-inf', now) end
end
"""

RESERVE_LUA: Final = (
    _PURGE_LUA
    + """
purge(KEYS[1], KEYS[2], tonumber(ARGV[5]))
local spent = redis.call('HGET', KEYS[1], 'spent')
if not spent then
  redis.call('HSET', KEYS[1], 'spent', ARGV[3])
  spent = ARGV[3]
end
spent = tonumber(spent)
local held = tonumber(redis.call('HGET', KEYS[1], 'reserved') or '0')
if held < 0 then held = 0 end
local est = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
if spent + held >= cap or spent + held + est > cap then
  return {0, tostring(spent), tostring(held)}
end
redis.call('HINCRBYFLOAT', KEYS[1], 'reserved', ARGV[1])
redis.call('HSET', KEYS[1], 'r:' .. ARGV[6], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[7], ARGV[6])
if tonumber(ARGV[4]) > 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
return {1, tostring(spent), tostring(held + est)}
"""
)
"""KEYS[1] the key's hash for the period (``spent``, ``reserved`` and one ``r:<id>`` field per
reservation), KEYS[2] the sorted set of reservation ids by expiry; ARGV: estimate (USD), cap (USD),
spend to start from when the hash is new (the stored spend of this period), TTL (s, 0 = none), now
(epoch s), reservation id, its expiry (epoch s). Expired reservations are released first. Returns
``{ok, spent, reserved}``."""

SETTLE_LUA: Final = """
local amt = redis.call('HGET', KEYS[1], 'r:' .. ARGV[1])
if amt then
  redis.call('HINCRBYFLOAT', KEYS[1], 'reserved', -tonumber(amt))
  redis.call('HDEL', KEYS[1], 'r:' .. ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
redis.call('HINCRBYFLOAT', KEYS[3], 'spent', ARGV[2])
if tonumber(ARGV[3]) > 0 then redis.call('EXPIRE', KEYS[3], ARGV[3]) end
return 1
"""
"""KEYS[1] and KEYS[2] the hash and sorted set the reservation was made in, KEYS[3] the current
period's hash; ARGV: reservation id, real cost to add (USD), TTL (s, 0 = none). A reservation that
already expired releases nothing twice."""

RESYNC_LUA: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'spent', ARGV[1]) end
return 1
"""
"""KEYS[1] the key's hash for its current period; ARGV[1] the spend (USD) it starts from. A hash that
does not exist yet is left alone: the next reservation seeds it from the stored spend."""

DEFAULT_HOLD_S: Final = 3600.0
"""How long (s) a Redis reservation is held when nothing settles it (a process that died mid-call):
then the next reservation of the key releases it. The gateway passes its total request deadline plus
five minutes."""

LATE_SETTLE_S: Final = 86_400.0
"""How long (s) a period's Redis hash outlives its period, so a call that started before the boundary
still finds its reservation to release."""


@dataclass(slots=True)
class Reservation:
    """One call's hold on its key's budget: ``estimate_usd`` reserved in the period starting at
    ``period_start`` (epoch s), in Redis (``in_redis``) or in the database; ``settled`` once released.
    ``members_usd`` is what member calls of a failed fusion or pipeline request charged in their own
    usage rows (no main row carries their cost): the Redis settlement adds it to the spend."""

    key_id: str
    estimate_usd: float
    period: str
    period_start: float
    in_redis: bool
    settled: bool = False
    rid: str = ""
    members_usd: float = 0.0


def asked_output(req: ChatRequest) -> int | None:
    """Output tokens the request allows: ``max_completion_tokens``/``max_tokens``; 0 for an
    embeddings request (no output); ``None`` when unbounded."""
    body = req.body
    if "messages" not in body and "input" in body:
        return 0
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    return asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else None


def prompt_tokens(req: ChatRequest) -> int:
    """Estimated prompt tokens: the chat estimate, or ``chars / 4`` of an embeddings ``input``."""
    body = req.body
    if "messages" not in body and "input" in body:
        return len(str(body["input"])) // 4 + 1
    return int(req.prompt_estimate)


def estimate_usd(req: ChatRequest, candidates: Iterable[Candidate]) -> float:
    """The most a call can cost on any of ``candidates`` (USD): estimated prompt tokens × input price +
    output tokens × output price (prices USD per 1M tokens, at the tier the prompt size selects). Output
    tokens are the request's ``max_completion_tokens``/``max_tokens``, else
    :data:`ESTIMATE_OUTPUT_CAP`, never more than the model's maximum output (none for embeddings).
    Unknown prices count 0."""
    asked_out = asked_output(req)
    prompt = -1
    best = 0.0
    for cand in candidates:
        m = cand.model
        if not m.price_known:
            continue
        if prompt < 0:
            prompt = prompt_tokens(req)
        prices = m.token_prices(prompt)
        if prices is None:
            continue
        out = ESTIMATE_OUTPUT_CAP if asked_out is None else asked_out
        if m.max_output_tokens:
            out = min(out, m.max_output_tokens)
        best = max(best, (prompt * prices.input + out * prices.output) / 1_000_000)
    return best


def _usd(v: float) -> str:
    return f"{v:.6f}".rstrip("0").rstrip(".") if v else "0"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def budget_error(
    rec: dict[str, Any], spent: float, reserved: float, estimate: float, reset: float | None
) -> BudgetExceeded:
    """The 402 naming the spend, the cap and when the budget resets; the same figures are in the body's
    top-level ``budget`` member (``spent_usd``, ``reserved_usd``, ``budget_usd``, ``budget_period``,
    ``resets_at`` ISO 8601 UTC or ``null``)."""
    cap = float(rec["budget_usd"])
    period = str(rec.get("budget_period") or "total")
    kind = "lifetime" if period == "total" else period
    held = f" and ${_usd(reserved)} is reserved by calls in flight" if reserved > 0 else ""
    need = f"; this call needs up to ${_usd(estimate)}" if estimate > 0 else ""
    when = f"It resets at {_iso(reset)}." if reset is not None else "It does not reset; raise it to continue."
    return BudgetExceeded(
        f"This API key has spent ${_usd(spent)} of its ${_usd(cap)} {kind} budget{held}{need}. {when}",
        extra={
            "budget": {
                "spent_usd": round(spent, 9),
                "reserved_usd": round(reserved, 9),
                "budget_usd": cap,
                "budget_period": period,
                "resets_at": _iso(reset) if reset is not None else None,
            }
        },
    )


class Budgets:
    """Reservations and settlements of key budgets for one gateway process.

    ``store`` returns the open store (``None`` before start); ``redis`` is the shared routing state's
    Redis backend when ``redis_url`` is configured. Settlements in Redis run as background tasks;
    :meth:`drain` waits for them (at shutdown)."""

    def __init__(
        self,
        clock: Clock,
        store: Callable[[], Store | None],
        redis: RedisRoutingState | None,
        *,
        hold_s: float = DEFAULT_HOLD_S,
    ) -> None:
        self.clock = clock
        self.hold_s = hold_s
        self._store = store
        self._redis = redis
        self._tasks: set[asyncio.Task[None]] = set()

    async def reserve(self, rec: dict[str, Any] | None, estimate: float) -> Reservation | None:
        """Reserve ``estimate`` (USD) of ``rec``'s budget; ``None`` when the key has no budget.
        Raises :class:`BudgetExceeded` (402) when the reservation does not fit."""
        if rec is None or rec.get("budget_usd") is None:
            return None
        period = str(rec.get("budget_period") or "total")
        now = self.clock.time()
        start, reset = period_bounds(period, now)
        key_id = str(rec["id"])
        if self._redis is not None:
            rid = uuid.uuid4().hex
            got = await self._reserve_redis(rec, key_id, start, reset, estimate, now, rid)
            if got is not None:
                ok, spent, held = got
                if not ok:
                    raise budget_error(rec, spent, held, estimate, reset)
                return Reservation(key_id, estimate, period, start, in_redis=True, rid=rid)
        store = self._store()
        assert store is not None
        ok, spent, held = await store.reserve_spend(key_id, start, estimate)
        if not ok:
            raise budget_error(rec, spent, held, estimate, reset)
        return Reservation(key_id, estimate, period, start, in_redis=False)

    async def _reserve_redis(
        self,
        rec: dict[str, Any],
        key_id: str,
        start: float,
        reset: float | None,
        estimate: float,
        now: float,
        rid: str,
    ) -> tuple[bool, float, float] | None:
        """The Redis reservation, or ``None`` when Redis cannot be reached (the database serves)."""
        from omniroute.state.redis.backend import FAILURES

        assert self._redis is not None
        seed = float(rec.get("spent_usd") or 0) if float(rec.get("period_start") or 0) >= start else 0.0
        ttl = int(reset - now + LATE_SETTLE_S) if reset is not None else 0
        try:
            res = await self._redis.run_script(
                RESERVE_LUA,
                [self._hash(key_id, start), self._hash(key_id, start, "holds")],
                [
                    repr(estimate),
                    repr(float(rec["budget_usd"])),
                    repr(seed),
                    ttl,
                    repr(now),
                    rid,
                    repr(now + self.hold_s),
                ],
            )
        except FAILURES as exc:
            log.warning("key budget: Redis unreachable, reserving in the database: %s", exc)
            return None
        return bool(int(res[0])), float(res[1]), float(res[2])

    def _hash(self, key_id: str, start: float, kind: str = "budget") -> str:
        assert self._redis is not None
        return self._redis.key(kind, f"{key_id}:{int(start)}")

    def settle(self, res: Reservation | None, cost_usd: float) -> float:
        """Settle ``res`` with the call's real cost (USD), once (later calls are no-ops). Returns the
        estimate the usage writer must release in the database with the cost (0 when the reservation
        was in Redis, which is settled here, in the background, or when there is none)."""
        if res is None or res.settled:
            return 0.0
        res.settled = True
        if not res.in_redis:
            return res.estimate_usd
        self._spawn(self._settle_redis(res, cost_usd + res.members_usd))
        return 0.0

    @staticmethod
    def note_member_charge(res: Reservation | None, cost_usd: float) -> None:
        """Remember ``cost_usd`` (USD) charged by a member call's own usage row against ``res``, so the
        Redis settlement counts it (the database counts the row itself); a no-op without a reservation
        or once settled."""
        if res is not None and not res.settled:
            res.members_usd += cost_usd

    async def _settle_redis(self, res: Reservation, cost_usd: float) -> None:
        from omniroute.state.redis.backend import FAILURES

        assert self._redis is not None
        now = self.clock.time()
        start, reset = period_bounds(res.period, now)
        ttl = int(reset - now + LATE_SETTLE_S) if reset is not None else 0
        try:
            await self._redis.run_script(
                SETTLE_LUA,
                [
                    self._hash(res.key_id, res.period_start),
                    self._hash(res.key_id, res.period_start, "holds"),
                    self._hash(res.key_id, start),
                ],
                [res.rid, repr(cost_usd), ttl],
            )
        except FAILURES as exc:
            log.warning("key budget: Redis unreachable, settlement of key %s lost: %s", res.key_id, exc)

    def release(self, res: Reservation | None) -> None:
        """Release ``res`` without a cost, in the background, when nothing settled it (a request that
        ended without a usage row); a no-op once settled."""
        if res is None or res.settled:
            return
        if res.in_redis:
            self.settle(res, 0.0)
            return
        res.settled = True
        store = self._store()
        if store is not None:
            self._spawn(store.settle_spend(res.key_id, res.period_start, 0.0, res.estimate_usd))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def note_spend(self, rec: dict[str, Any] | None, cost_usd: float) -> None:
        """Add ``cost_usd`` to the in-memory record's ``spent_usd`` for this period (the quick pre-check
        of :meth:`over_budget` and the seed of a new Redis hash), starting it over at a boundary."""
        if rec is None or not cost_usd:
            return
        start = self.period_start(rec)
        if float(rec.get("period_start") or 0) < start:
            rec["period_start"] = start
            rec["spent_usd"] = 0.0
        rec["spent_usd"] = float(rec.get("spent_usd") or 0) + cost_usd

    def over_budget(self, rec: dict[str, Any] | None) -> BudgetExceeded | None:
        """The 402 when ``rec``'s known spend this period has reached its cap (a quick pre-check from
        memory; the reservation is the exact check), else ``None``."""
        if rec is None or rec.get("budget_usd") is None:
            return None
        start, reset = period_bounds(str(rec.get("budget_period") or "total"), self.clock.time())
        spent = float(rec.get("spent_usd") or 0) if float(rec.get("period_start") or 0) >= start else 0.0
        if spent >= float(rec["budget_usd"]):
            return budget_error(rec, spent, 0.0, 0.0, reset)
        return None

    def current(self, rec: dict[str, Any]) -> dict[str, Any]:
        """A copy of the stored key record as of now: ``spent_usd``/``reserved_usd`` are 0 when its
        period has turned since they were last written, and ``resets_at`` (ISO 8601 UTC, ``None`` for
        ``total``) says when the budget starts over next (``GET /api/keys``)."""
        start, reset = period_bounds(str(rec.get("budget_period") or "total"), self.clock.time())
        out = dict(rec)
        if float(rec.get("period_start") or 0) < start:
            out["spent_usd"] = 0.0
            out["reserved_usd"] = 0.0
        out["resets_at"] = _iso(reset) if reset is not None else None
        return out

    async def restart_period(self, rec: dict[str, Any]) -> None:
        """After a key's ``budget_period`` changed: set the Redis counter of its current period (if one
        exists already, e.g. from an earlier spell on that period) to the stored ``spent_usd``, which the
        change recomputed; its reservations are kept. A no-op without Redis; an unreachable Redis is
        logged (the next new counter starts from the stored spend anyway)."""
        from omniroute.state.redis.backend import FAILURES

        if self._redis is None:
            return
        start = self.period_start(rec)
        spent = float(rec.get("spent_usd") or 0) if float(rec.get("period_start") or 0) >= start else 0.0
        try:
            await self._redis.run_script(RESYNC_LUA, [self._hash(str(rec["id"]), start)], [repr(spent)])
        except FAILURES as exc:
            log.warning("key budget: Redis unreachable, counter of key %s not resynced: %s", rec["id"], exc)

    async def drain(self) -> None:
        """Wait for the settlements still running (gateway shutdown)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def period_start(self, rec: dict[str, Any] | None) -> float:
        """The start (epoch s) of the current budget period of ``rec`` (0.0 for ``total`` or no key)."""
        if rec is None:
            return 0.0
        return period_bounds(str(rec.get("budget_period") or "total"), self.clock.time())[0]


async def update_key(
    store: Store, id_or_name: str, changes: dict[str, Any], now: float
) -> dict[str, Any] | None:
    """Apply validated ``changes`` to the key named by id or name (``PATCH /api/keys/{id}``,
    ``omniroute keys update``); its new record, ``None`` when no such key. A changed
    ``budget_period`` starts the spend of the new current period (at ``now``, epoch s) from what the
    usage log records for the key since that period began, so spend made in it still counts."""
    restart: tuple[float, float] | None = None
    period = changes.get("budget_period")
    if period is not None:
        old = next((k for k in await store.list_api_keys() if id_or_name in (k["id"], k["name"])), None)
        if old is None:
            return None
        if (old.get("budget_period") or "total") != period:
            start = period_bounds(period, now)[0]
            restart = (start, await store.key_spend_since(str(old["id"]), start))
    return await store.update_api_key(id_or_name, changes, restart=restart)


def estimate_tokens(req: ChatRequest, candidates: Iterable[Candidate]) -> int:
    """Tokens a call counts against a tokens-per-minute limit before it runs: estimated prompt tokens
    plus ``max_completion_tokens``/``max_tokens`` (else :data:`ESTIMATE_OUTPUT_CAP`), capped at the
    largest maximum output among ``candidates`` — as OpenAI counts requests against its own limits."""
    asked = asked_output(req)
    out = ESTIMATE_OUTPUT_CAP if asked is None else asked
    most = max((c.model.max_output_tokens or 0 for c in candidates), default=0)
    if most:
        out = min(out, most)
    return prompt_tokens(req) + out
