"""Prometheus metrics (OBS-3), one registry per gateway (no module globals).

Names follow Prometheus conventions (``_total`` counters, ``_seconds`` histograms, base units). Breaker
and cooldown gauges are computed from the routing state at scrape time, so the hot path only touches
counters and histograms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from omniroute.routing.decision import Decision
    from omniroute.values import Candidate, Usage

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)
BREAKER_VALUES = {"CLOSED": 0, "HALF_OPEN": 1, "OPEN": 2}


class Metrics:
    """The gateway's metrics. ``observe_request`` is called once per finished request."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter(
            "omniroute_requests", "Client requests by outcome.", ["route", "strategy", "status"], registry=r
        )
        self.attempts = Counter(
            "omniroute_upstream_attempts",
            "Upstream calls by provider and status.",
            ["provider", "status"],
            registry=r,
        )
        self.fallbacks = Counter(
            "omniroute_fallbacks", "Requests served after at least one failed attempt.", ["route"], registry=r
        )
        self.latency = Histogram(
            "omniroute_request_duration_seconds",
            "End-to-end request latency.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "omniroute_time_to_first_token_seconds",
            "Time to the first streamed content.",
            ["provider"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.overhead = Histogram(
            "omniroute_gateway_overhead_seconds",
            "Time spent in the gateway itself.",
            buckets=OVERHEAD_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "omniroute_tokens",
            "Tokens by provider and direction.",
            ["provider", "model", "direction"],
            registry=r,
        )
        self.cost = Counter(
            "omniroute_cost_usd", "Spend in USD from catalog prices.", ["provider", "model"], registry=r
        )
        self.breaker = Gauge(
            "omniroute_circuit_breaker_state", "0 closed, 1 half-open, 2 open.", ["provider"], registry=r
        )
        self.cooldowns = Gauge("omniroute_connection_cooldowns", "Connections cooling down now.", registry=r)
        self.lockouts = Gauge("omniroute_model_lockouts", "Active model lockouts.", registry=r)
        # Labelled children by (metric, label values): ``labels()`` validates and locks on every call,
        # which cost more than the increments themselves on the hot path (PERF-2).
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Any, *values: str) -> Any:
        key = (metric, *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def observe_request(
        self,
        decision: Decision,
        status: int,
        cand: Candidate | None,
        usage: Usage | None,
        latency_ms: float,
        ttft_ms: float | None,
        cost_usd: float,
    ) -> None:
        """Record one finished request (OBS-3)."""
        child = self._child
        child(self.requests, decision.route, decision.strategy, str(status)).inc()
        child(self.latency, decision.route).observe(latency_ms / 1000)
        upstream_ms = 0.0
        for a in decision.attempts:
            child(self.attempts, a.provider, str(a.status)).inc()
            upstream_ms += a.latency_ms
        self.overhead.observe(max(latency_ms - upstream_ms, 0.0) / 1000)
        if status < 400 and len(decision.attempts) > 1:
            child(self.fallbacks, decision.route).inc()
        if cand is not None:
            provider, model = cand.provider.id, cand.model.id
            if ttft_ms is not None:
                child(self.ttft, provider).observe(ttft_ms / 1000)
            if usage is not None:
                child(self.tokens, provider, model, "input").inc(usage.prompt_tokens)
                child(self.tokens, provider, model, "output").inc(usage.completion_tokens)
            if cost_usd:
                child(self.cost, provider, model).inc(cost_usd)

    def render(self, snapshot: dict[str, object]) -> bytes:
        """The exposition text, with state gauges refreshed from a resilience snapshot."""
        breakers = snapshot.get("breakers") or {}
        assert isinstance(breakers, dict)
        self.breaker.clear()
        for provider, b in breakers.items():
            self.breaker.labels(provider).set(BREAKER_VALUES.get(str(b.get("state")), 0))
        cooldowns = snapshot.get("cooldowns") or {}
        assert isinstance(cooldowns, dict)
        self.cooldowns.set(sum(1 for c in cooldowns.values() if c.get("until")))
        lockouts = snapshot.get("lockouts") or []
        assert isinstance(lockouts, list)
        self.lockouts.set(len(lockouts))
        return generate_latest(self.registry)
