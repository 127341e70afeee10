"""Routing state: :class:`RoutingState` (the domain operations), the :class:`StatePrimitives` a backend
implements, the records, the in-process backend (STORE-1) and the Redis backends shared by replicas
(STORE-2).

Importing this package has no side effects; backends are constructed by the application. The Redis
backends are imported on first use (PEP 562 ``__getattr__``): the ``redis`` client library costs several
MB of resident memory and a gateway without ``redis_url`` never needs it (PERF-5).
"""

from typing import TYPE_CHECKING, Any

from omniroute.clock import Clock, FakeClock, SystemClock
from omniroute.state.base import RoutingState
from omniroute.state.memory import MemoryRoutingState
from omniroute.state.primitives import StatePrimitives
from omniroute.state.records import (
    BreakerRecord,
    BreakerState,
    Change,
    CooldownRecord,
    LockKey,
    LockoutRecord,
    ProbeVerdict,
    QuotaDimension,
    QuotaSnapshot,
    WindowStats,
    breaker_view,
)

if TYPE_CHECKING:
    from omniroute.state.redis import RedisRoutingState, ResilientRoutingState

__all__ = [
    "BreakerRecord",
    "BreakerState",
    "Change",
    "Clock",
    "CooldownRecord",
    "FakeClock",
    "LockKey",
    "LockoutRecord",
    "MemoryRoutingState",
    "ProbeVerdict",
    "QuotaDimension",
    "QuotaSnapshot",
    "RedisRoutingState",
    "ResilientRoutingState",
    "RoutingState",
    "StatePrimitives",
    "SystemClock",
    "WindowStats",
    "breaker_view",
]


def __getattr__(name: str) -> Any:
    if name in ("RedisRoutingState", "ResilientRoutingState"):
        from omniroute.state import redis

        return getattr(redis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
