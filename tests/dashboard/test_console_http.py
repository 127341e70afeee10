"""The console's access rules over HTTP (OPS-3, API-8): every console route needs a signed-in session
when an admin key is set, every state-changing one its CSRF token, and without an admin key only
loopback clients get in. Also the management API with a console session, ``/`` and the offline
``/docs``. In-process (ASGI transport), so the client address can be a foreign one."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from omniroute import dashboard
from omniroute.app import OmniRouteApp, create_app
from omniroute.config import config_from_dict
from omniroute.dashboard import PAGES

ADMIN_KEY = "adm-console-secret"
LOOPBACK = ("127.0.0.1", 50000)
FOREIGN = ("203.0.113.7", 50000)
PARAMS = {"cid": "sim-fast-key", "combo_id": "sim-combo", "request_id": "req_x", "key_id": "k"}


@pytest.fixture
async def make_app(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await make_app(admin_key=None)`` → a started in-process gateway (simulated providers)."""
    apps: list[OmniRouteApp] = []

    async def make(admin_key: str | None = None) -> OmniRouteApp:
        server: dict[str, Any] = {"admin_key": admin_key} if admin_key else {}
        app = create_app(
            config_from_dict(
                {"database_url": f"sqlite:///{tmp_path}/{len(apps)}.db", "server": server}, env={}
            )
        )
        await app.start()
        apps.append(app)
        return app

    yield make
    for app in apps:
        await app.stop()


def client(app: OmniRouteApp, addr: tuple[str, int] = LOOPBACK) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, client=addr), base_url="http://127.0.0.1:20128", timeout=30
    )


def console_routes() -> list[tuple[str, str]]:
    """``(method, path)`` of every console route except sign-in, path parameters filled in."""
    out: list[tuple[str, str]] = []
    for module in PAGES:
        for r in module.router.routes:
            assert isinstance(r, APIRoute)
            if r.path == "/login":
                continue
            path = "/dashboard" + re.sub(r"\{(\w+)(:\w+)?\}", lambda m: PARAMS[m.group(1)], r.path)
            out += [(m, path) for m in sorted(r.methods or ()) if m != "HEAD"]
    return out


