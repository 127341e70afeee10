"""Prometheus metrics (OBS-3), one registry per gateway (no module globals).

Names follow Prometheus conventions (``_total`` counters, ``_seconds`` histograms, base units). The hot
path only adds to plain dicts keyed by label values (one event-loop thread, no locks); a custom
collector turns them into metric families when ``/metrics`` is scraped, and ``prometheus_client``
writes the exposition text. Per request this costs a few dict updates instead of a dozen locked
``labels()``/``inc()`` calls (PERF-2). Breaker and cooldown gauges are computed from the routing state
at scrape time.

Several worker processes (``omniroute serve --workers N``): ``serve`` points
``$PROMETHEUS_MULTIPROC_DIR`` at a private directory before the workers start, and each worker then
records into ``prometheus_client``'s per-process files (:class:`_MpCounter`, :class:`_MpHistogram`,
multiprocess gauges) instead of the dicts; ``/metrics`` in any worker reads every worker's files
(``MultiProcessCollector``), so one scrape shows the sum over workers. ``omniroute_requests_in_flight`` is
summed over live workers (``livesum``), ``omniroute_routing_state_degraded`` is the most recent reading
of a live worker (``livemostrecent``); the breaker, cooldown and lockout gauges are read from the
routing state by the scraping worker (the same in every worker when the state is shared in Redis).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client import Gauge as PromGauge
from prometheus_client import Histogram as PromHistogram
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from omniroute.routing.decision import Decision
    from omniroute.values import Candidate, Usage

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)
BREAKER_VALUES = {"CLOSED": 0, "HALF_OPEN": 1, "OPEN": 2}
IN_FLIGHT = "omniroute_requests_in_flight"
IN_FLIGHT_DOC = "Client requests being served now."
DEGRADED = "omniroute_routing_state_degraded"
DEGRADED_DOC = "1 while the shared routing state (Redis) is unreachable and local state is used, else 0."

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


class _MpCounter:
    """A counter family in the worker's multiprocess files (same ``inc`` as :class:`_Counter`)."""

    __slots__ = ("children", "metric")

    def __init__(self, name: str, doc: str, labelnames: Sequence[str]) -> None:
        self.metric = PromCounter(name, doc, labelnames, registry=None)
        self.children: dict[Labels, Any] = {}

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        _child(self.children, self.metric, labels).inc(amount)


class _MpHistogram:
    """A histogram family in the worker's multiprocess files (same ``observe`` as :class:`_Histogram`)."""

    __slots__ = ("children", "metric")

    def __init__(self, name: str, doc: str, labelnames: Sequence[str], bounds: Sequence[float]) -> None:
        self.metric = PromHistogram(name, doc, labelnames, registry=None, buckets=bounds)
        self.children: dict[Labels, Any] = {}

    def observe(self, labels: Labels, value: float) -> None:
        _child(self.children, self.metric, labels).observe(value)


def _child(children: dict[Labels, Any], metric: Any, labels: Labels) -> Any:
    """The labelled child of a ``prometheus_client`` metric, cached; past :data:`MAX_SERIES` new
    label sets share the overflow child."""
    child = children.get(labels)
    if child is None:
        if len(children) >= MAX_SERIES:
            labels = _overflow(labels)
            child = children.get(labels)
        if child is None:
            child = children[labels] = metric.labels(*labels) if labels else metric
    return child


