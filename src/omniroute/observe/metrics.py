"""Prometheus metrics (OBS-3), one registry per gateway (no module globals).

Names follow Prometheus conventions (``_total`` counters, ``_seconds`` histograms, base units). The hot
path only adds to plain dicts keyed by label values (one event-loop thread, no locks); a custom
collector turns them into metric families when ``/metrics`` is scraped, and ``prometheus_client``
writes the exposition text. Per request this costs a few dict updates instead of a dozen locked
``labels()``/``inc()`` calls (PERF-2). Breaker and cooldown gauges are computed from the routing state
at scrape time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from omniroute.routing.decision import Decision
    from omniroute.values import Candidate, Usage

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)
BREAKER_VALUES = {"CLOSED": 0, "HALF_OPEN": 1, "OPEN": 2}

Labels = tuple[str, ...]

MAX_SERIES = 2_000
"""Label combinations kept per metric; later new ones are counted under ``OVERFLOW_LABEL``. Model ids
come from clients (any ``provider/<name>`` is routed), so an unbounded label set would let them grow
``/metrics`` and the process without limit (PERF-5)."""
OVERFLOW_LABEL = "_other"


def _overflow(labels: Labels) -> Labels:
    return (OVERFLOW_LABEL,) * len(labels)


class _Counter:
    """A counter family: value per label tuple."""

    __slots__ = ("doc", "labelnames", "name", "values")

    def __init__(self, name: str, doc: str, labelnames: Sequence[str]) -> None:
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        values = self.values
        if labels not in values and len(values) >= MAX_SERIES:
            labels = _overflow(labels)
        values[labels] = values.get(labels, 0.0) + amount

    def family(self) -> Metric:
        fam = CounterMetricFamily(self.name, self.doc, labels=self.labelnames)
        for labels, value in sorted(self.values.items()):
            fam.add_metric(list(labels), value)
        return fam


class _Histogram:
    """A histogram family: per label tuple, the count in each bucket (non-cumulative, +Inf last)
    and the sum of observations (seconds)."""

    __slots__ = ("bounds", "doc", "labelnames", "name", "series")

    def __init__(self, name: str, doc: str, labelnames: Sequence[str], bounds: Sequence[float]) -> None:
        self.name, self.doc, self.labelnames = name, doc, list(labelnames)
        self.bounds = tuple(float(b) for b in bounds)
        self.series: dict[Labels, tuple[list[int], list[float]]] = {}
        if not self.labelnames:  # an unlabelled histogram is exported from the start, all zero
            self.series[()] = ([0] * (len(self.bounds) + 1), [0.0])

    def observe(self, labels: Labels, value: float) -> None:
        s = self.series.get(labels)
        if s is None:
            if len(self.series) >= MAX_SERIES:
                labels = _overflow(labels)
                s = self.series.get(labels)
            if s is None:
                s = self.series[labels] = ([0] * (len(self.bounds) + 1), [0.0])
        s[0][bisect_left(self.bounds, value)] += 1  # le is inclusive: value == bound counts in it
        s[1][0] += value

    def family(self) -> Metric:
        fam = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        les = [*(_le(b) for b in self.bounds), "+Inf"]
        for labels, (counts, total) in sorted(self.series.items()):
            running, buckets = 0, []
            for le, n in zip(les, counts, strict=True):
                running += n
                buckets.append((le, float(running)))
            fam.add_metric(list(labels), buckets, total[0])
        return fam


def _le(bound: float) -> str:
    return str(int(bound)) + ".0" if bound == int(bound) else repr(bound)


class Metrics(Collector):
    """The gateway's metrics. ``observe_request`` is called once per finished request."""

    def __init__(self) -> None:
        self.requests = _Counter(
            "omniroute_requests", "Client requests by outcome.", ["route", "strategy", "status"]
        )
        self.attempts = _Counter(
            "omniroute_upstream_attempts", "Upstream calls by provider and status.", ["provider", "status"]
        )
        self.fallbacks = _Counter(
            "omniroute_fallbacks", "Requests served after at least one failed attempt.", ["route"]
        )
        self.latency = _Histogram(
            "omniroute_request_duration_seconds", "End-to-end request latency.", ["route"], LATENCY_BUCKETS
        )
        self.ttft = _Histogram(
            "omniroute_time_to_first_token_seconds",
            "Time to the first streamed content.",
            ["provider"],
            LATENCY_BUCKETS,
        )
        self.overhead = _Histogram(
            "omniroute_gateway_overhead_seconds", "Time spent in the gateway itself.", [], OVERHEAD_BUCKETS
        )
        self.tokens = _Counter(
            "omniroute_tokens", "Tokens by provider and direction.", ["provider", "model", "direction"]
        )
        self.cost = _Counter("omniroute_cost_usd", "Spend in USD from catalog prices.", ["provider", "model"])
        self.malformed_events = _Counter(
            "omniroute_malformed_stream_events",
            "Malformed upstream stream events skipped after the stream was committed.",
            ["provider"],
        )
        self._gauges: list[Metric] = []
        #: more gauges, each made fresh on every scrape (e.g. the accounting spool's size)
        self.gauge_sources: list[Callable[[], Metric]] = []
        self.registry = CollectorRegistry()
        self.registry.register(self)

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
        """Record one finished request (OBS-3); latencies in ms, cost in USD."""
        route = (decision.route,)
        self.requests.inc((decision.route, decision.strategy, str(status)))
        self.latency.observe(route, latency_ms / 1000)
        upstream_ms = 0.0
        for a in decision.attempts:
            self.attempts.inc((a.provider, str(a.status)))
            upstream_ms += a.latency_ms
        self.overhead.observe((), max(latency_ms - upstream_ms, 0.0) / 1000)
        if status < 400 and len(decision.attempts) > 1:
            self.fallbacks.inc(route)
        if cand is not None:
            provider, model = cand.provider.id, cand.model.id
            if ttft_ms is not None:
                self.ttft.observe((provider,), ttft_ms / 1000)
            if usage is not None:
                self.tokens.inc((provider, model, "input"), usage.prompt_tokens)
                self.tokens.inc((provider, model, "output"), usage.completion_tokens)
            if cost_usd:
                self.cost.inc((provider, model), cost_usd)
            skipped = decision.extra.get("malformed_events_skipped")
            if skipped:
                self.malformed_events.inc((provider,), skipped)

    def collect(self) -> Iterator[Metric]:
        """Metric families for the registry (called by ``generate_latest``)."""
        for c in (
            self.requests,
            self.attempts,
            self.fallbacks,
            self.tokens,
            self.cost,
            self.malformed_events,
        ):
            yield c.family()
        for h in (self.latency, self.ttft, self.overhead):
            yield h.family()
        yield from self._gauges

    def render(self, snapshot: dict[str, object]) -> bytes:
        """The exposition text, with state gauges refreshed from a resilience snapshot
        (``Resilience.snapshot()``)."""
        breakers = snapshot.get("breakers") or {}
        assert isinstance(breakers, dict)
        breaker = GaugeMetricFamily(
            "omniroute_circuit_breaker_state", "0 closed, 1 half-open, 2 open.", labels=["provider"]
        )
        for provider, b in sorted(breakers.items()):
            breaker.add_metric([provider], BREAKER_VALUES.get(str(b.get("state")), 0))
        cooldowns = snapshot.get("cooldowns") or {}
        assert isinstance(cooldowns, dict)
        lockouts = snapshot.get("lockouts") or []
        assert isinstance(lockouts, list)
        self._gauges = [
            breaker,
            GaugeMetricFamily(
                "omniroute_connection_cooldowns",
                "Connections cooling down now.",
                value=sum(1 for c in cooldowns.values() if c.get("until")),
            ),
            GaugeMetricFamily("omniroute_model_lockouts", "Active model lockouts.", value=len(lockouts)),
            *(source() for source in self.gauge_sources),
        ]
        return generate_latest(self.registry)
