"""``omniroute simulate``: deterministic runs, the shipped scenarios behave as documented, the CLI
writes its reports, and a bad fleet file is refused with the field named."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from typer.testing import CliRunner

from omniroute.cli.main import app
from omniroute.simulate.compare import Simulation, scenario_path
from omniroute.simulate.fleet import FleetError, load_fleet
from omniroute.simulate.run import run_variant
from omniroute.simulate.workload import TraceRecord, read_trace, write_trace

ROOT = Path(__file__).resolve().parents[1]


def _cli_json(tmp_path: Path, name: str, seed: int, hash_seed: str) -> bytes:
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": hash_seed}
    subprocess.run(
        [sys.executable, "-m", "omniroute.cli", "simulate", "--scenario", "outage", "--limit", "300",
         "--compare", "priority,auto", "--seed", str(seed), "--json", str(out), "--no-progress"],
        check=True, env=env, capture_output=True, timeout=300,
    )  # fmt: skip
    return out.read_bytes()


def test_same_seed_gives_byte_identical_json_across_processes(tmp_path: Path) -> None:
    first = _cli_json(tmp_path, "a", 7, "1")
    second = _cli_json(tmp_path, "b", 7, "2")  # another string-hash seed: set order must not matter
    assert first == second
    report = orjson.loads(first)
    assert report["requests"] == 300 and set(report["variants"]) == {"priority", "auto"}
    assert _cli_json(tmp_path, "c", 8, "1") != first  # the seed does drive the run


def _share_by_bucket(fig: dict[str, Any], provider: str) -> list[float]:
    return [float(x) for x in fig["timeline"]["share"][provider]]


def test_outage_scenario_falls_back_then_the_primary_wins_back() -> None:
    sim = Simulation.load(scenario="outage", seed=1)
    report, _, _ = asyncio.run(sim.run(["priority"], seed=1))
    fig = report["variants"]["priority"]
    assert fig["success_rate"] > 0.99
    assert fig["fallbacks"] > 0
    swift = _share_by_bucket(fig, "swift")
    width = fig["timeline"]["bucket_s"]
    # outage from 100 s to 160 s: before it swift (first in the combo) serves nearly everything,
    # during it nothing, and once its breaker lets a probe through it wins its traffic back
    before = [s for i, s in enumerate(swift) if (i + 1) * width <= 100]
    during = [s for i, s in enumerate(swift) if i * width >= 100 and (i + 1) * width <= 160]
    after = [s for i, s in enumerate(swift) if i * width >= 200]
    assert before and min(before) > 0.9
    assert during and max(during) == 0.0
    assert after and min(after) > 0.9
    breaker = fig["timeline"]["breakers"]["swift"]  # sampled at each bucket's end
    assert "OPEN" in breaker[: int(160 / width)] and breaker[-1] == "CLOSED"
    assert all(s == "CLOSED" for s in breaker[: int(100 / width) - 1])
    oracle = report["oracle"]
    assert oracle["success_rate"] == 1.0  # two providers stay up: perfect knowledge always finds one


def test_quota_scenario_moves_traffic_when_the_quota_runs_out() -> None:
    sim = Simulation.load(scenario="quota-exhausted", seed=1)
    report, _, _ = asyncio.run(sim.run(["priority"], seed=1))
    swift = _share_by_bucket(report["variants"]["priority"], "swift")
    assert swift[0] > 0.9 and swift[-1] == 0.0  # 900 requests per 600 s window, used up mid-run


def test_price_change_is_billed_from_its_time() -> None:
    sim = Simulation.load(scenario="price-change", seed=1)
    around = [r for r in sim.records if 140 <= r.arrival_s < 160]
    run = asyncio.run(run_variant(sim.fleet, around, "thrifty/thrifty-1", seed=1))
    served = [(res, rec) for res, rec in zip(run.results, around, strict=True) if res.status == 200]
    assert len(served) > 0.9 * len(around)
    for res, rec in served:  # thrifty bills $0.10/$0.40 per 1M tokens, $2/$8 from 150 s
        pin, pout = (0.10, 0.40) if rec.arrival_s < 150 else (2.0, 8.0)
        assert res.cost_usd == pytest.approx((rec.prompt_tokens * pin + rec.completion_tokens * pout) / 1e6)
    assert {rec.arrival_s < 150 for _, rec in served} == {True, False}


def test_cli_prints_the_table_and_writes_html_and_json(tmp_path: Path) -> None:
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    res = CliRunner().invoke(
        app,
        ["simulate", "--scenario", "steady", "--limit", "200", "--compare", "priority,weighted",
         "--html", str(html), "--json", str(js)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "oracle" in res.output and "priority" in res.output and "weighted" in res.output
    page = html.read_text(encoding="utf-8")
    assert "<table>" in page and "Ratios to the oracle" in page
    # latency CDF, cost over time, traffic share and breaker states over time
    assert page.count("data:image/png;base64,") == 4
    assert orjson.loads(js.read_bytes())["variants"]["weighted"]["requests"] == 200


def _fleet_doc() -> dict[str, Any]:
    return yaml.safe_load(scenario_path("steady").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d["targets"][0]["errors"].update(rate_limit=2), "targets[0].errors.rate_limit"),
        (lambda d: d["targets"][1]["ttft_ms"].update(median=-1), "targets[1].ttft_ms.median"),
        (lambda d: d["targets"][2].update(latency=3), "targets[2].latency"),
        (lambda d: d["targets"][0].update(provider="nobody"), "targets[0].provider"),
        (lambda d: d["config"]["connections"][0].update(priority="high"), "config.connections[0].priority"),
        (lambda d: d["workload"]["rate"][0].update(per_s="fast"), "workload.rate[0].per_s"),
    ],
)
def test_bad_fleet_yaml_is_refused_naming_the_field(tmp_path: Path, change: Any, field: str) -> None:
    doc = _fleet_doc()
    change(doc)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(FleetError) as exc:
        Simulation.load(fleet_file=path)
    assert any(k == field for k, _ in exc.value.errors), exc.value.errors
    res = CliRunner().invoke(app, ["simulate", "--fleet", str(path), "--no-progress"])
    assert res.exit_code == 2
    assert field in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("option", ["--html", "--json"])
def test_an_unwritable_report_path_is_refused_before_simulating(tmp_path: Path, option: str) -> None:
    """A report path in a missing folder, or naming a folder, gets a one-line error naming the option
    and exit 2 before any request is simulated (no tables, no traceback)."""
    for target, problem in (
        (tmp_path / "missing" / "x.out", "does not exist"),
        (tmp_path, "is a directory"),
    ):
        res = CliRunner().invoke(
            app,
            [
                "simulate",
                "--scenario",
                "outage",
                "--compare",
                "priority",
                "--limit",
                "5",
                option,
                str(target),
            ],
        )
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{option} ") and problem in lines[0], res.output
        assert "simulated requests" not in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("seed", ["-1", "2147483648"])
def test_cli_refuses_a_seed_the_console_refuses(seed: str) -> None:
    """Seeds run from 0 to 2147483647 on the command line as in the console."""
    res = CliRunner().invoke(app, ["simulate", "--scenario", "outage", "--limit", "5", "--seed", seed])
    assert res.exit_code == 2
    text = " ".join(res.output.replace("│", " ").split())  # the error box may wrap the line
    assert f"'--seed': must be between 0 and 2147483647 (got {seed})" in text
    assert "simulated requests" not in res.output


def test_unknown_scenario_lists_the_shipped_ones() -> None:
    res = CliRunner().invoke(app, ["simulate", "--scenario", "meteor"])
    assert res.exit_code == 2
    assert "unknown scenario 'meteor'" in res.output and "rate-limit-storm" in res.output


def test_every_shipped_scenario_loads() -> None:
    for name in ("steady", "outage", "rate-limit-storm", "quota-exhausted", "degradation", "price-change"):
        fleet = load_fleet(scenario_path(name))
        assert fleet.doc.description.strip()
        assert fleet.pool == ("swift/swift-1", "thrifty/thrifty-1", "brainy/brainy-1")


def test_a_trace_file_replays_its_own_model_strings(tmp_path: Path) -> None:
    records = [
        TraceRecord(i / 2, ("swift/swift-1", "brainy/brainy-1")[i % 2], 100, 20, i % 3 == 0, "code", f"s{i}")
        for i in range(40)
    ]
    trace = tmp_path / "trace.jsonl"
    assert write_trace(records, trace) == 40
    assert read_trace(trace) == records
    sim = Simulation.load(scenario="steady", trace=trace)
    report, runs, _ = asyncio.run(sim.run([None], seed=3))
    shares = report["variants"]["trace"]["traffic_share"]
    served = sum(1 for r in runs[0].results if r.status == 200)
    assert shares["swift"] == pytest.approx(sum(1 for r in runs[0].results if r.provider == "swift") / served)
    assert set(shares) == {"swift", "brainy"}


def test_a_bad_trace_line_is_refused_naming_line_and_field(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    good = b'{"arrival_s": 0, "model": "m", "prompt_tokens": 1, "completion_tokens": 1}\n'
    bad = b'{"arrival_s": 1, "model": "m", "prompt_tokens": -5, "completion_tokens": 1}\n'
    trace.write_bytes(good + bad)
    with pytest.raises(FleetError) as exc:
        read_trace(trace)
    assert exc.value.errors[0][0] == "line 2.prompt_tokens"


def test_usage_export_writes_a_trace_the_simulator_replays(tmp_path: Path) -> None:
    from omniroute.store import Store

    db = tmp_path / "usage.db"
    rows = [
        {"ts": 1_700_000_000.0 + i * 2, "request_id": f"r{i}", "requested_model": "swift/swift-1",
         "provider": "swift", "model": "swift-1", "status": 200, "prompt_tokens": 100 + i,
         "completion_tokens": 10 + i, "stream": i % 2 == 1, "api_key_id": "k1", "latency_ms": 5.0}
        for i in range(5)
    ] + [{"ts": 1_700_000_003.0, "request_id": "r2", "requested_model": "fusion", "member": "panel-1",
          "prompt_tokens": 1, "completion_tokens": 1}]  # fmt: skip

    async def seed() -> None:
        store = await Store.open(f"sqlite:///{db}", data_dir=str(tmp_path))
        try:
            await store.write_usage(rows)
        finally:
            await store.close()

    asyncio.run(seed())
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"database_url: sqlite:///{db}\n", encoding="utf-8")
    out = tmp_path / "trace.jsonl"
    res = CliRunner().invoke(app, ["usage", "export", str(out), "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    trace = read_trace(out)
    assert [(r.arrival_s, r.prompt_tokens, r.completion_tokens, r.stream, r.key) for r in trace] == [
        (i * 2.0, 100 + i, 10 + i, i % 2 == 1, "k1") for i in range(5)
    ]  # the member call of a multi-call request is not a request of its own
    sim = Simulation.load(scenario="steady", trace=out)
    report, _, _ = asyncio.run(sim.run([None], seed=1))
    assert report["variants"]["trace"]["requests"] == 5


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "gemini"])
def test_each_wire_format_is_answered_in_its_own_shape(fmt: str) -> None:
    doc = _fleet_doc()
    for p in doc["config"]["providers"]:
        p["format"] = fmt
    for t in doc["targets"]:
        t["errors"] = {}
    fleet = load_fleet(doc)
    records = [TraceRecord(i * 0.2, "swift/swift-1", 50 + i, 7 + i, i % 2 == 0, "chat") for i in range(20)]
    run = asyncio.run(run_variant(fleet, records, None, seed=1))
    assert [r.status for r in run.results] == [200] * 20
    assert {r.provider for r in run.results} == {"swift"}
    # the gateway parsed the usage out of each answer: the bill is the record's tokens at swift's price
    for r, rec in zip(run.results, records, strict=True):
        assert r.cost_usd == pytest.approx((rec.prompt_tokens * 0.5 + rec.completion_tokens * 1.5) / 1e6)
    assert all(r.ttft_ms is not None for r, rec in zip(run.results, records, strict=True) if rec.stream)


def test_without_matplotlib_the_html_report_has_the_tables_and_says_how_to_get_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as after a plain `pip install omniroute`
    html = tmp_path / "r.html"
    args = ["simulate", "--scenario", "steady", "--limit", "50", "--compare", "priority", "--html", str(html)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "omniroute[simulate]" in res.output
    page = html.read_text(encoding="utf-8")
    assert "<table>" in page and "data:image/png" not in page and "pip install" in page
