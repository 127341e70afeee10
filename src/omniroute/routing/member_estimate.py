"""The up-front budget estimate of a fusion or pipeline request: one estimate per member call (API-8).

A fusion or pipeline combo makes several model calls for one client request (COMBO-5, COMBO-6), so it
reserves the sum of what each call can cost before any of them runs, the way a single call reserves its
own estimate (:func:`omniroute.accounting.budget.estimate_usd`): prompt tokens × input price + output
tokens × output price, output tokens from ``max_completion_tokens``/``max_tokens`` (else
:data:`~omniroute.accounting.budget.ESTIMATE_OUTPUT_CAP`), capped at the model's maximum output, USD
per 1M tokens. Each call is priced on the most expensive model its target can reach (a combo ref: any
of that combo's models). The calls, from the strategies' own shapes:

- fusion: every panel member answers the client's prompt ``P``; then one judge call (``judgeModel``,
  else a panel member: the dearest) reads ``P`` plus every panel answer (``N × O`` tokens, ``O`` the
  output estimate) and answers ``O``. A one-member panel or a judge-only fusion is the same sum.
- pipeline: step 1 reads ``P`` plus its step prompt, each later step reads the previous answer (``O``)
  plus its step prompt; each answers ``O``.
- agentic pipeline: one planner call on ``P``, then either the planner's answer or the executor on
  ``P + O``: two calls, priced as the dearer of the two for the second.

Unknown prices and unresolvable targets count 0 (the call itself then fails or is priced at $0); a
combo ref nested deeper than :data:`~omniroute.core.combo.MAX_COMBO_DEPTH` or in a cycle counts 0,
as the dispatcher refuses it. After the request the reservation is settled with the real cost of all
the calls (the request's usage row carries their sum), so the estimate only bounds how far concurrent
requests can overshoot a budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from omniroute.accounting.budget import ESTIMATE_OUTPUT_CAP, asked_output, prompt_tokens
from omniroute.core.combo import MAX_COMBO_DEPTH, Combo
from omniroute.errors import GatewayError
from omniroute.routing.resolve import resolve
from omniroute.values import ChatRequest, ModelInfo

__all__ = ["multi_call_estimate_usd"]


def _words(text: str | None) -> int:
    """Tokens of a step prompt, estimated as the chat estimate does (≈ chars / 4)."""
    return len(text or "") // 4


class _Pricer:
    """Prices one call of ``prompt`` tokens on the dearest model a target can reach."""

    def __init__(self, registry: Any, req: ChatRequest) -> None:
        self.registry = registry
        asked = asked_output(req)
        self.out = ESTIMATE_OUTPUT_CAP if asked is None else asked
        self.prompt = prompt_tokens(req)

    def models(self, name: str, depth: int, seen: frozenset[str]) -> list[ModelInfo]:
        """Every model ``name`` (a model string or combo name) can be served by."""
        combo = self.registry.combos.get(name)
        if combo is not None:
            if name in seen or depth > MAX_COMBO_DEPTH:
                return []
            out: list[ModelInfo] = []
            for t in combo.targets:
                out += self.models(t.combo_ref or t.model or "", depth + 1, seen | {name})
            return out
        try:
            plan = resolve(self.registry, name)
        except GatewayError:
            return []
        if plan.combo is not None:
            return self.models(plan.combo.name, depth, seen)
        return [t.model for t in plan.targets]

    def call(self, models: Iterable[ModelInfo], prompt: int) -> float:
        """USD of the dearest of ``models`` for ``prompt`` prompt tokens and the output estimate."""
        best = 0.0
        for m in models:
            prices = m.token_prices(prompt)
            if prices is None:
                continue
            out = min(self.out, m.max_output_tokens) if m.max_output_tokens else self.out
            best = max(best, (prompt * prices.input + out * prices.output) / 1_000_000)
        return best


def multi_call_estimate_usd(
    registry: Any,
    req: ChatRequest,
    combo: Combo | None,
    depth: int = 0,
    seen: frozenset[str] = frozenset(),
) -> float:
    """The sum of the estimates (USD) of every model call ``combo`` (strategy ``fusion`` or
    ``pipeline``) makes for ``req`` (see the module docstring for the calls); 0.0 for other
    strategies or no combo. ``registry`` is the gateway's :class:`~omniroute.core.registry.Registry` snapshot;
    ``depth``/``seen`` track nested combo refs."""
    if combo is None:
        return 0.0
    p = _Pricer(registry, req)
    seen = seen | {combo.name}

    def cost(name: str, prompt: int) -> float:
        nested = registry.combos.get(name)
        if nested is not None and nested.strategy in ("fusion", "pipeline"):
            if name in seen or depth + 1 > MAX_COMBO_DEPTH:
                return 0.0
            return multi_call_estimate_usd(registry, req, nested, depth + 1, seen)
        return p.call(p.models(name, depth + 1, seen), prompt)

    names = [t.combo_ref or t.model or "" for t in combo.targets]
    cfg = combo.config or {}
    if combo.strategy == "fusion":
        total = sum(cost(n, p.prompt) for n in names)
        judge_prompt = p.prompt + len(names) * p.out
        judge = cfg.get("judgeModel")
        if judge:
            return total + cost(str(judge), judge_prompt)
        return total + max((cost(n, judge_prompt) for n in names), default=0.0)
    if combo.strategy != "pipeline" or not names:
        return 0.0
    agentic = cfg.get("agenticOrchestration")
    if isinstance(agentic, Mapping) and agentic.get("enabled") and len(names) == 2:
        second = max(cost(names[0], p.prompt + p.out), cost(names[1], p.prompt + p.out))
        return cost(names[0], p.prompt) + second
    total = 0.0
    for i, t in enumerate(combo.targets):
        total += cost(names[i], (p.prompt if i == 0 else p.out) + _words(t.prompt))
    return total
