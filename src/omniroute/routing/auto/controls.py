"""Per-request controls of auto routes (AUTO-7): mode, budget cap and fallback, adaptive effort, seed.

Headers (auto routes only, one request only; seed 001 "Per-Request Controls"):

- ``X-OmniRoute-Mode``: a mode alias or pack name (:data:`~omniroute.routing.auto.packs.MODE_ALIASES`);
  ``balanced``/``default`` force the default weights.
- ``X-OmniRoute-Budget``: a finite number > 0, USD per request, compared with each candidate's
  estimated cost (:func:`estimated_cost_usd`).
- ``X-OmniRoute-Budget-Fallback``: ``cheapest``/``cheapest-viable``/``soft`` → serve the cheapest
  anyway; ``strict``/``block``/``hard`` → HTTP 402 (:func:`budget_error`).
- ``X-OmniRoute-Effort: auto``: when the body has no reasoning field, resolve ``reasoning_effort``
  low/medium/high from the current turn's shape (:func:`resolve_effort`).
- ``X-OmniRoute-Seed``: seeds the request's random draws (exploration), for tests and the simulator.

Any other value of Mode, Budget, Budget-Fallback or Effort is a 400 naming the header on every
client route (:func:`check_steering_headers`), so :func:`parse_controls` only sees valid ones there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from omniroute.errors import BudgetExceeded, InvalidRequest
from omniroute.routing.auto.packs import MODE_ALIASES, resolve_mode
from omniroute.values import ModelInfo

__all__ = [
    "BUDGET_CHEAPEST",
    "BUDGET_STRICT",
    "DEFAULT_OUTPUT_TOKENS",
    "RequestControls",
    "budget_error",
    "check_steering_headers",
    "estimated_cost_usd",
    "parse_budget_fallback",
    "parse_controls",
    "resolve_effort",
]

BUDGET_CHEAPEST: Final = "cheapest"
BUDGET_STRICT: Final = "strict"
_FALLBACKS: Final = {
    "cheapest": BUDGET_CHEAPEST,
    "cheapest-viable": BUDGET_CHEAPEST,
    "soft": BUDGET_CHEAPEST,
    "strict": BUDGET_STRICT,
    "block": BUDGET_STRICT,
    "hard": BUDGET_STRICT,
}
DEFAULT_OUTPUT_TOKENS: Final = 1000
"""Output tokens assumed for the cost estimate when the request sets no ``max_tokens`` (about the
"cost per 1000 tokens" of reference §3.9)."""

_REASONING_FIELDS: Final = ("reasoning_effort", "reasoning", "thinking")


@dataclass(frozen=True, slots=True)
class RequestControls:
    """Parsed AUTO-7 headers: ``mode`` a pack name or ``"default"`` (``None`` = not given);
    ``budget_usd`` the cap in USD per request; ``budget_fallback`` ``cheapest``/``strict``;
    ``effort`` ``"auto"`` or ``None``; ``seed`` the random seed text or ``None``."""

    mode: str | None = None
    budget_usd: float | None = None
    budget_fallback: str | None = None
    effort: str | None = None
    seed: str | None = None


def parse_budget_fallback(value: Any) -> str | None:
    """A fallback name or alias → ``cheapest``/``strict``; ``None`` when unknown."""
    return _FALLBACKS.get(str(value).strip().lower()) if value is not None else None


def _budget(value: str | None) -> float | None:
    """The USD cap, or ``None`` without the header; a value that is not a finite number ≥ 0 is a 400
    naming the header (a client asking for a cap must not be served without one)."""
    if value is None or not value.strip():
        return None
    try:
        v = float(value)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v < 0:
        raise InvalidRequest(
            f"X-OmniRoute-Budget must be a number of USD >= 0; got {value!r}.", param="X-OmniRoute-Budget"
        )
    return v


def parse_controls(headers: Mapping[str, str]) -> RequestControls:
    """Read the AUTO-7 headers (lower-case names) of one request; an invalid budget is a 400, an
    unknown mode or fallback name is ignored."""
    effort = headers.get("x-omniroute-effort", "").strip().lower()
    return RequestControls(
        mode=resolve_mode(headers.get("x-omniroute-mode")),
        budget_usd=_budget(headers.get("x-omniroute-budget")),
        budget_fallback=parse_budget_fallback(headers.get("x-omniroute-budget-fallback")),
        effort="auto" if effort == "auto" else None,
        seed=headers.get("x-omniroute-seed") or None,
    )


STEERING_HEADERS: Final = (
    "x-omniroute-mode",
    "x-omniroute-budget",
    "x-omniroute-budget-fallback",
    "x-omniroute-effort",
)
"""The documented steering headers whose values are checked on every client route (README
"Per-request headers")."""


def _invalid_choice(header: str, value: str, allowed: tuple[str, ...]) -> InvalidRequest:
    return InvalidRequest(f"{header} must be one of {', '.join(allowed)}; got {value[:100]!r}.", param=header)


def check_steering_headers(headers: Mapping[str, str]) -> None:
    """Reject a documented ``X-OmniRoute-*`` steering header (lower-case names in ``headers``) whose
    value is not one the gateway understands, on every route (combo, provider/model, auto): a client
    that asks for a mode, a budget cap, a fallback or an effort must not be served as if it had not.

    Raises :class:`InvalidRequest` (400) naming the header and its allowed values: ``Mode`` a
    :data:`~omniroute.routing.auto.packs.MODE_ALIASES` key, ``Budget`` a number of USD >= 0,
    ``Budget-Fallback`` ``cheapest``/``strict`` or their aliases, ``Effort`` ``auto``. Blank values
    count as absent."""
    if not any(h in headers for h in STEERING_HEADERS):
        return
    mode = headers.get("x-omniroute-mode", "").strip()
    if mode and resolve_mode(mode) is None:
        raise _invalid_choice("X-OmniRoute-Mode", mode, tuple(MODE_ALIASES))
    _budget(headers.get("x-omniroute-budget"))
    fallback = headers.get("x-omniroute-budget-fallback", "").strip()
    if fallback and parse_budget_fallback(fallback) is None:
        raise _invalid_choice("X-OmniRoute-Budget-Fallback", fallback, tuple(_FALLBACKS))
    effort = headers.get("x-omniroute-effort", "").strip()
    if effort and effort.lower() != "auto":
        raise _invalid_choice("X-OmniRoute-Effort", effort, ("auto",))


def output_tokens(body: Mapping[str, Any]) -> int:
    """Output tokens for the estimate: ``max_completion_tokens``/``max_tokens``, else the default."""
    for k in ("max_completion_tokens", "max_tokens"):
        v = body.get(k)
        if isinstance(v, int) and v > 0:
            return v
    return DEFAULT_OUTPUT_TOKENS


def estimated_cost_usd(model: ModelInfo, prompt_tokens: int, out_tokens: int) -> float | None:
    """Estimated USD of one request on ``model`` (prices USD per 1M tokens); ``None`` when a price is
    unknown (such a candidate never fits a budget cap)."""
    if model.input_price is None or model.output_price is None:
        return None
    return (prompt_tokens * model.input_price + out_tokens * model.output_price) / 1_000_000


def _usd(v: float) -> str:
    return f"{v:.6f}" if v == 0 or v >= 1e-6 else f"{v:.2e}"


def budget_error(cap: float, cheapest: float | None) -> BudgetExceeded:
    """402 for ``strict`` when no candidate fits the cap (AUTO-7), naming the cap and the cheapest
    candidate's estimated cost."""
    tail = (
        f"the cheapest candidate's estimated cost is ${cheapest:.6f}"
        if cheapest is not None
        else "no candidate has known prices"
    )
    return BudgetExceeded(
        f"No candidate fits within the budget cap of ${_usd(cap)} per request (X-OmniRoute-Budget); {tail}.",
        param="X-OmniRoute-Budget",
    )


def _chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(str(p.get("text") or "")) for p in content if isinstance(p, dict))
    return 0


def resolve_effort(body: Mapping[str, Any]) -> str | None:
    """``low``/``medium``/``high`` from the current turn's shape, or ``None`` when the body already
    carries a reasoning field (an explicit client choice always wins; AUTO-7).

    Only what comes up to the last user message counts, so every request of one tool loop resolves to
    the same level: high when the last user message is ≥ 2,000 characters, the context up to it is
    ≥ 32,000 characters, or ≥ 4 earlier tool results; low when the last user message is < 200
    characters, the context < 4,000 and there are no earlier tool results; medium otherwise.
    """
    if any(body.get(f) is not None for f in _REASONING_FIELDS):
        return None
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    last_user = -1
    for i, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            last_user = i
    if last_user < 0:
        return None
    turn = messages[: last_user + 1]
    context = sum(_chars(m.get("content")) for m in turn if isinstance(m, dict))
    tools = sum(1 for m in turn if isinstance(m, dict) and m.get("role") == "tool")
    last = _chars(messages[last_user].get("content"))
    if last >= 2000 or context >= 32_000 or tools >= 4:
        return "high"
    if last < 200 and context < 4000 and tools == 0:
        return "low"
    return "medium"
