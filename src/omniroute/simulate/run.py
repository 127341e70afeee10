"""One simulation run: a workload through the real gateway on virtual time, and the oracle.

:func:`run_variant` builds a real :class:`~omniroute.gateway.Gateway` on a
:class:`~omniroute.clock.FakeClock` with the simulated upstream client injected, then replays the
workload as a discrete-event simulation (:meth:`FakeClock.run`: whenever no coroutine can run, the
clock jumps to the next wake-up — an arrival, a first token, an end of generation, a retry wait).
Each request goes through ``Gateway.execute`` — resolve → plan → ladder → engine — with the
in-process routing state evolving as it would in production. Nothing reads the process clock or
opens a socket; randomness is the per-request seed and the fleet's counter-based draws, so one seed
gives one result.

:func:`run_oracle` serves each request with the best choice given perfect knowledge of the fleet.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from omniroute.clock import FakeClock
from omniroute.config import Config, config_from_dict
from omniroute.errors import GatewayError, UpstreamError
from omniroute.gateway import Gateway
from omniroute.providers.upstream import AttemptTimeouts
from omniroute.routing.engine import StreamOutcome
from omniroute.routing.strategies.registry import strategy_names
from omniroute.simulate.fleet import Fleet, simulated_config
from omniroute.simulate.upstream import CURRENT, SimCall, SimulatedUpstreamClient, TargetRuntime, target_id
from omniroute.simulate.workload import TraceRecord
from omniroute.values import ChatRequest

EPOCH = 1_767_225_600.0
"""Virtual wall-clock time of the start of every run (2026-01-01T00:00:00Z)."""

Progress = Callable[[int], None]


@dataclass(slots=True)
class RequestResult:
    """The client-visible outcome of one request: ``status`` (200 or the error status the client
    got), end-to-end latency and time to first token in ms (TTFT for streams only), who served it,
    the billed cost (USD), the attempts made and the quality score of the answer (0 when failed)."""

    index: int
    arrival_s: float
    status: int
    latency_ms: float
    ttft_ms: float | None
    provider: str | None
    model: str | None
    cost_usd: float
    attempts: int
    quality: float
    task_type: str


@dataclass(slots=True)
class RunResult:
    """A variant's results, one per request in workload order; ``wall_s`` and ``cpu_s`` are the real
    and the process CPU time the replay took (reported, never part of the JSON, which must not depend
    on machine speed)."""

    variant: str
    model: str | None
    results: list[RequestResult]
    wall_s: float = 0.0
    cpu_s: float = 0.0
    breakers: list[dict[str, str]] = field(default_factory=list)
    """Each provider's breaker state (``CLOSED``, ``OPEN``, ``HALF_OPEN``) at the end of each
    ``sample_s`` interval of the run (providers whose breaker never moved are left out)."""


def variant_config(fleet: Fleet, variant: str | None) -> tuple[Config, str | None]:
    """The gateway config for ``variant`` and the model string requests use (``None``: the trace's).

    A registered combo strategy name (``priority``, ``weighted`` …) becomes a combo
    ``sim-<strategy>`` over the fleet's pool; ``auto…`` and any other string (a combo of the config,
    ``provider/model``) are requested as they are."""
    if variant is None:
        return fleet.config, None
    if variant in strategy_names():
        name = f"sim-{variant}"
        data = simulated_config(fleet.doc)
        combos = [
            c for c in data.get("combos") or () if not (isinstance(c, Mapping) and c.get("name") == name)
        ]
        combos.append({"name": name, "strategy": variant, "targets": [{"model": m} for m in fleet.pool]})
        data["combos"] = combos
        return config_from_dict(data, env={}), name
    return fleet.config, variant


async def run_variant(
    fleet: Fleet,
    records: Sequence[TraceRecord],
    variant: str | None,
    *,
    seed: int,
    progress: Progress | None = None,
    sample_s: float | None = None,
) -> RunResult:
    """Replay ``records`` through a real gateway for ``variant`` (see :func:`variant_config`);
    with ``sample_s`` (seconds of virtual time) the breakers' states are sampled that often.

    Raises :class:`~omniroute.config.ConfigError` when the variant's config is invalid."""
    config, model = variant_config(fleet, variant)
    clock = FakeClock(start=EPOCH)
    timeouts = AttemptTimeouts(
        config.resilience.timeouts.connect_s,
        config.resilience.timeouts.ttft_s,
        config.resilience.timeouts.idle_s,
        config.resilience.timeouts.total_s,
    )
    client = SimulatedUpstreamClient(fleet, clock, seed=seed, origin=clock.monotonic(), timeouts=timeouts)
    gw = Gateway(config, clock=clock, client=client)
    await gw.start(background=False)
    await _detach_store(gw)
    started = time.perf_counter()  # noqa: TID251 - the report's wall time, never part of the results
    cpu = time.process_time()
    # The gateway's long-lived objects stay out of the collector's scans during the run. Not when
    # something is frozen already (a server that froze its start-up objects runs this from the
    # console): unfreezing would hand those back to the collector, and a full collection would stall
    # the requests it is serving.
    own_freeze = gc.get_freeze_count() == 0
    if own_freeze:
        gc.collect()
        gc.freeze()
    try:
        breakers: list[dict[str, str]] = []
        sampler = asyncio.ensure_future(_sample_breakers(gw, clock, sample_s, breakers)) if sample_s else None
        try:
            results = await clock.run(_replay(gw, client, clock, records, model, seed, progress))
        finally:
            if sampler is not None:
                sampler.cancel()
    finally:
        if own_freeze:
            gc.unfreeze()
        await gw.stop()
    wall = time.perf_counter() - started  # noqa: TID251
    return RunResult(variant or "trace", model, results, wall, time.process_time() - cpu, breakers)


