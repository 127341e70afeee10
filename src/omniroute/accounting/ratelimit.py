"""Requests and tokens per minute per API key (API-8), with the ``limits`` library's moving window.

A key's ``rpm``/``tpm`` (else the config's ``rate_limits.rpm``/``tpm``) bound what it may send in any
60-second window. Every admitted call counts one request and its token estimate — prompt tokens
estimated from the body plus ``max_tokens`` (else :data:`~omniroute.accounting.budget.ESTIMATE_OUTPUT_CAP`),
the way OpenAI counts a request against its own token limits before it runs. A call over either limit
is refused with 429, ``Retry-After`` (seconds) and the ``x-ratelimit-limit-*``, ``x-ratelimit-
remaining-*`` and ``x-ratelimit-reset-*`` headers OpenAI's clients read (one trio per limit the key
has: ``-requests`` and ``-tokens``); a call larger than the whole tokens limit, which no wait can
admit, gets ``x-should-retry: false`` instead of ``Retry-After``. An admitted call gets the same
trio for each limit the key has on its response (the
window after this call counted), as OpenAI's API sends them on every response
(https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers).

The windows live in Redis when ``redis_url`` is configured (``limits.aio`` on redis-py, keys under
the deployment's prefix), so every worker and replica shares them; else in process memory. An
unreachable Redis falls back to memory for that call (one warning per outage). The moving window is
measured on the system clock by the library itself (the gateway's injected clock cannot move it).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Final

from limits import RateLimitItem, RateLimitItemPerMinute
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter

from omniroute.clock import SystemClock
from omniroute.errors import KeyRateLimited

__all__ = ["RateLimits", "reset_text"]

log = logging.getLogger("omniroute.ratelimit")

_WALL: Final = SystemClock()  # the library's windows are on the system clock; Retry-After must be too


def reset_text(seconds: float) -> str:
    """A duration as OpenAI writes ``x-ratelimit-reset-*``: ``"1s"``, ``"6m0s"``, ``"1h2m3s"``;
    whole seconds, at least 1."""
    s = max(1, math.ceil(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{sec}s"
    return f"{m}m{sec}s" if m else f"{sec}s"


@dataclass(frozen=True, slots=True)
class _Check:
    kind: str  # "requests" or "tokens"
    item: RateLimitItem
    cost: int


class RateLimits:
    """Per-key moving-window limits for one gateway process.

    ``redis_url`` (the config's, ``?prefix=`` included) selects shared storage; ``rpm``/``tpm`` are the
    defaults for keys that set none (``None`` = no limit)."""

    def __init__(self, redis_url: str | None, *, rpm: int | None = None, tpm: int | None = None) -> None:
        self.default_rpm = rpm
        self.default_tpm = tpm
        self._memory: Storage = MemoryStorage()
        self._redis: Storage | None = None
        if redis_url:
            import os

            from omniroute.state.redis.backend import (
                DEFAULT_PREFIX,
                DEFAULT_TIMEOUT_S,
                ENV_REDIS_PREFIX,
                split_prefix,
            )

            url, prefix = split_prefix(redis_url)
            chosen = prefix or os.environ.get(ENV_REDIS_PREFIX) or DEFAULT_PREFIX
            self._redis = RedisStorage(
                "async+" + url,
                implementation="redispy",
                key_prefix=f"omniroute:{{{chosen}}}:ratelimit",
                socket_timeout=DEFAULT_TIMEOUT_S,  # a dead Redis must not stall requests: memory serves
                socket_connect_timeout=DEFAULT_TIMEOUT_S,
            )
        self._degraded = False

    def limits_for(self, rec: dict[str, Any] | None) -> tuple[int | None, int | None]:
        """``(rpm, tpm)`` in force for the key ``rec`` (its own, else the defaults)."""
        if rec is None:
            return None, None
        return rec.get("rpm") or self.default_rpm, rec.get("tpm") or self.default_tpm

    async def hit(self, rec: dict[str, Any] | None, tokens: int) -> dict[str, str]:
        """Count one request of ``tokens`` estimated tokens for ``rec``; raises :class:`KeyRateLimited`
        (429 with ``Retry-After`` and ``x-ratelimit-*`` headers) when it does not fit. The requests
        window is checked first; a call refused for its tokens still counts as a request, as at
        OpenAI. No-op without a key or limits.

        Returns the response headers of an admitted call: ``x-ratelimit-limit-{kind}``,
        ``x-ratelimit-remaining-{kind}`` (what is left in the window after this call) and
        ``x-ratelimit-reset-{kind}`` (until the window is whole again, OpenAI's ``"6m0s"`` form) for
        each ``kind`` (``requests``, ``tokens``) the key is limited on; ``{}`` without limits."""
        rpm, tpm = self.limits_for(rec)
        if rec is None or (rpm is None and tpm is None):
            return {}
        checks = []
        if rpm is not None:
            checks.append(_Check("requests", RateLimitItemPerMinute(int(rpm)), 1))
        if tpm is not None:
            checks.append(_Check("tokens", RateLimitItemPerMinute(int(tpm)), max(int(tokens), 1)))
        key_id = str(rec["id"])
        try:
            headers = await self._hit(self._redis or self._memory, key_id, checks)
            self._degraded = False
        except KeyRateLimited:
            raise
        except Exception as exc:  # an unreachable Redis: this process's own windows serve meanwhile
            if self._redis is None:
                raise
            if not self._degraded:
                log.warning("rate limits: Redis unreachable, counting in this process: %s", exc)
            self._degraded = True
            headers = await self._hit(self._memory, key_id, checks)
        return headers

    async def _hit(self, storage: Storage, key_id: str, checks: list[_Check]) -> dict[str, str]:
        limiter = MovingWindowRateLimiter(storage)
        for c in checks:
            if await limiter.hit(c.item, key_id, c.kind, cost=c.cost):
                continue
            stats = await limiter.get_window_stats(c.item, key_id, c.kind)
            wait = max(stats.reset_time - _WALL.time(), 1.0)
            err = self._error(c, stats.remaining, wait)
            for other in checks:  # one trio per limit the key has, the refused one's as it was refused
                if other is not c:
                    err.headers.update(await self._trio(limiter, key_id, other))
            raise err
        headers: dict[str, str] = {}
        for c in checks:
            headers.update(await self._trio(limiter, key_id, c))
        return headers

    @staticmethod
    async def _trio(limiter: MovingWindowRateLimiter, key_id: str, c: _Check) -> dict[str, str]:
        """The ``x-ratelimit-{limit,remaining,reset}-{kind}`` headers of ``c``'s window now."""
        stats = await limiter.get_window_stats(c.item, key_id, c.kind)
        return {
            f"x-ratelimit-limit-{c.kind}": str(c.item.amount),
            f"x-ratelimit-remaining-{c.kind}": str(max(stats.remaining, 0)),
            f"x-ratelimit-reset-{c.kind}": reset_text(stats.reset_time - _WALL.time()),
        }

    @staticmethod
    def _error(c: _Check, remaining: int, wait: float) -> KeyRateLimited:
        """The 429 for check ``c``. A call larger than the whole limit can never fit: it gets no
        ``Retry-After`` and ``x-should-retry: false``, the header the openai and anthropic SDKs obey
        before their own retry rules (openai-python and anthropic-sdk-python ``_should_retry``)."""
        limit = c.item.amount
        unit = "requests per minute (RPM)" if c.kind == "requests" else "tokens per minute (TPM)"
        headers = {
            f"x-ratelimit-limit-{c.kind}": str(limit),
            f"x-ratelimit-remaining-{c.kind}": str(max(remaining, 0)),
            f"x-ratelimit-reset-{c.kind}": reset_text(wait),
        }
        if c.cost > limit:
            msg = (
                f"Request too large for this API key's {unit}: limit {limit}, requested {c.cost}. "
                "Lower max_tokens or the prompt size."
            )
            headers["x-should-retry"] = "false"
        else:
            msg = (
                f"Rate limit reached for this API key on {unit}: limit {limit}, remaining {remaining}, "
                f"requested {c.cost}. Please try again in {reset_text(wait)}."
            )
            headers["retry-after"] = str(max(1, math.ceil(wait)))
        err = KeyRateLimited(msg, headers=headers)
        err.type = c.kind
        return err

    async def aclose(self) -> None:
        """Close the Redis storage's connections (gateway shutdown)."""
        if self._redis is not None:
            close = getattr(self._redis, "close", None) or getattr(self._redis, "aclose", None)
            if close is not None:
                res = close()
                if hasattr(res, "__await__"):
                    await res
