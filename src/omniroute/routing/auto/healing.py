"""Self-healing, probes, incident mode and bandit exploration of the auto engine (AUTO-8).

- A candidate scoring below :data:`EXCLUSION_THRESHOLD` (0.2) is excluded for 5 min, doubling on each
  repeat up to 30 min (seed 001 "Self-Healing"). Once the cooldown has passed, exactly one request
  claims a probe: the candidate is tried first with a reduced timeout (:data:`PROBE_TIMEOUT_S`); a
  success re-admits it (and resets the doubling), a failure excludes it again for twice as long. A
  probe that never reports (client gone) frees itself when its record expires
  (:data:`PROBE_LEASE_S` after the cooldown). OPEN breakers are the ladder's business (RESIL-1) and
  never trigger this exclusion.
- Incident mode: more than half of the pool's candidates have an OPEN breaker → exploration off and
  reliability-first weights.
- Exploration: with probability ``rate`` (default 5 %, ``auto/smart`` 10 %) a request goes to a random
  healthy candidate other than the router's pick, drawn from the request's seeded random
  (:func:`request_rng`), never in incident mode.

State (all in :class:`~omniroute.state.base.RoutingState`, atomic per call): JSON record
``auto:heal:<candidate key>`` ``{until, level, score}`` (epoch s), counter
``auto:heal:lvl:<key>`` (the doubling level), counter ``auto:heal:probe:<key>:<until>`` (probe claim,
first claimant wins) and counter ``auto:heal:n`` (exclusions ever made; 0 lets requests skip reads).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from omniroute.routing.auto.scoring import CandidateInputs
from omniroute.state.base import RoutingState

__all__ = [
    "BASE_COOLDOWN_S",
    "EXCLUSION_THRESHOLD",
    "INCIDENT_OPEN_FRACTION",
    "MAX_COOLDOWN_S",
    "PROBE_LEASE_S",
    "PROBE_TIMEOUT_S",
    "HealEntry",
    "claim_probe",
    "exclude",
    "explore",
    "heal_entries",
    "in_incident",
    "readmit",
    "request_rng",
]

EXCLUSION_THRESHOLD: Final = 0.2
BASE_COOLDOWN_S: Final = 300.0
MAX_COOLDOWN_S: Final = 1800.0
INCIDENT_OPEN_FRACTION: Final = 0.5
PROBE_TIMEOUT_S: Final = 15.0
"""Total timeout of a re-admission probe (s; "reduced timeout", ours)."""
PROBE_LEASE_S: Final = 60.0
"""How long an unreported probe blocks others before the candidate is simply re-admitted (s)."""

_N_KEY: Final = "auto:heal:n"


@dataclass(frozen=True, slots=True)
class HealEntry:
    """An exclusion: ``until`` epoch s, doubling ``level`` (1 = first), the ``score`` that caused it."""

    until: float
    level: int
    score: float


def _rec_key(key: str) -> str:
    return f"auto:heal:{key}"


def cooldown_for(level: int) -> float:
    """Exclusion length in seconds for the ``level``-th repeat: 300·2^(level−1), capped at 1800."""
    return min(MAX_COOLDOWN_S, BASE_COOLDOWN_S * (1 << min(16, max(0, level - 1))))


async def heal_entries(state: RoutingState, keys: Iterable[str]) -> dict[str, HealEntry]:
    """Current exclusion records of candidate ``keys`` (only those that have one)."""
    if await state.get_counter(_N_KEY) == 0:
        return {}
    out: dict[str, HealEntry] = {}
    for key in keys:
        data = await state.get_json(_rec_key(key))
        if isinstance(data, dict):
            out[key] = HealEntry(float(data["until"]), int(data["level"]), float(data.get("score", 0.0)))
    return out


async def exclude(state: RoutingState, key: str, score: float, now: float) -> HealEntry:
    """Exclude candidate ``key`` after a score below the threshold (or a failed probe)."""
    level = await state.incr_counter(f"auto:heal:lvl:{key}")
    until = now + cooldown_for(level)
    await state.set_json(
        _rec_key(key), {"until": until, "level": level, "score": score}, ttl_s=until - now + PROBE_LEASE_S
    )
    await state.incr_counter(_N_KEY)
    return HealEntry(until, level, score)


async def claim_probe(state: RoutingState, key: str, entry: HealEntry) -> bool:
    """Atomically claim the single re-admission probe of an exclusion whose cooldown has passed."""
    return await state.incr_counter(f"auto:heal:probe:{key}:{int(entry.until)}") == 1


async def readmit(state: RoutingState, key: str) -> None:
    """The probe succeeded: drop the exclusion and reset the doubling level."""
    await state.delete_record(_rec_key(key))
    level = await state.get_counter(f"auto:heal:lvl:{key}")
    if level:
        await state.incr_counter(f"auto:heal:lvl:{key}", -level)


def in_incident(pool: Sequence[CandidateInputs]) -> bool:
    """More than half of the pool has an OPEN breaker (AUTO-8)."""
    if not pool:
        return False
    open_ = [c.breaker for c in pool].count("OPEN")
    return open_ > INCIDENT_OPEN_FRACTION * len(pool)


def request_rng(seed: str | None, request_id: str) -> random.Random:
    """The request's random source: seeded by ``X-OmniRoute-Seed`` when given, else by the request
    id, so a replay of the same ids draws the same numbers (DESIGN house style 6)."""
    if seed is None:
        return random.Random(request_id or None)
    try:  # same seeding as the combo strategies' ``rng_for``: an integer seed when it is one
        return random.Random(int(seed))
    except ValueError:
        return random.Random(seed)


def explore(
    rng: random.Random, rate: float, pool: Sequence[CandidateInputs], best: int, incident: bool
) -> int | None:
    """With probability ``rate`` a random healthy candidate other than ``best`` (pool index), else
    ``None``. Never in incident mode. Exactly one draw from ``rng`` when ``rate`` > 0."""
    if rate <= 0 or incident:
        return None
    if rng.random() >= rate:
        return None
    others = [i for i, c in enumerate(pool) if i != best and c.breaker != "OPEN"]
    return rng.choice(others) if others else None
