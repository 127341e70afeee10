"""``omniroute serve --workers 2``: one ``/metrics`` scrape shows the sum over the workers, whichever
worker answers it."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from serve_support import Served

from conftest import base_config
from omniroute.observe.metrics import prepare_multiprocess_dir
from omniroute.testing import FakeProviderThread

MAX_REQUESTS = 400


def one_request(url: str) -> int:
    body = {"model": "local-o/model-o", "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).status_code


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (s.labels, s.value)
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == name
    ]


def test_every_scrape_shows_the_requests_of_all_workers(
    tmp_path: Path, fakes: dict[str, FakeProviderThread]
) -> None:
    fakes["o"].set_behaviour("model-o", "latency-20")  # requests overlap, so both workers take some
    served = Served(tmp_path, base_config(fakes, tmp_path), "--workers", "2", "--log-format", "json")
    try:
        served.wait_ready()
        sent = 0
        with ThreadPoolExecutor(8) as pool:
            while sent < MAX_REQUESTS:
                assert set(pool.map(one_request, [served.url] * 8)) == {200}
                sent += 8
                if len({x["pid"] for x in served.json_lines() if x["logger"] == "omniroute.access"}) == 2:
                    break
        deadline = time.monotonic() + 30  # each worker writes its access line once the request is counted
        while sum(x["logger"] == "omniroute.access" for x in served.json_lines()) < sent:
            assert time.monotonic() < deadline, "access lines missing"
            time.sleep(0.05)
        access = [x for x in served.json_lines() if x["logger"] == "omniroute.access"]
        assert len({x["pid"] for x in access}) == 2, "both workers served requests"
        for _ in range(12):  # a new connection each time: the workers take turns answering
            text = httpx.get(f"{served.url}/metrics", timeout=10).text
            requests = samples(text, "omniroute_requests_total")
            assert sum(v for _, v in requests) == sent, requests
            assert [labels for labels, _ in requests] == [
                {"route": "provider/model", "strategy": "single", "status": "200"}
            ]
            assert samples(text, "omniroute_upstream_attempts_total") == [
                ({"provider": "local-o", "status": "200"}, float(sent))
            ]
            assert samples(text, "omniroute_request_duration_seconds_count") == [
                ({"route": "provider/model"}, float(sent))
            ]
            assert samples(text, "omniroute_requests_in_flight") == [({}, 0.0)]
            assert samples(text, "omniroute_routing_state_degraded") == [({}, 0.0)]
    finally:
        fakes["o"].set_behaviour("model-o", "")
        assert served.terminate() == 0


def test_a_given_multiprocess_dir_is_cleaned_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files of an earlier run would be added to this run's counters: they are removed first."""
    given = tmp_path / "prom"
    given.mkdir()
    (given / "counter_4242.db").write_bytes(b"stale")
    (given / "notes.txt").write_text("not a metrics file")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(given))
    assert prepare_multiprocess_dir() == str(given)
    assert sorted(p.name for p in given.iterdir()) == ["notes.txt"]


def test_without_a_given_dir_a_private_one_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")  # recorded, so the test's value is undone after
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    path = Path(prepare_multiprocess_dir())
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(path)
    assert path.is_dir() and not any(path.iterdir()) and (path.stat().st_mode & 0o777) == 0o700
    path.rmdir()