def multiprocess_dir() -> str | None:
    """``$PROMETHEUS_MULTIPROC_DIR`` when set (``omniroute serve --workers N`` sets it), else ``None``."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def prepare_multiprocess_dir() -> str:
    """Set up ``$PROMETHEUS_MULTIPROC_DIR`` for a server with several workers, before they start: the
    directory already named there (its metric files from an earlier run removed, as
    ``prometheus_client`` requires), else a new private temporary directory (mode 0700, removed at
    exit). Returns the directory."""
    given = multiprocess_dir()
    if given is not None:
        os.makedirs(given, exist_ok=True)
        for name in os.listdir(given):
            if name.endswith(".db"):
                os.remove(os.path.join(given, name))
        return given
    path = tempfile.mkdtemp(prefix="omniroute-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    atexit.register(shutil.rmtree, path, True)
    return path


def _le(bound: float) -> str:
    return str(int(bound)) + ".0" if bound == int(bound) else repr(bound)


class Metrics(Collector):
    """The gateway's metrics. ``observe_request`` is called once per finished request."""

    def __init__(self, multiprocess: bool | None = None) -> None:
        """``multiprocess``: record into ``prometheus_client``'s multiprocess files (default: when
        ``$PROMETHEUS_MULTIPROC_DIR`` is set, which must happen before ``prometheus_client`` is first
        imported in the process)."""
        self.multiprocess = multiprocess_dir() is not None if multiprocess is None else multiprocess
        counter: Any = _MpCounter if self.multiprocess else _Counter
        histogram: Any = _MpHistogram if self.multiprocess else _Histogram
        self.requests = counter(
            "omniroute_requests", "Client requests by outcome.", ["route", "strategy", "status"]
        )
        self.attempts = counter(
            "omniroute_upstream_attempts", "Upstream calls by provider and status.", ["provider", "status"]
        )
        self.fallbacks = counter(
            "omniroute_fallbacks", "Requests served after at least one failed attempt.", ["route"]
        )
        self.latency = histogram(
            "omniroute_request_duration_seconds", "End-to-end request latency.", ["route"], LATENCY_BUCKETS
        )
        self.ttft = histogram(
            "omniroute_time_to_first_token_seconds",
            "Time to the first streamed content.",
            ["provider"],
            LATENCY_BUCKETS,
        )
        self.overhead = histogram(
            "omniroute_gateway_overhead_seconds", "Time spent in the gateway itself.", [], OVERHEAD_BUCKETS
        )
        self.tokens = counter(
            "omniroute_tokens", "Tokens by provider and direction.", ["provider", "model", "direction"]
        )
        self.cost = counter("omniroute_cost_usd", "Spend in USD from catalog prices.", ["provider", "model"])
        self.malformed_events = counter(
            "omniroute_malformed_stream_events",
            "Malformed upstream stream events skipped after the stream was committed.",
            ["provider"],
        )
        self.stream_rescues = counter(
            "omniroute_stream_rescues",
            "Streams that failed after commit and were handed to stream rescue, one per stream, by "
            "the provider whose stream failed first and outcome (rescued: the client's stream "
            "completed thanks to the rescue; failed otherwise).",
            ["provider", "outcome"],
        )
        self.in_flight = 0
        self.state_degraded = 0
        self._mp_in_flight: Any = None
        self._mp_degraded: Any = None
        if self.multiprocess:
            self._mp_in_flight = PromGauge(
                IN_FLIGHT, IN_FLIGHT_DOC, registry=None, multiprocess_mode="livesum"
            )
            self._mp_degraded = PromGauge(
                DEGRADED, DEGRADED_DOC, registry=None, multiprocess_mode="livemostrecent"
            )
        self._gauges: list[Metric] = []
        #: more gauges, each made fresh on every scrape (e.g. the accounting spool's size)
        self.gauge_sources: list[Callable[[], Metric]] = []
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def request_started(self) -> None:
        """One more request in flight (``omniroute_requests_in_flight``)."""
        self.in_flight += 1
        if self._mp_in_flight is not None:
            self._mp_in_flight.inc()

    def request_finished(self) -> None:
        """One request fewer in flight."""
        self.in_flight -= 1
        if self._mp_in_flight is not None:
            self._mp_in_flight.dec()

    def set_state_degraded(self, degraded: bool) -> None:
        """Whether the shared routing state (Redis) is unreachable and local state is used: 1 or 0 in
        ``omniroute_routing_state_degraded``."""
        self.state_degraded = int(degraded)
        if self._mp_degraded is not None:
            self._mp_degraded.set(self.state_degraded)

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
        rescues = decision.extra.get("stream_rescues")
        if rescues:  # one outcome per stream, however many attempts its rescue took
            failed = str(rescues[0].get("failed") or "").split("/", 1)[0]
            whole = bool(decision.extra.get("rescued")) and status < 400
            self.stream_rescues.inc((failed, "rescued" if whole else "failed"))

    def collect(self) -> Iterator[Metric]:
        """Metric families for the registry (called by ``generate_latest``); with several workers only
        the routing-state gauges (the rest comes from the multiprocess files)."""
        if self.multiprocess:
            yield from self._gauges
            return
        yield GaugeMetricFamily(IN_FLIGHT, IN_FLIGHT_DOC, value=self.in_flight)
        yield GaugeMetricFamily(DEGRADED, DEGRADED_DOC, value=self.state_degraded)
        for c in (
            self.requests,
            self.attempts,
            self.fallbacks,
            self.tokens,
            self.cost,
            self.malformed_events,
            self.stream_rescues,
        ):
            yield c.family()
        for h in (self.latency, self.ttft, self.overhead):
            yield h.family()
        yield from self._gauges

    def close(self) -> None:
        """At process exit: with several workers, drop this worker's live gauge files
        (``mark_process_dead``), so a stopped worker no longer counts in ``livesum``/``livemostrecent``."""
        if self.multiprocess and multiprocess_dir() is not None:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]

    def render(
        self,
        snapshot: dict[str, object],
        state_entries: Mapping[str, int] | None = None,
        state_evictions: Mapping[str, int] | None = None,
    ) -> bytes:
        """The exposition text, with state gauges refreshed from a resilience snapshot
        (``Resilience.snapshot()``) and, for in-process routing state, its bounded tables: entries held
        (``omniroute_state_entries``) and evicted since start (``omniroute_state_evictions_total``),
        by table name."""
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
        if state_entries is not None:
            entries = GaugeMetricFamily(
                "omniroute_state_entries", "Entries of in-process routing state, by table.", labels=["table"]
            )
            for table, n in sorted(state_entries.items()):
                entries.add_metric([table], n)
            self._gauges.append(entries)
        if state_evictions is not None:
            evicted = CounterMetricFamily(
                "omniroute_state_evictions",
                "Least recently written entries evicted from a full in-process routing-state table.",
                labels=["table"],
            )
            for table, n in sorted(state_evictions.items()):
                evicted.add_metric([table], n)
            self._gauges.append(evicted)
        if not self.multiprocess:
            return generate_latest(self.registry)
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(self)
        return generate_latest(registry)
