"""Per-candidate statics of the auto engine: what measuring a candidate needs that depends on the
candidate alone (key, cold-start latency, blended price, default factors), computed once per cached
pool and kept in the registry snapshot's ``memo`` (PERF-3). Cold-start numbers: reference §3.6
(SPEC AUTO-3)."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from omniroute.routing.auto import scoring as s
from omniroute.values import Candidate

__all__ = [
    "BOOTSTRAP_P95_MS",
    "DEFAULT_P95_MS",
    "MIN_STDDEV_MS",
    "STATIC_MEMO",
    "CandidateStatic",
    "candidate_static",
    "pool_statics",
    "remember_statics",
]

BOOTSTRAP_P95_MS: Final[Mapping[str, float]] = {
    "grok-4-fast-non-reasoning": 1143.0,
    "grok-4-1-fast-non-reasoning": 1244.0,
    "gemini-2.5-flash": 1238.0,
    "kimi-k2.5": 1646.0,
    "gpt-4o-mini": 2764.0,
    "claude-sonnet-4.6": 4000.0,
    "claude-opus-4.6": 6000.0,
    "deepseek-chat": 2000.0,
}
DEFAULT_P95_MS: Final = 1500.0
MIN_STDDEV_MS: Final = 10.0
STATIC_MEMO: Final = "auto-static"
"""``Registry.memo`` entry: ``{id(candidate): CandidateStatic}`` for candidates of cached pools."""
_STATIC_CAP: Final = 8192
_POOL_STATICS_MEMO: Final = "auto-pool-statics"


class CandidateStatic(NamedTuple):
    """What measuring a candidate needs that depends on the candidate alone (PERF-3): ``key``,
    ``crc_tail`` (``"|" + key`` as UTF-8, for cacheAffinity), blended ``cost`` (USD per 1M tokens),
    cold-start ``p95_ms`` / ``stddev_ms``, ``oauth_expires_at`` (epoch s, ``None`` for API keys and
    tokens without expiry), ``base`` — the 16 factors of a candidate with no recorded state and no
    request hints (taskFit 0 until filled in) — and ``fitness``, taskFit by task, filled on use.
    ``cand`` pins the object whose ``id`` keys the memo."""

    cand: Candidate
    key: str
    provider: str
    connection: str
    model: str
    tier: str
    crc_tail: bytes
    cost: float | None
    p95_ms: float
    stddev_ms: float
    oauth_expires_at: float | None
    base: list[float]
    fitness: dict[str, float]


def candidate_static(c: Candidate) -> CandidateStatic:
    """The :class:`CandidateStatic` of ``c`` (AUTO-3 cold-start numbers and defaults)."""
    key = c.key
    p95 = BOOTSTRAP_P95_MS.get(c.model.id.lower(), DEFAULT_P95_MS)
    conn = c.connection
    expires = None if conn.auth_type == "api_key" else conn.expires_at
    # quota 1 (unknown), tierAffinity / specificityMatch / contextAffinity .5 (no hint),
    # sessionAvailability 1, connectionDensity 1 (idle), cacheAffinity 0, resetWindowAffinity .5,
    # quality .5, reliability 1; health and the relative factors are set later.
    tier_priority = s.TIER_PRIORITY.get(conn.account_tier, 0.33)
    base = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, tier_priority, 0.5, 0.5, 0.5, 1.0, 1.0, 0.0, 0.5, 0.5, 1.0]
    return CandidateStatic(
        c,
        key,
        c.provider.id,
        conn.id,
        c.model.id,
        c.model.tier,
        ("|" + key).encode(),
        c.model.blended_price,
        p95,
        max(MIN_STDDEV_MS, 0.1 * p95),
        expires,
        base,
        {},
    )


def remember_statics(memo: dict[str, Any], pool: Sequence[Candidate]) -> None:
    """Store the statics of a cached pool's candidates in a registry snapshot's ``memo``; a request
    whose pool is exactly this one reuses the whole list (and its keys and connection ids)."""
    table: dict[int, CandidateStatic] = memo.setdefault(STATIC_MEMO, {})
    if len(table) > _STATIC_CAP:
        table.clear()
    statics = [candidate_static(c) for c in pool]
    for st in statics:
        table[id(st.cand)] = st
    memo[_POOL_STATICS_MEMO] = (
        tuple(pool),
        statics,
        [st.key for st in statics],
        [st.connection for st in statics],
    )


def pool_statics(
    memo: dict[str, Any], pool: Sequence[Candidate]
) -> tuple[list[CandidateStatic], list[str], list[str]]:
    """Statics, keys and connection ids of ``pool`` (read-only lists: they may be the memo's)."""
    whole = memo.get(_POOL_STATICS_MEMO)
    if whole is not None and len(whole[0]) == len(pool) and all(map(operator.is_, whole[0], pool)):
        return whole[1], whole[2], whole[3]
    table = memo.get(STATIC_MEMO) or {}
    statics: list[CandidateStatic] = []
    keys: list[str] = []
    cids: list[str] = []
    for c in pool:
        st = table.get(id(c))
        if st is None or st.cand is not c:
            st = candidate_static(c)
        statics.append(st)
        keys.append(st.key)
        cids.append(st.connection)
    return statics, keys, cids
