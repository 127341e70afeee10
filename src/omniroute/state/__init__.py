"""Routing state: the :class:`RoutingState` protocol, its records and the in-process backend (STORE-1/2).

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
    "RoutingState",
    "SystemClock",
    "WindowStats",
    "breaker_view",
]
