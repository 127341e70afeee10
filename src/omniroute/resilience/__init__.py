"""Resilience: the four-tier ladder (RESIL-1…9) — breaker, cooldown, lockout, pre-call checks,
failure classification and wait hints. Declarative fallback chains (RESIL-4) are applied by the
engine when it builds candidates.

Importing this package has no side effects (aiohttp is imported only when an exception is
classified).
"""

from omniroute.resilience.breaker import BreakerSettings, CircuitBreaker, is_counted
from omniroute.resilience.classify import (
    RULES,
    Rule,
    classify_exception,
    classify_http,
    error_from_payload,
    extract_error,
)
from omniroute.resilience.cooldown import ConnectionCooldown, CooldownSettings
from omniroute.resilience.events import TransitionEvent, TransitionLog
from omniroute.resilience.hints import (
    parse_duration,
    parse_header_wait,
    parse_quota_headers,
    parse_text_wait,
    parse_wait_hint,
)
from omniroute.resilience.ladder import (
    BreakerFilter,
    CooldownFilter,
    FilterResult,
    LadderContext,
    LadderFilter,
    LockoutFilter,
    PreCallFilter,
    ProbeFilter,
    Resilience,
)
from omniroute.resilience.lockout import LockoutSettings, ModelLockout, next_local_midnight
from omniroute.resilience.precall import estimate_prompt_tokens, required_capabilities

__all__ = [
    "RULES",
    "BreakerFilter",
    "BreakerSettings",
    "CircuitBreaker",
    "ConnectionCooldown",
    "CooldownFilter",
    "CooldownSettings",
    "FilterResult",
    "LadderContext",
    "LadderFilter",
    "LockoutFilter",
    "LockoutSettings",
    "ModelLockout",
    "PreCallFilter",
    "ProbeFilter",
    "Resilience",
    "Rule",
    "TransitionEvent",
    "TransitionLog",
    "classify_exception",
    "classify_http",
    "error_from_payload",
    "estimate_prompt_tokens",
    "extract_error",
    "is_counted",
    "next_local_midnight",
    "parse_duration",
    "parse_header_wait",
    "parse_quota_headers",
    "parse_text_wait",
    "parse_wait_hint",
    "required_capabilities",
]