async def _sample_breakers(gw: Gateway, clock: FakeClock, every_s: float, out: list[dict[str, str]]) -> None:
    """Every ``every_s`` seconds, append each provider's effective breaker state (an OPEN breaker
    whose reset timeout has passed admits a probe: HALF_OPEN)."""
    while True:
        await clock.sleep(every_s)
        now = clock.time()
        sample = {}
        for provider, rec in sorted((await gw.state.all_breakers()).items()):
            state = str(rec.state)
            if state == "OPEN" and rec.opened_at is not None and now >= rec.opened_at + rec.reset_timeout_s:
                state = "HALF_OPEN"
            sample[provider] = state
        out.append(sample)


async def _detach_store(gw: Gateway) -> None:
    """Close the gateway's store once the routing snapshot is built: the request path then runs on
    in-process state alone. The store's reads run in a thread the virtual clock cannot see (the clock
    would jump while one is pending), and a fresh simulated gateway has no stored history anyway —
    the auto router's optional inputs from it (per-key exclusions, the 24 h usage view) read as
    empty, as they do for a new deployment."""
    store, gw.store = gw.store, None
    if store is not None:
        await store.close()


async def _replay(
    gw: Gateway,
    client: SimulatedUpstreamClient,
    clock: FakeClock,
    records: Sequence[TraceRecord],
    model: str | None,
    seed: int,
    progress: Progress | None,
) -> list[RequestResult]:
    results: list[RequestResult | None] = [None] * len(records)
    pending: set[asyncio.Task[None]] = set()
    origin = clock.monotonic()
    done = 0

    def finished(task: asyncio.Task[None]) -> None:
        nonlocal done
        pending.discard(task)
        done += 1
        if progress is not None:
            progress(done)

    for i, rec in enumerate(records):
        wait = rec.arrival_s - (clock.monotonic() - origin)
        if wait > 0:
            await clock.sleep(wait)
        task = asyncio.create_task(_one(gw, client, clock, i, rec, model or rec.model, seed, results))
        pending.add(task)
        task.add_done_callback(finished)
    while pending:
        await asyncio.gather(*list(pending))
    return [r for r in results if r is not None]


async def _one(
    gw: Gateway,
    client: SimulatedUpstreamClient,
    clock: FakeClock,
    i: int,
    rec: TraceRecord,
    model: str,
    seed: int,
    out: list[RequestResult | None],
) -> None:
    CURRENT.set(SimCall(i, rec))
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": f"{rec.task_type} request {i}"}],
        "max_tokens": max(rec.completion_tokens, 1),
    }
    if rec.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    req = ChatRequest(
        body=body,
        model=model,
        stream=rec.stream,
        include_usage=rec.stream,
        request_id=f"sim-{i:08d}",
        headers={"x-omniroute-seed": str(seed * 1_000_003 + i)},
        session_id=rec.session_id,
        api_key_id=rec.key,
    )
    t0 = clock.monotonic()
    status, ttft, cand, usage, attempts = 200, None, None, None, 0
    try:
        outcome, decision = await gw.execute(req)
        cand = outcome.candidate
        if isinstance(outcome, StreamOutcome):
            ttft = outcome.ttft_ms
            try:
                async for _ in outcome.batches():
                    pass
            except UpstreamError as err:
                await outcome.finalize(err)
                status = 502  # the committed stream ended with an error event: the client saw it fail
            else:
                await outcome.finalize(None)
            usage = outcome.usage
        else:
            usage = outcome.usage
        attempts = len(decision.attempts)
    except GatewayError as exc:
        status = exc.status
        diag = (exc.extra or {}).get("diagnostics") if isinstance(getattr(exc, "extra", None), dict) else None
        attempts = len(diag.get("attempted") or ()) if isinstance(diag, dict) else 0
    latency = (clock.monotonic() - t0) * 1000
    cost, quality = 0.0, 0.0
    if status == 200 and cand is not None:
        rt = client.runtime(cand.provider.id, cand.connection.id, cand.model.id)
        if rt is not None:
            now = t0 - client.origin
            pin, pout = rt.price_at(now, cand.model.input_price, cand.model.output_price)
            p, c = (usage.prompt_tokens, usage.completion_tokens) if usage else (rec.prompt_tokens, 0)
            cost = (p * pin + c * pout) / 1e6
            quality = rt.target.quality_for(rec.task_type)
    out[i] = RequestResult(
        index=i,
        arrival_s=rec.arrival_s,
        status=status,
        latency_ms=latency,
        ttft_ms=ttft,
        provider=cand.provider.id if cand is not None and status == 200 else None,
        model=cand.model.id if cand is not None and status == 200 else None,
        cost_usd=cost,
        attempts=attempts,
        quality=quality,
        task_type=rec.task_type,
    )


