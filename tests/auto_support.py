"""In-process helpers for the auto-combo unit tests: a Gateway that is never started (no store, no
sockets) over a hand-made catalog, memory routing state on a fake clock, and ``plan()`` that runs
``plan_auto`` for one request and returns the ordered candidates, run options and decision."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from omniroute.clock import FakeClock
from omniroute.config import AutoConfig, Config
from omniroute.core.combo import parse_combo
from omniroute.gateway import Gateway
from omniroute.providers.catalog import Catalog
from omniroute.routing.auto import plan_auto
from omniroute.routing.decision import Decision
from omniroute.routing.plan import RunOptions
from omniroute.routing.registry import Registry
from omniroute.routing.resolve import resolve
from omniroute.state.records import QuotaSnapshot
from omniroute.values import Candidate, ChatRequest, Connection, ModelInfo, ProviderInfo

NOW = 1_700_000_000.0


def provider(
    pid: str,
    model: str,
    input_price: float | None,
    output_price: float | None,
    *,
    caps: Iterable[str] = (),
    tier: str = "standard",
    context: int = 128_000,
    max_output: int = 8192,
    fmt: str = "openai",
) -> ProviderInfo:
    """A one-model provider; prices in USD per 1M tokens."""
    return ProviderInfo(
        id=pid,
        format=fmt,
        base_url=f"http://{pid}.invalid/v1",
        models=(
            ModelInfo(
                id=model,
                input_price=input_price,
                output_price=output_price,
                context_window=context,
                max_output_tokens=max_output,
                capabilities=frozenset(caps),
                tier=tier,
            ),
        ),
    )


def make_gw(
    providers: Sequence[ProviderInfo],
    conns: Sequence[Connection] | None = None,
    *,
    exploration: float = 0.0,
    combos: Sequence[dict[str, Any]] = (),
    **auto: Any,
) -> Gateway:
    """A never-started gateway over ``providers`` with one ``<provider>-k`` API-key connection each
    (unless ``conns``), memory state on a :class:`FakeClock` at :data:`NOW`."""
    gw = Gateway(Config(auto=AutoConfig(exploration_rate=exploration, **auto)), clock=FakeClock(NOW))
    gw.catalog = Catalog(providers)
    if conns is None:
        conns = [Connection(id=f"{p.id}-k", provider=p.id, api_key="sk") for p in providers]
    gw.registry = Registry.build(gw.catalog, conns, combos=[parse_combo(c) for c in combos])
    return gw


def clock(gw: Gateway) -> FakeClock:
    c = gw.clock
    assert isinstance(c, FakeClock)
    return c


async def plan(
    gw: Gateway,
    model: str = "auto",
    *,
    text: str = "hi",
    headers: dict[str, str] | None = None,
    request_id: str = "req-1",
    api_key_id: str | None = None,
    session: str | None = None,
    body: dict[str, Any] | None = None,
) -> tuple[list[Candidate], RunOptions, Decision]:
    """Run ``plan_auto`` for one chat request."""
    b = body if body is not None else {"model": model, "messages": [{"role": "user", "content": text}]}
    req = ChatRequest(
        body=b,
        model=model,
        request_id=request_id,
        api_key_id=api_key_id,
        headers={k.lower(): v for k, v in (headers or {}).items()},
        session_id=session,
    )
    decision = Decision(request_id=request_id, requested_model=model)
    cands, opts = await plan_auto(gw, resolve(gw.registry, model), req, decision)
    return cands, opts, decision


async def seed_latency(gw: Gateway, key: str, values: Iterable[float], *, failures: int = 0) -> None:
    """Successful window samples of ``values`` ms (and ``failures`` failed ones) for ``key``."""
    for v in values:
        await gw.state.record_sample(key, NOW, latency_ms=v, ok=True)
    for _ in range(failures):
        await gw.state.record_sample(key, NOW, latency_ms=0.0, ok=False)


async def set_breaker(gw: Gateway, pid: str, state: str) -> None:
    """Put ``pid``'s breaker in ``OPEN`` (just opened) or ``HALF_OPEN`` (reset timeout elapsed)."""
    now = clock(gw).time()
    at = now - 100 if state == "HALF_OPEN" else now
    await gw.state.breaker_failure(
        pid, at, failure_threshold=1, reset_timeout_s=30, max_multiplier=16, reason="test"
    )


async def set_quota(gw: Gateway, conn_id: str, fraction: float) -> None:
    await gw.state.set_quota(conn_id, QuotaSnapshot(fraction, None, NOW))


def row(decision: Decision, provider_id: str) -> dict[str, Any]:
    """The decision's candidate row of ``provider_id``."""
    return next(r for r in decision.candidates if r["provider"] == provider_id)
