"""Strategies that spread load over time with counters in RoutingState (COMBO-3): ``round-robin``,
``strict-random`` and ``least-used``. Every counter lives under the combo's namespace and moves by
atomic increments only, so concurrent requests (and, later, replicas on a shared backend) each get
their own ticket.

* ``round-robin``: a ticket counter ``rr`` hands out positions; with a sticky limit L (combo →
  global → default 3, clamped to [1, 1000]) tickets come in batches of L per target, so L requests in
  a row go to one target, then the next (L = 1: plain rotation). When a request is served by another
  target than its ticket's (the sticky target was unavailable or failed), the counter jumps so the
  served target's batch continues from there — the unavailable sticky target is dropped first
  (reference §2.3).
* ``strict-random``: a deck per combo: ticket t belongs to cycle t // n; each cycle is a permutation
  of the targets drawn from a per-combo salt (kept in state), so every target is first exactly once
  per cycle; the rest of the order is shuffled from ``ctx.rng`` (#3959).
* ``least-used``: fewest requests served through this combo first (counted per target on success);
  ties keep definition order.
"""

from __future__ import annotations

import random

from omniroute.routing.strategies.base import ComboTarget, Ordering, StrategyContext
from omniroute.values import Candidate

__all__ = ["LeastUsed", "RoundRobin", "StrictRandom"]

MAX_STICKY = 1000


class RoundRobin:
    """``round-robin`` with sticky batches (see module docstring)."""

    name = "round-robin"
    expands_connections = False
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        ts = list(ctx.targets)
        n = len(ts)
        if n == 0:
            return Ordering([], "no targets")
        batch = ctx.settings.int_("stickyRoundRobinLimit", 3, 1, MAX_STICKY)
        ticket = await ctx.state.incr("rr") - 1
        start = (ticket // batch) % n
        ordered = ts[start:] + ts[:start]
        pos = {t.index: i for i, t in enumerate(ts)}

        async def on_success(target: ComboTarget, cand: Candidate) -> None:
            served = pos.get(target.index, start)
            if served == start:
                return
            cycle = n * batch
            current = await ctx.state.counter("rr")
            delta = (served * batch + 1 - current) % cycle
            if delta:
                await ctx.state.incr("rr", delta)

        why = f"rotation ticket {ticket}: start at {ts[start].key} (batch {batch})"
        return Ordering(ordered, why, on_success)


class StrictRandom:
    """``strict-random``: shuffled deck, every target once per cycle (see module docstring)."""

    name = "strict-random"
    expands_connections = False
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        ts = list(ctx.targets)
        n = len(ts)
        if n == 0:
            return Ordering([], "no targets")
        ticket = await ctx.state.incr("deck") - 1
        cycle, pos = divmod(ticket, n)
        salt = await ctx.state.get_record("deck-salt")
        if salt is None:
            salt = f"{ctx.rng.getrandbits(64):016x}"
            await ctx.state.set_record("deck-salt", salt)
        deck = list(range(n))
        # The deck of one cycle must be the same for every request of that cycle, so it is derived
        # from state (salt, size, cycle), not from the request's own random source.
        random.Random(f"{salt}:{n}:{cycle}").shuffle(deck)
        chosen = ts[deck[pos]]
        rest = [t for t in ts if t is not chosen]
        ctx.rng.shuffle(rest)
        return Ordering([chosen, *rest], f"deck cycle {cycle}, card {pos + 1}/{n}: {chosen.key}")


class LeastUsed:
    """``least-used``: fewest served requests first; ties keep definition order."""

    name = "least-used"
    expands_connections = False
    protects_first = False

    async def order(self, ctx: StrategyContext) -> Ordering:
        counts = {t.index: await ctx.state.counter(f"used:{t.key}") for t in ctx.targets}
        ts = sorted(ctx.targets, key=lambda t: (counts[t.index], t.index))

        async def on_success(target: ComboTarget, cand: Candidate) -> None:
            await ctx.state.incr(f"used:{target.key}")

        why = "fewest served first: " + ", ".join(f"{t.key}={counts[t.index]}" for t in ts[:3])
        return Ordering(ts, why, on_success)
