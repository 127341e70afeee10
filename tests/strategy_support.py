"""Pure helpers for the strategy unit tests: hand-made targets, a StrategyContext over memory routing
state with a fixed clock and a seeded random source, and a tiny driver that plays a sequence of
requests (order → success of the first target) through one strategy."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from omniroute.routing.quota import StateQuotaProvider, parse_limits
from omniroute.routing.strategies import (
    ComboSettings,
    ComboTarget,
    Ordering,
    StrategyContext,
    StrategyState,
    get_strategy,
)
from omniroute.state.memory import MemoryRoutingState
from omniroute.values import ChatRequest, Connection, ModelInfo, ProviderInfo

NOW = 1_700_000_000.0
BODY: dict[str, Any] = {"model": "combo", "messages": [{"role": "user", "content": "hi"}]}


def target(
    pid: str,
    model: str = "m",
    *,
    conns: Sequence[str] | None = None,
    index: int = 0,
    step: int | None = None,
    weight: float = 0.0,
    priority: int | None = None,
    context_window: int = 0,
    input_price: float | None = None,
    output_price: float | None = None,
    pinned: bool = False,
    conn_tags: Mapping[str, Sequence[str]] | None = None,
) -> ComboTarget:
    """A target of provider ``pid`` with connections ``conns`` (default ``<pid>1``)."""
    ids = list(conns or [f"{pid}1"])
    return ComboTarget(
        provider=ProviderInfo(id=pid),
        model=ModelInfo(
            id=model, input_price=input_price, output_price=output_price, context_window=context_window
        ),
        connections=tuple(
            Connection(id=c, provider=pid, tags=tuple((conn_tags or {}).get(c, ()))) for c in ids
        ),
        index=index,
        step=index if step is None else step,
        weight=weight,
        priority=priority,
        pinned=pinned,
    )


def targets(*pids: str, **kw: Any) -> list[ComboTarget]:
    """One target per provider id, indexed in order."""
    return [target(p, index=i, **kw) for i, p in enumerate(pids)]


def request(
    body: Mapping[str, Any] | None = None, *, seed: int | None = None, session: str | None = None
) -> ChatRequest:
    headers = {"x-omniroute-seed": str(seed)} if seed is not None else {}
    return ChatRequest(
        body=dict(body or BODY), model="combo", request_id=f"req_{seed}", headers=headers, session_id=session
    )


def context(
    strategy: str,
    ts: Sequence[ComboTarget],
    *,
    state: MemoryRoutingState | None = None,
    config: Mapping[str, Any] | None = None,
    global_: Mapping[str, Any] | None = None,
    seed: int = 0,
    now: float = NOW,
    req: ChatRequest | None = None,
    unavailable: Mapping[int, str] | None = None,
    combo: str = "c",
) -> StrategyContext:
    """A context for ``strategy`` over ``ts``; ``unavailable`` = what the ladder would filter."""
    st = state or MemoryRoutingState()
    settings = ComboSettings(config or {}, global_ or {})
    quota = StateQuotaProvider(st, parse_limits(settings.get("connectionLimits")))
    gone = dict(unavailable or {})

    async def availability(_: Sequence[ComboTarget]) -> dict[int, str]:
        return gone

    return StrategyContext(
        combo=combo,
        strategy=strategy,
        settings=settings,
        targets=tuple(ts),
        request=req or request(seed=seed),
        state=StrategyState(st, combo, quota),
        rng=random.Random(seed),
        now=now,
        availability=availability,
    )


async def order(strategy: str, ts: Sequence[ComboTarget], **kw: Any) -> Ordering:
    """One ordering by the registered strategy ``strategy``."""
    return await get_strategy(strategy).order(context(strategy, ts, **kw))


def first_keys(o: Ordering) -> list[str]:
    return [t.provider.id for t in o.targets]


async def play(
    strategy: str,
    ts: Sequence[ComboTarget],
    n: int,
    *,
    state: MemoryRoutingState | None = None,
    serve: Any = None,
    **kw: Any,
) -> list[str]:
    """``n`` sequential requests: order, then report success of the target ``serve(ordering)`` picks
    (default: the first). Returns the serving provider ids."""
    st = state or MemoryRoutingState()
    out: list[str] = []
    for i in range(n):
        ctx = context(strategy, ts, state=st, seed=i, **kw)
        o = await get_strategy(strategy).order(ctx)
        chosen = serve(o) if serve else o.targets[0]
        if o.on_success is not None:
            await o.on_success(chosen, chosen.candidates()[0])
        out.append(chosen.provider.id)
    return out
