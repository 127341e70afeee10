"""Admission of one call for its API key (API-8): rate limits first, then the budget reservation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omniroute.accounting.budget import Budgets, Reservation, estimate_tokens, estimate_usd
from omniroute.accounting.ratelimit import RateLimits
from omniroute.values import Candidate, ChatRequest

__all__ = ["admit"]


async def admit(
    budgets: Budgets,
    limits: RateLimits,
    rec: dict[str, Any] | None,
    req: ChatRequest,
    candidates: Sequence[Candidate],
    estimate: float | None = None,
) -> Reservation | None:
    """Count the call against ``rec``'s requests/tokens per minute and reserve its estimated cost on
    ``candidates`` (the most expensive one) against the key's budget. Returns the reservation to settle
    after the call (``None`` without a key or budget); ``estimate`` (USD) replaces the single-call
    estimate (a fusion or pipeline request's sum over its member calls). Sets
    ``req.rate_limit_headers`` to the ``x-ratelimit-*`` headers of the key's windows for the
    response. Raises
    :class:`~omniroute.errors.KeyRateLimited` (429) or :class:`~omniroute.errors.BudgetExceeded` (402)."""
    if rec is None:
        return None
    rpm, tpm = limits.limits_for(rec)
    if rpm is not None or tpm is not None:
        tokens = estimate_tokens(req, candidates) if tpm is not None else 1
        req.rate_limit_headers = await limits.hit(rec, tokens)
    if rec.get("budget_usd") is None:
        return None
    return await budgets.reserve(rec, estimate_usd(req, candidates) if estimate is None else estimate)
