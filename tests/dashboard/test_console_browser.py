"""The operator console in a real browser (OPS-3, BEYOND-2): Debian's Chromium driven by Playwright
(its own browser downloads are never used), against a real gateway in front of the fake providers.

An operator signs in with the keyboard, creates a combo through the form (meeting the API's
validation message and the shadowing warning on the way), sends a prompt with "try it", opens its
decision, resets an open breaker, tests a connection, excludes an auto candidate for a key,
creates and revokes a key, and runs a small simulation. Every page is saved as a screenshot, at
1280×800 and on a narrow window, under the folder printed at the start (``OMNIROUTE_TEST_ARTIFACTS``,
default ``test-artifacts/``).
The tests skip only when no Chromium executable can be found.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from omniroute.testing.gateway import GatewayThread

ADMIN_KEY = "adm-browser-secret"
CHROMIUM = (
    os.environ.get("OMNIROUTE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
)
WIDE = {"width": 1280, "height": 800}
NARROW = {"width": 400, "height": 850}

WIDE_ELEMENTS = """() => [...document.querySelectorAll("body *")]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
  .slice(0, 5).map(e => `${e.tagName}.${e.className}: ${e.textContent.trim().slice(0, 40)}`)"""
"""Elements that reach past the window's right edge (for the narrow-window failure message)."""

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium executable (install Debian's: apt-get install chromium chromium-driver)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless, launched by Playwright."""
    assert CHROMIUM is not None
    expect.set_options(timeout=15_000)  # a loaded 2-core CI machine renders slowly; nothing here is timed
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(request: pytest.FixtureRequest) -> Path:
    """The screenshot folder, printed once so CI logs say where the pictures are."""
    root = Path(os.environ.get("OMNIROUTE_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts"))
    folder = (root / "console").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"console screenshots: {folder}")
    return folder


@pytest.fixture
def console(make_gateway: Callable[..., GatewayThread]) -> GatewayThread:
    """A gateway with an admin key and breakers that open after one counted failure."""
    return make_gateway(
        {
            "server": {"admin_key": ADMIN_KEY},
            "resilience": {"circuit_breaker": {"failure_threshold": 1, "reset_timeout_s": 300}},
        }
    )


def new_page(browser: Browser, viewport: dict[str, int] = WIDE) -> Page:
    page = browser.new_page(viewport=viewport)  # type: ignore[arg-type]
    page.set_default_timeout(15_000)
    page.on("dialog", lambda d: d.accept())  # hx-confirm questions
    return page


def sign_in(page: Page, gw: GatewayThread, shots: Path | None = None) -> None:
    """Sign in with the keyboard only: the key field has focus, Enter submits."""
    page.goto(f"{gw.url}/dashboard")
    expect(page).to_have_url(re.compile(r"/dashboard/login"))
    expect(page.locator("#admin_key")).to_be_focused()
    page.keyboard.type("not-the-key")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_have_text("That is not the admin key.")
    if shots is not None:
        page.screenshot(path=shots / "login.png")
    page.locator("#admin_key").fill(ADMIN_KEY)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()


def traffic(gw: GatewayThread, *models: str, key: str | None = None) -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return [
        httpx.post(
            f"{gw.base_url}/chat/completions",
            json={"model": m, "messages": [{"role": "user", "content": "hello"}]},
            headers=headers,
            timeout=10,
        )
        for m in models
    ]