async def sign_in(c: httpx.AsyncClient) -> str:
    """Sign in with the admin key; returns the page's CSRF token."""
    page = await c.get("/dashboard/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert token is not None, page.text
    r = await c.post("/dashboard/login", data={"csrf_token": token.group(1), "admin_key": ADMIN_KEY})
    assert r.status_code == 303 and r.headers["location"] == "/dashboard", r.text
    home = await c.get("/dashboard")
    found = re.search(r'"X-CSRF-Token": "([^"]+)"', home.text)
    assert found is not None
    return found.group(1)


async def test_every_console_route_needs_a_signed_in_session(make_app: Callable[..., Any]) -> None:
    """OPS-3/API-8: without a session a page redirects to sign-in (htmx gets 401 + HX-Redirect) and
    an action is refused; the covered routes include every page and action."""
    app = await make_app(ADMIN_KEY)
    routes = console_routes()
    assert {p for _, p in routes} >= {
        "/dashboard",
        "/dashboard/providers",
        "/dashboard/combos",
        "/dashboard/auto",
        "/dashboard/requests",
        "/dashboard/keys",
        "/dashboard/logout",
        "/dashboard/try",
    }
    async with client(app) as c:
        for method, path in routes:
            r = await c.request(method, path, data={"csrf_token": "x"})
            if method == "GET":
                assert r.status_code == 303, (method, path, r.status_code)
                assert r.headers["location"].startswith("/dashboard/login?next=")
                hx = await c.get(path, headers={"HX-Request": "true"})
                assert hx.status_code == 401 and hx.headers["hx-redirect"] == "/dashboard/login"
            else:
                assert r.status_code == 401, (method, path, r.status_code)


async def test_every_console_action_needs_the_csrf_token(make_app: Callable[..., Any]) -> None:
    """OPS-3: a signed-in browser's state-changing request without its CSRF token, or with another
    one, is refused with 403 and changes nothing."""
    app = await make_app(ADMIN_KEY)
    async with client(app) as c:
        token = await sign_in(c)
        posts = [(m, p) for m, p in console_routes() if m == "POST"]
        assert len(posts) >= 12
        for method, path in posts:
            for headers, data in (
                ({}, {}),
                ({"X-CSRF-Token": token + "x"}, {}),
                ({}, {"csrf_token": "nope"}),
            ):
                r = await c.request(method, path, headers=headers, data=data)
                assert r.status_code == 403, (path, r.status_code, r.text)
                assert r.json()["error"]["code"] == "csrf_failed"
        r = await c.post("/dashboard/keys", data={"name": "x"}, headers={"X-CSRF-Token": token})
        assert r.status_code == 200 and "shown only this once" in r.text


async def test_without_an_admin_key_only_loopback_clients_get_in(make_app: Callable[..., Any]) -> None:
    """OPS-3/API-8: no admin key → a foreign client gets 403 on every console route (and sign-in);
    a loopback client gets the pages with an anonymous session whose forms carry a CSRF token."""
    app = await make_app()
    async with client(app, FOREIGN) as c:
        for method, path in [*console_routes(), ("GET", "/dashboard/login"), ("POST", "/dashboard/login")]:
            r = await c.request(method, path)
            assert r.status_code == 403, (method, path)
            assert r.json()["error"]["code"] == "admin_loopback_only"
        assert (await c.get("/api/keys")).status_code == 403
    async with client(app) as c:
        page = await c.get("/dashboard/keys")
        assert page.status_code == 200 and "Sign out" not in page.text
        assert (await c.get("/dashboard/login")).status_code == 303
        assert (await c.post("/dashboard/keys", data={"name": "x"})).status_code == 403
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        r = await c.post("/dashboard/keys", data={"name": "x", "csrf_token": token.group(1)})
        assert r.status_code == 200 and "Key x created" in r.text


async def test_sign_in_cookie_is_http_only_strict_and_sign_out_ends_it(make_app: Callable[..., Any]) -> None:
    """OPS-3: a wrong key is refused; the session cookie is HttpOnly and SameSite=Strict; sign-out
    removes it; a cookie signed for another admin key is not accepted."""
    app = await make_app(ADMIN_KEY)
    async with client(app) as c:
        page = await c.get("/dashboard/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        wrong = await c.post("/dashboard/login", data={"csrf_token": token.group(1), "admin_key": "nope"})
        assert wrong.status_code == 401 and "not the admin key" in wrong.text
        no_csrf = await c.post("/dashboard/login", data={"admin_key": ADMIN_KEY})
        assert no_csrf.status_code == 403
        r = await c.post("/dashboard/login", data={"csrf_token": token.group(1), "admin_key": ADMIN_KEY})
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        home = await c.get("/dashboard")
        assert home.status_code == 200
        found = re.search(r'"X-CSRF-Token": "([^"]+)"', home.text)
        assert found is not None
        csrf = found.group(1)
        out = await c.post("/dashboard/logout", headers={"X-CSRF-Token": csrf})
        assert out.status_code == 303 and "omniroute_console=" in out.headers["set-cookie"]
        assert (await c.get("/dashboard")).status_code == 303
    other = await make_app("another-admin-key")
    async with client(app) as c1, client(other) as c2:
        await sign_in(c1)
        c2.cookies = c1.cookies
        assert (await c2.get("/dashboard")).status_code == 303


async def test_sign_out_revokes_a_copied_session_cookie_on_every_worker(
    make_app: Callable[..., Any], tmp_path: Path
) -> None:
    """A copy of the console cookie taken before sign-out no longer opens the console or the
    management API afterwards, neither on the worker that signed out nor on another one sharing the
    store."""
    app = await make_app(ADMIN_KEY)
    replica = create_app(
        config_from_dict(
            {"database_url": f"sqlite:///{tmp_path}/0.db", "server": {"admin_key": ADMIN_KEY}}, env={}
        )
    )
    await replica.start()
    try:
        async with client(app) as c, client(app) as thief, client(replica) as other:
            csrf = await sign_in(c)
            thief.cookies = httpx.Cookies(c.cookies)
            other.cookies = httpx.Cookies(c.cookies)
            assert (await thief.get("/api/keys")).status_code == 200
            assert (await other.get("/dashboard")).status_code == 200
            out = await c.post("/dashboard/logout", headers={"X-CSRF-Token": csrf})
            assert out.status_code == 303
            for stale in (thief, other):
                assert (await stale.get("/api/keys")).status_code == 401
                page = await stale.get("/dashboard")
                assert page.status_code == 303
                assert page.headers["location"].startswith("/dashboard/login")
                refused = await stale.post("/api/keys", json={"name": "k"}, headers={"X-CSRF-Token": csrf})
                assert refused.status_code == 401
            await sign_in(c)
            assert (await c.get("/api/keys")).status_code == 200
    finally:
        await replica.stop()


async def test_a_form_without_its_csrf_token_gets_an_html_page_naming_field_and_header(
    make_app: Callable[..., Any],
) -> None:
    """A browser form posted without its CSRF token (Accept: text/html) gets a 403 HTML page; a
    script gets the JSON error; both name the csrf_token field and the X-CSRF-Token header."""
    wording = "forms send the csrf_token field, scripts the X-CSRF-Token header"
    browser = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    app = await make_app(ADMIN_KEY)
    async with client(app) as c:
        login = await c.post("/dashboard/login", data={"admin_key": ADMIN_KEY}, headers=browser)
        assert login.status_code == 403 and login.headers["content-type"].startswith("text/html")
        await sign_in(c)
        for path in ("/dashboard/keys", "/dashboard/logout"):
            page = await c.post(path, data={"name": "k1"}, headers=browser)
            assert page.status_code == 403, (path, page.text)
            assert page.headers["content-type"].startswith("text/html")
            assert wording in page.text and 'href="/dashboard"' in page.text
            assert page.headers["content-security-policy"].startswith("default-src 'self'")
            script = await c.post(path, data={"name": "k1"})
            assert script.status_code == 403
            assert (
                script.json()["error"]["code"] == "csrf_failed"
                and wording in script.json()["error"]["message"]
            )
        api = await c.post("/api/keys", json={"name": "k1"}, headers=browser)
        assert api.status_code == 403 and wording in api.json()["error"]["message"]
        assert (await c.get("/api/keys")).json()["data"] == []


async def test_management_api_takes_a_console_session_with_its_csrf_header(
    make_app: Callable[..., Any],
) -> None:
    """API-8/OPS-3: a signed-in browser may call /api with its cookie; unsafe methods also need the
    X-CSRF-Token header; bearer clients are unchanged."""
    app = await make_app(ADMIN_KEY)
    async with client(app) as c:
        assert (await c.get("/api/keys")).status_code == 401
        token = await sign_in(c)
        assert (await c.get("/api/keys")).status_code == 200
        refused = await c.post("/api/keys", json={"name": "k1"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
        assert (
            await c.post("/api/keys", json={"name": "k1"}, headers={"X-CSRF-Token": "x"})
        ).status_code == 403
        assert (
            await c.post("/api/keys", json={"name": "k1"}, headers={"X-CSRF-Token": token})
        ).status_code == 201
    async with client(app) as bearer:
        r = await bearer.post(
            "/api/keys", json={"name": "k2"}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        )
        assert r.status_code == 201


async def test_root_leads_to_the_console_and_docs_work_offline(make_app: Callable[..., Any]) -> None:
    """A browser opening / lands on the console; an API client gets a small index; /docs loads
    Swagger UI from the gateway itself (no CDN), and those files are served."""
    app = await make_app()
    async with client(app) as c:
        browser = await c.get("/", headers={"Accept": "text/html,application/xhtml+xml"})
        assert browser.status_code == 307 and browser.headers["location"] == "/dashboard"
        index = (await c.get("/")).json()
        assert index["console"].endswith("/dashboard") and index["openai_base_url"].endswith("/v1")
        docs = await c.get("/docs")
        assert docs.status_code == 200 and "cdn" not in docs.text.lower()
        assets = re.findall(r"""(?:src|href)=["']?(/dashboard/static/[^"' >]+)""", docs.text)
        assert len(assets) >= 2
        for asset in assets:
            assert (await c.get(asset)).status_code == 200, asset
        assert (await c.get("/openapi.json")).json()["paths"]["/api/usage/traffic"]


async def test_console_pages_are_not_framed_and_run_only_their_own_scripts(
    make_app: Callable[..., Any],
) -> None:
    """Console pages send a Content-Security-Policy (own scripts only, no framing) and no-store."""
    app = await make_app()
    async with client(app) as c:
        r = await c.get("/dashboard")
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert r.headers["cache-control"] == "no-store"
        assert "<script>" not in r.text  # no inline script (the CSP would block it)


def test_every_vendored_file_is_recorded_with_its_licence() -> None:
    """The console's third-party files are listed in THIRD_PARTY.md (package, version, licence) and
    each package folder keeps its licence text."""
    vendor = Path(dashboard.__file__).parent / "static" / "vendor"
    record = (vendor / "THIRD_PARTY.md").read_text()
    for folder in (p for p in vendor.iterdir() if p.is_dir()):
        assert (folder / "LICENSE").is_file(), folder.name
        assert f"`{folder.name}/`" in record
        for f in folder.iterdir():
            assert f.name in record or f.name.endswith(".LICENSE.txt"), f"{folder.name}/{f.name}"
    assert "| `htmx.org` | 2.0.11 | 0BSD |" in record


async def test_console_refuses_rebound_hosts_and_cross_site_changes(make_app: Callable[..., Any]) -> None:
    """OPS-3 with the management API's DNS-rebinding rules: without an admin key a page asked for
    under a foreign Host name is refused (it would hand out a CSRF token), and a change posted from
    another site's origin is refused even with the right token."""
    app = await make_app()
    async with client(app) as c:
        for path in ("/dashboard", "/dashboard/keys", "/dashboard/login"):
            r = await c.get(path, headers={"Host": "evil.example"})
            assert r.status_code == 403 and r.json()["error"]["code"] == "host_not_allowed", path
        page = await c.get("/dashboard/keys")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        r = await c.post(
            "/dashboard/keys",
            data={"name": "x", "csrf_token": token.group(1)},
            headers={"Origin": "https://evil.example"},
        )
        assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"


async def test_a_csrf_token_that_is_not_ascii_is_refused_not_an_error(make_app: Callable[..., Any]) -> None:
    """A CSRF header with non-ASCII bytes is a plain 403 (constant-time comparison of bytes), on the
    console and on the management API."""
    app = await make_app(ADMIN_KEY)
    async with client(app) as c:
        await sign_in(c)
        odd = {"X-CSRF-Token": "tökén".encode("latin-1")}
        assert (await c.post("/dashboard/keys", data={"name": "x"}, headers=odd)).status_code == 403
        assert (await c.post("/api/keys", json={"name": "x"}, headers=odd)).status_code == 403


async def test_console_creates_a_key_with_a_daily_budget_and_shows_its_period(
    make_app: Callable[..., Any],
) -> None:
    """API-8 in the console: the create form takes a budget period; the list shows it next to the cap,
    and an unknown period is refused naming the field."""
    app = await make_app()
    async with client(app) as c:
        page = await c.get("/dashboard/keys")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None and 'name="budget_period"' in page.text
        form = {"name": "team", "budget_usd": "5", "budget_period": "daily", "csrf_token": token.group(1)}
        r = await c.post("/dashboard/keys", data=form)
        assert r.status_code == 200 and "Key team created" in r.text
        assert re.search(r"\$5[.0-9]*\s*<small class=\"muted\">daily</small>", r.text)
        keys = (await c.get("/api/keys")).json()["data"]
        assert [(k["budget_usd"], k["budget_period"]) for k in keys] == [(5.0, "daily")]
        bad = await c.post("/dashboard/keys", data={**form, "name": "other", "budget_period": "hourly"})
        assert bad.status_code == 422 and 'id="k-period" name="budget_period" aria-invalid="true"' in bad.text
