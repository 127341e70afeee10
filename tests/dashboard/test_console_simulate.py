"""The console's Simulate page over HTTP: it follows the console's access and CSRF rules, says what is
wrong with bad form input (422, never a 500), and a small run of a shipped scenario shows the same
figures ``omniroute simulate`` computes for that scenario, seed and limit, with the plots (or a note
when matplotlib is missing). In-process (ASGI transport), like ``test_console_http``."""

from __future__ import annotations

import asyncio
import gc
import html
import re
import sys
from collections.abc import Callable
from typing import Any

import pytest
from test_console_http import ADMIN_KEY, client, make_app, sign_in

from omniroute.simulate.compare import Simulation

__all__ = ["make_app"]  # the fixture, imported so pytest finds it here


def table_rows(page: str, table_id: str) -> dict[str, list[str]]:
    """``{row header: [cell texts]}`` of the table with ``id=table_id``."""
    found = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S)
    assert found is not None, page
    rows = {}
    for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.S):
        head = re.search(r'<th scope="row">(.*?)</th>', tr, re.S)
        if head:
            cells = [html.unescape(c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
            rows[html.unescape(head.group(1)).strip()] = cells
    return rows


def error_text(page: str) -> str:
    found = re.search(r'<p class="error span2" role="alert" id="sim-error">(.*?)</p>', page, re.S)
    assert found is not None, page
    return html.unescape(found.group(1))


async def test_simulate_page_needs_a_signed_in_session_and_the_csrf_token(
    make_app: Callable[..., Any],
) -> None:
    """Without a session the page sends the browser to sign-in and a run is refused; signed in, a
    run without the page's CSRF token is refused with 403; the nav links the page."""
    app = await make_app(ADMIN_KEY)
    async with client(app) as c:
        r = await c.get("/dashboard/simulate")
        assert (
            r.status_code == 303 and r.headers["location"] == "/dashboard/login?next=%2Fdashboard%2Fsimulate"
        )
        r = await c.post("/dashboard/simulate", data={"variant": "priority", "limit": "5"})
        assert r.status_code == 401
        token = await sign_in(c)
        home = await c.get("/dashboard")
        assert 'href="/dashboard/simulate"' in home.text
        for headers, data in (({}, {}), ({}, {"csrf_token": token + "x"}), ({"X-CSRF-Token": "nope"}, {})):
            r = await c.post("/dashboard/simulate", headers=headers, data={**data, "variant": "priority"})
            assert r.status_code == 403 and r.json()["error"]["code"] == "csrf_failed"
        page = await c.get("/dashboard/simulate")
        assert page.status_code == 200 and 'aria-current="page">Simulate' in page.text
        assert '<option value="rate-limit-storm">' in page.text


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (
            {"scenario": "meltdown", "variant": "priority"},
            "sim-scenario",
            "scenario: unknown scenario 'meltdown'",
        ),
        ({"variant": "priority", "seed": "abc"}, "sim-seed", "seed: 'abc' is not a whole number"),
        (
            {"variant": "priority", "seed": "-1"},
            "sim-seed",
            "seed: must be between 0 and 2147483647 (got -1)",
        ),
        ({"variant": "priority", "limit": "0"}, "sim-limit", "limit: must be between 1 and 5000 (got 0)"),
        ({"variant": "priority", "limit": "1e9"}, "sim-limit", "limit: '1e9' is not a whole number"),
        ({}, "sim-v-1", "variant: choose at least one strategy to compare"),
        ({"extra": "priority, nonsense"}, "sim-extra", "variant 'nonsense': not a combo strategy"),
        ({"extra": "auto/nowhere"}, "sim-extra", "variant 'auto/nowhere': Invalid auto model"),
    ],
)
async def test_simulate_form_names_what_is_wrong_with_bad_input(
    make_app: Callable[..., Any], data: dict[str, str], field: str, message: str
) -> None:
    """Bad form input gets 422 with the message on the page and the typed values kept, never a 500."""
    app = await make_app()
    async with client(app) as c:
        page = await c.get("/dashboard/simulate")
        token = re.search(r'"X-CSRF-Token": "([^"]+)"', page.text)
        assert token is not None
        r = await c.post("/dashboard/simulate", data={"csrf_token": token.group(1), **data})
        assert r.status_code == 422, r.text
        assert error_text(r.text).startswith(message), error_text(r.text)
        assert f'id="{field}"' in r.text
        assert 'id="sim-table"' not in r.text
        for value in data.values():
            assert html.escape(value) in r.text  # what was typed is still in the form


async def expected_report(scenario: str, variants: list[str], seed: int, limit: int) -> dict[str, Any]:
    """The report ``omniroute simulate`` computes for the same input (its own loop, in a thread)."""

    def run() -> dict[str, Any]:
        sim = Simulation.load(scenario=scenario, seed=seed, limit=limit)
        return asyncio.run(sim.run(list(variants), seed=seed))[0]

    return await asyncio.to_thread(run)


