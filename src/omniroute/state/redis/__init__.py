"""Routing state in Redis, shared by several replicas (STORE-2).

N gateway replicas pointed at one Redis behave like one gateway: breaker states (RESIL-1), cooldown
deadlines and invalid marks (RESIL-2), model lockouts (RESIL-3), LKGP and other records, round-robin
counters and decks, in-flight counts, latency/error windows and quota snapshots all live in Redis,
and every operation is atomic there. :mod:`.backend` holds the primitives as Redis commands,
:mod:`.scripts` the Lua they need, :mod:`.resilient` the wrapper that degrades to in-process state
while Redis is unreachable.
"""

from omniroute.state.redis.backend import (
    DEFAULT_PREFIX,
    ENV_REDIS_PREFIX,
    INFLIGHT_TTL_S,
    RedisRoutingState,
    StateContentionError,
    split_prefix,
)
from omniroute.state.redis.resilient import ResilientRoutingState

__all__ = [
    "DEFAULT_PREFIX",
    "ENV_REDIS_PREFIX",
    "INFLIGHT_TTL_S",
    "RedisRoutingState",
    "ResilientRoutingState",
    "StateContentionError",
    "split_prefix",
]
