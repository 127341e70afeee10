"""OBS-3: the gateway's own metric families export exactly what prometheus_client's classes would."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from omniroute.observe.metrics import LATENCY_BUCKETS, Metrics


def _lines(text: bytes, prefix: str) -> list[str]:
    return [line for line in text.decode().splitlines() if prefix in line and "_created" not in line]


def test_histogram_buckets_and_sum_match_prometheus_client() -> None:
    reg = CollectorRegistry()
    ref = Histogram(
        "omniroute_request_duration_seconds",
        "End-to-end request latency.",
        ["route"],
        buckets=LATENCY_BUCKETS,
        registry=reg,
    )
    m = Metrics()
    for route, v in [("auto", 0.001), ("auto", 0.005), ("combo", 0.3), ("auto", 1.0), ("auto", 500.0)]:
        ref.labels(route).observe(v)
        m.latency.observe((route,), v)
    name = "omniroute_request_duration_seconds"
    assert _lines(m.render({}), name) == _lines(generate_latest(reg), name)


def test_counters_match_prometheus_client() -> None:
    reg = CollectorRegistry()
    ref = Counter(
        "omniroute_tokens",
        "Tokens by provider and direction.",
        ["provider", "model", "direction"],
        registry=reg,
    )
    m = Metrics()
    for labels, n in [(("p", "m", "input"), 3), (("p", "m", "output"), 5), (("p", "m", "input"), 2)]:
        ref.labels(*labels).inc(n)
        m.tokens.inc(labels, n)
    assert _lines(m.render({}), "omniroute_tokens") == _lines(generate_latest(reg), "omniroute_tokens")


def test_unlabelled_overhead_histogram_is_exported_before_any_request() -> None:
    text = Metrics().render({}).decode()
    assert 'omniroute_gateway_overhead_seconds_bucket{le="+Inf"} 0.0' in text
    assert "omniroute_gateway_overhead_seconds_count 0.0" in text


def test_client_chosen_label_values_cannot_grow_the_metrics_without_bound() -> None:
    """PERF-5/OBS-3: past MAX_SERIES label combinations, new ones are counted under ``_other``."""
    from omniroute.observe.metrics import MAX_SERIES

    m = Metrics()
    for i in range(MAX_SERIES + 500):
        m.tokens.inc(("p", f"model-{i}", "input"), 1)
        m.ttft.observe((f"p{i}",), 0.01)
    assert len(m.tokens.values) == MAX_SERIES + 1 and len(m.ttft.series) == MAX_SERIES + 1
    assert m.tokens.values[("_other", "_other", "_other")] == 500
    text = m.render({}).decode()
    assert 'omniroute_tokens_total{direction="_other",model="_other",provider="_other"} 500.0' in text