def test_operator_creates_a_combo_tries_it_and_reads_its_decision(
    browser: Browser, console: GatewayThread, shots: Path
) -> None:
    """OPS-3/COMBO-1/BEYOND-2: sign in; a combo created through the form meets the API's validation
    message, then saves; "try it" answers through it; its decision lists the attempt; a combo named
    like a model gets the shadowing warning; the overview counts the traffic."""
    traffic(console, "local-o/model-o", "local-c/model-c", "local-g/model-g+fail-429")
    page = new_page(browser)
    sign_in(page, console, shots)
    expect(page.locator(".kpi").first).to_contain_text("3")
    page.screenshot(path=shots / "overview.png", full_page=True)

    page.get_by_role("link", name="Combos", exact=True).click()
    page.get_by_role("link", name="New combo").click()
    page.get_by_label("Name", exact=True).fill("console-combo")
    page.get_by_label("Model or combo of target 1").fill("local-o/model-o")
    page.get_by_label("Weight of target 1").fill("500")
    page.get_by_role("button", name="Add target").click()
    expect(page.get_by_label("Model or combo of target 2")).to_be_focused()
    page.keyboard.type("local-c/model-c")
    page.get_by_role("button", name="Create combo").click()
    expect(page.get_by_role("alert")).to_contain_text("weight")
    expect(page.get_by_label("Weight of target 1")).to_have_value("500")
    page.get_by_label("Weight of target 1").fill("30")
    page.get_by_label("Strategy").select_option("weighted")
    expect(page.locator("#strategy-options")).to_contain_text("stickyWeightedLimit")
    page.get_by_role("button", name="Create combo").click()
    expect(page.get_by_role("status").filter(has_text="Saved console-combo")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/dashboard/combos/[^/]+/edit$"))

    page.get_by_label("Prompt", exact=True).fill("echo: routed through the console")
    page.get_by_role("button", name="Send").click()
    result = page.locator("#try-result")
    expect(result.locator("blockquote")).to_have_text("routed through the console")
    expect(result).to_contain_text("weighted")
    page.screenshot(path=shots / "combo-try.png", full_page=True)
    result.get_by_role("link", name=re.compile("Open decision")).click()
    expect(page.get_by_role("heading", name=re.compile("Attempts \\(1\\)"))).to_be_visible()
    expect(page.locator("ol.attempts")).to_contain_text("via o1")
    expect(page.locator("dl.facts").first).to_contain_text("console-combo")
    page.screenshot(path=shots / "decision.png", full_page=True)

    page.goto(f"{console.url}/dashboard/combos/new")
    page.get_by_label("Name", exact=True).fill("model-c")
    page.get_by_label("Model or combo of target 1").fill("local-o/model-o")
    page.get_by_role("button", name="Create combo").click()
    expect(page.locator(".warning")).to_contain_text("COMBO_NAME_SHADOWS_MODEL")
    page.get_by_role("link", name="All combos").click()
    expect(page.locator("table")).to_contain_text("console-combo")
    page.screenshot(path=shots / "combos.png", full_page=True)

    page.get_by_role("link", name="Requests", exact=True).click()
    rows = page.locator("#requests-table tbody tr")
    expect(rows.first).to_contain_text("console-combo")
    page.get_by_label("Status").select_option("error")
    expect(page.locator("#requests-table")).to_have_attribute("hx-get", re.compile("status=error"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("429")
    page.screenshot(path=shots / "requests.png", full_page=True)


def test_operator_sees_an_open_breaker_resets_it_and_tests_a_connection(
    browser: Browser, console: GatewayThread, shots: Path
) -> None:
    """RESIL-1/OPS-3: a provider whose breaker opened shows as open with its error and next probe;
    its Reset button closes it live; Test sends one request through a connection."""
    assert traffic(console, "local-o/model-o+fail-500")[0].status_code >= 500
    page = new_page(browser)
    sign_in(page, console)
    page.get_by_role("link", name="Providers", exact=True).click()
    breakers = page.locator("#providers-live table").first
    expect(breakers).to_contain_text("local-o")
    expect(breakers).to_contain_text("open")
    expect(page.locator("#providers-live")).to_contain_text("provider circuit open")
    page.screenshot(path=shots / "providers.png", full_page=True)
    page.get_by_role("button", name="Reset breaker of local-o").click()
    expect(page.get_by_role("status").filter(has_text="Reset local-o")).to_be_visible()
    expect(page.locator("#providers-live")).not_to_contain_text("provider circuit open")

    page.get_by_role("button", name="Test connection c1").click()
    expect(page.locator("#test-result")).to_contain_text("Test of c1: passed")
    expect(page.locator("#test-result")).to_contain_text("local-c/model-c")


def test_operator_excludes_an_auto_candidate_for_a_key_and_manages_keys(
    browser: Browser, make_gateway: Callable[..., GatewayThread], shots: Path
) -> None:
    """AUTO-2/AUTO-3/API-8/OPS-3: the auto page shows each candidate's factors and weights and can
    exclude one for a key; a key created on the Keys page is shown once, works, and stops working
    the moment it is revoked."""
    gw = make_gateway({"server": {"admin_key": ADMIN_KEY, "require_api_key": True}})
    page = new_page(browser)
    sign_in(page, gw)

    page.get_by_role("link", name="Keys", exact=True).click()
    page.get_by_label("Name", exact=True).fill("ci-key")
    page.get_by_label("Budget (USD)").fill("5")
    page.get_by_role("button", name="Create key").click()
    secret = page.get_by_label("The new key").input_value()
    assert secret and secret not in page.locator("table").inner_text()
    assert traffic(gw, "local-o/model-o", key=secret)[0].status_code == 200
    page.screenshot(path=shots / "keys.png", full_page=True)
    page.reload()
    expect(page.get_by_label("The new key")).to_have_count(0)  # shown once only

    page.get_by_role("link", name="Auto routing", exact=True).click()
    candidates = page.locator("#auto-live table.candidates > tbody > tr")
    expect(candidates).to_have_count(3)
    page.get_by_label("Exclusions of key").select_option(label="ci-key")
    expect(page.locator("#auto-live")).to_have_attribute("hx-get", re.compile(r"key=\w+"))
    page.get_by_role("button", name="Exclude local-g/model-g@g1").click()
    expect(page.get_by_role("status")).to_contain_text("local-g/model-g@g1 excluded for key")
    expect(page.get_by_role("button", name="Re-include local-g/model-g@g1")).to_be_visible()
    candidates.first.locator("summary").click()
    expect(candidates.first.locator("table.factors")).to_contain_text("costInv")
    page.screenshot(path=shots / "auto.png", full_page=True)

    page.get_by_role("link", name="Keys", exact=True).click()
    page.get_by_role("button", name="Revoke key ci-key").click()
    expect(page.get_by_role("status")).to_contain_text("Revoked")
    expect(page.locator("table")).to_contain_text("revoked")
    assert traffic(gw, "local-o/model-o", key=secret)[0].status_code == 401


def test_operator_runs_a_small_simulation_and_reads_the_comparison(
    browser: Browser, console: GatewayThread, shots: Path
) -> None:
    """The Simulate page: a bad seed gets its message and keeps the form; then a small run of a
    shipped scenario with two strategies shows one row per strategy and the oracle, and the plots."""
    page = new_page(browser)
    sign_in(page, console)
    page.get_by_role("link", name="Simulate", exact=True).click()
    expect(page.get_by_role("heading", name="Simulate")).to_be_visible()
    page.get_by_label("Scenario", exact=True).select_option("rate-limit-storm")
    for name in ("weighted", "auto", "auto/cheap"):
        page.get_by_label(name, exact=True).uncheck()
    page.get_by_label("priority", exact=True).check()
    page.get_by_label(re.compile("^Other variants")).fill("cost-optimized")
    page.get_by_label(re.compile("^Requests")).fill("30")
    page.get_by_label("Seed", exact=True).fill("seven")
    page.get_by_role("button", name="Run simulation").click()
    expect(page.get_by_role("alert")).to_have_text("seed: 'seven' is not a whole number")
    expect(page.get_by_label(re.compile("^Other variants"))).to_have_value("cost-optimized")
    page.get_by_label("Seed", exact=True).fill("7")
    page.get_by_role("button", name="Run simulation").click()
    table = page.locator("#sim-table")
    expect(table.locator("tbody th")).to_have_text(["priority", "cost-optimized", "oracle"])
    expect(
        page.get_by_role("heading", name=re.compile("rate-limit-storm: 30 requests, seed 7"))
    ).to_be_visible()
    expect(page.locator("#sim-ratios tbody tr")).to_have_count(2)
    expect(page.locator(".sim-plots img")).to_have_count(4)
    page.screenshot(path=shots / "simulate.png", full_page=True)


def test_console_fits_a_narrow_window(browser: Browser, console: GatewayThread, shots: Path) -> None:
    """OPS-3: on a phone-sized window the pages keep to the window's width (wide tables scroll in
    their own box) and the navigation stays reachable."""
    traffic(console, "local-o/model-o", "local-c/model-c")
    page = new_page(browser, NARROW)
    sign_in(page, console)
    for name, path in [
        ("overview", ""),
        ("providers", "/providers"),
        ("requests", "/requests"),
        ("auto", "/auto"),
        ("combos", "/combos"),
        ("keys", "/keys"),
        ("simulate", "/simulate"),
    ]:
        page.goto(f"{console.url}/dashboard{path}")
        expect(page.get_by_role("navigation", name="Console")).to_be_visible()
        overflow: Any = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} is {overflow}px wider than the window: {page.evaluate(WIDE_ELEMENTS)}"
        page.screenshot(path=shots / f"narrow-{name}.png", full_page=True)
