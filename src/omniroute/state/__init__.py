"""Routing state: the :class:`RoutingState` protocol, its records, the in-process backend (STORE-1) and
the Redis backends shared by replicas (STORE-2).

Importing this package has no side effects; backends are constructed by the application.
"""

from omniroute.state.base import RoutingState
from omniroute.state.clock import Clock, FakeClock, SystemClock
from omniroute.state.memory import MemoryRoutingState
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
    "SystemClock",
    "WindowStats",
    "breaker_view",
]