async def test_simulate_runs_a_small_scenario_and_shows_the_comparison(make_app: Callable[..., Any]) -> None:
    """A run of the outage scenario shows one row per variant and the oracle with the simulator's own
    figures (success, errors, fallbacks, quality, ratios to the oracle) and the four plots; an htmx
    request gets the fragment only."""
    app = await make_app()
    form = {"scenario": "outage", "variant": ["priority", "cost-optimized"], "seed": "7", "limit": "40"}
    async with client(app) as c:
        page = await c.get("/dashboard/simulate")
        token = re.search(r'"X-CSRF-Token": "([^"]+)"', page.text)
        assert token is not None
        r = await c.post(
            "/dashboard/simulate", data={"csrf_token": token.group(1), **form}, headers={"HX-Request": "true"}
        )
    assert r.status_code == 200, r.text
    assert "<html" not in r.text and r.text.lstrip().startswith('<div id="simulate-live">')
    report = await expected_report("outage", ["priority", "cost-optimized"], 7, 40)
    assert "Scenario outage: 40 requests, seed 7" in r.text
    rows = table_rows(r.text, "sim-table")
    assert list(rows) == ["priority", "cost-optimized", "oracle"]
    for name, fig in [*report["variants"].items(), ("oracle", report["oracle"])]:
        success, errors, _p50, _p95, _p99, _cost, _cps, fallbacks, quality = rows[name]
        assert success == f"{fig['success_rate'] * 100:.2f} %"
        assert errors == str(fig["errors"])
        assert fallbacks == str(fig["fallbacks"])
        assert quality == f"{fig['quality']:.3f}"
    ratios = table_rows(r.text, "sim-ratios")
    assert (
        ratios["cost-optimized"][1] == f"{report['variants']['cost-optimized']['vs_oracle']['cost_usd']:.3f}"
    )
    assert len(re.findall(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"', r.text)) == 4
    assert 'id="sim-no-plots"' not in r.text


async def test_simulate_without_matplotlib_shows_the_table_and_how_to_get_the_plots(
    make_app: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without matplotlib the comparison is still shown, with a note on installing it for the plots."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    app = await make_app()
    async with client(app) as c:
        page = await c.get("/dashboard/simulate")
        token = re.search(r'"X-CSRF-Token": "([^"]+)"', page.text)
        assert token is not None
        r = await c.post(
            "/dashboard/simulate",
            data={"csrf_token": token.group(1), "scenario": "steady", "variant": "priority", "limit": "10"},
        )
    assert r.status_code == 200
    assert list(table_rows(r.text, "sim-table")) == ["priority", "oracle"]
    assert "<img" not in r.text
    assert "matplotlib, which is not installed: <code>pip install 'omniroute[simulate]'</code>" in r.text


async def test_a_console_simulation_keeps_the_servers_frozen_start_up_objects_frozen(
    make_app: Callable[..., Any],
) -> None:
    """A server that froze its start-up objects out of the collector's view keeps them frozen after
    a simulation run from the console (the run must not unfreeze what it did not freeze)."""
    app = await make_app()
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        async with client(app) as c:
            page = await c.get("/dashboard/simulate")
            token = re.search(r'"X-CSRF-Token": "([^"]+)"', page.text)
            assert token is not None
            r = await c.post(
                "/dashboard/simulate",
                data={
                    "csrf_token": token.group(1),
                    "scenario": "steady",
                    "variant": "priority",
                    "limit": "5",
                },
            )
        assert r.status_code == 200 and list(table_rows(r.text, "sim-table")) == ["priority", "oracle"]
        # unfreezing empties the permanent generation; frozen objects freed since leave it one by one
        assert gc.get_freeze_count() > frozen // 2, (gc.get_freeze_count(), frozen)
    finally:
        gc.unfreeze()


async def test_a_second_simulation_while_one_runs_is_told_to_wait(make_app: Callable[..., Any]) -> None:
    """One simulation at a time per gateway: while one runs, another gets 409 with a message on the
    page (htmx, which swaps only successful answers, gets it as 200) and nothing is run."""
    app = await make_app()
    async with client(app) as c:
        page = await c.get("/dashboard/simulate")
        token = re.search(r'"X-CSRF-Token": "([^"]+)"', page.text)
        assert token is not None
        data = {"csrf_token": token.group(1), "scenario": "steady", "variant": "priority", "limit": "5"}
        running: asyncio.Lock = app.admin.state.simulation_lock
        await running.acquire()  # the run already going
        try:
            r = await c.post("/dashboard/simulate", data=data)
            assert r.status_code == 409
            assert error_text(r.text) == "A simulation is already running; run this one when it has finished."
            assert 'id="sim-table"' not in r.text
            hx = await c.post("/dashboard/simulate", data=data, headers={"HX-Request": "true"})
            assert hx.status_code == 200 and "already running" in error_text(hx.text)
        finally:
            running.release()
        r = await c.post("/dashboard/simulate", data=data)
        assert r.status_code == 200 and list(table_rows(r.text, "sim-table")) == ["priority", "oracle"]