@dataclass(frozen=True, slots=True)
class _Choice:
    rt: TargetRuntime
    quality: float
    cost: float
    latency_s: float
    ttft_s: float


async def pool_prices(fleet: Fleet) -> dict[str, tuple[float | None, float | None, list[str]]]:
    """``provider/model`` → (input price, output price, active connection ids) as the gateway's
    registry sees them (catalog prices unless the config overrides them)."""
    gw = Gateway(fleet.config, clock=FakeClock(start=EPOCH))
    await gw.start(background=False)
    try:
        reg = gw.registry
        out: dict[str, tuple[float | None, float | None, list[str]]] = {}
        for p, m in reg.routable_models():
            out[f"{p.id}/{m.id}"] = (
                m.input_price,
                m.output_price,
                [c.id for c in reg.active_connections(p.id)],
            )
        return out
    finally:
        await gw.stop()


def run_oracle(
    fleet: Fleet,
    records: Sequence[TraceRecord],
    prices: Mapping[str, tuple[float | None, float | None, list[str]]],
    *,
    seed: int,
) -> RunResult:
    """Serve each request with perfect knowledge: every connection of every pool model is tried on
    paper with the same draws the simulated upstream uses for a first attempt; among those that would
    answer (no outage, no error, no cut, within the TTFT timeout and the quota — which the oracle's
    own traffic uses up) it takes the cheapest whose quality for the task is within the fleet's
    ``oracle_quality_slack`` (default 0.05) of the best, ties to the fastest. A request fails only
    when nothing could serve it."""
    ttft_limit = fleet.config.resilience.timeouts.ttft_s
    slack = fleet.doc.oracle_quality_slack
    runtimes: list[tuple[TargetRuntime, float | None, float | None]] = []
    for s in fleet.pool:
        pin, pout, conns = prices.get(s, (None, None, []))
        provider, model = s.split("/", 1)
        for c in conns:
            t = fleet.target_for(provider, c, model)
            if t is not None:
                runtimes.append((TargetRuntime(t, target_id(c, model), provider, c, model), pin, pout))
    out: list[RequestResult] = []
    for i, rec in enumerate(records):
        now = rec.arrival_s
        tokens = rec.prompt_tokens + rec.completion_tokens
        options: list[_Choice] = []
        for rt, pin, pout in runtimes:
            d = rt.draw(seed, i, 0, now, rec.completion_tokens)
            if d.kind != "ok" or d.cut or d.ttft_s > ttft_limit:
                continue
            if rt.quota_wait(now, tokens, take=False) is not None:
                continue
            bin_, bout = rt.price_at(now, pin, pout)
            cost = (rec.prompt_tokens * bin_ + rec.completion_tokens * bout) / 1e6
            q = rt.target.quality_for(rec.task_type)
            options.append(_Choice(rt, q, cost, d.ttft_s + d.gen_s, d.ttft_s))
        if not options:
            out.append(RequestResult(i, now, 503, 0.0, None, None, None, 0.0, 0, 0.0, rec.task_type))
            continue
        best_q = max(o.quality for o in options)
        pick = min(
            (o for o in options if o.quality >= best_q - slack),
            key=lambda o: (o.cost, o.latency_s, o.rt.connection, o.rt.model),
        )
        pick.rt.quota_wait(now, tokens, take=True)
        out.append(
            RequestResult(
                i,
                now,
                200,
                pick.latency_s * 1000,
                pick.ttft_s * 1000 if rec.stream else None,
                pick.rt.provider,
                pick.rt.model,
                pick.cost,
                1,
                pick.quality,
                rec.task_type,
            )
        )
    return RunResult("oracle", None, out)


__all__ = [
    "EPOCH",
    "RequestResult",
    "RunResult",
    "pool_prices",
    "run_oracle",
    "run_variant",
    "variant_config",
]
