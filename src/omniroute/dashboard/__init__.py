"""The operator console at ``/dashboard`` and the offline ``/docs`` page (OPS-3, BEYOND-2).

Server-rendered Jinja2 pages; htmx swaps fragments (live tables, forms) and uPlot draws the charts,
both served from ``static/vendor`` (see its ``THIRD_PARTY.md``), so the console needs no build step
and no network. Every page shows what the management API returns: the routes call the ``/api``
endpoint functions with the same gateway, never the store; the Simulate page (:mod:`.simulate`)
runs ``omniroute simulate``'s pipeline instead. Access and CSRF: :mod:`.web`.

:func:`install` adds the console, its static files, ``/docs`` (Swagger UI from the same folder) and
``/`` (browsers go to the console; other clients get a small JSON index) to the management app.
"""

from __future__ import annotations

import asyncio
import inspect
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from omniroute.api.admin.core import Admin
from omniroute.api.admin.session import CsrfFailed
from omniroute.dashboard import auth, auto, combos, keys, overview, providers, requests, simulate
from omniroute.dashboard.web import PACKAGE_DIR, PREFIX, STATIC_URL, SignInRequired, render_error
from omniroute.errors import GatewayError

__all__ = ["PAGES", "install"]

PAGES = (auth, overview, providers, combos, auto, requests, keys, simulate)
"""The console's route modules, each with a ``router`` mounted under ``/dashboard``."""


def install(app: FastAPI) -> None:
    """Add the console routes, static files, ``/docs`` and ``/`` to ``app`` (the management app,
    whose ``state.gateway`` the pages use)."""
    app.state.console_templates = None  # made on first use (web.Page.render)
    app.state.simulation_lock = asyncio.Lock()  # one Simulate run at a time (dashboard.simulate)
    app.mount(STATIC_URL, StaticFiles(directory=PACKAGE_DIR / "static"), name="console-static")
    for module in PAGES:
        app.include_router(module.router, prefix=PREFIX, include_in_schema=False)

    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, exc: SignInRequired) -> Response:
        target = f"{PREFIX}/login"
        if request.method == "GET" and request.headers.get("hx-request") != "true":
            return RedirectResponse(f"{target}?{urlencode({'next': request.url.path})}", status_code=303)
        return JSONResponse(
            {
                "error": {
                    "message": "Sign in to the console first.",
                    "type": "authentication_error",
                    "code": "sign_in_required",
                    "param": None,
                }
            },
            status_code=401,
            headers={"HX-Redirect": target},
        )

    @app.exception_handler(CsrfFailed)
    async def _csrf_failed(request: Request, exc: CsrfFailed) -> Response:
        """A browser's console form (``Accept: text/html``, not htmx) gets an HTML page saying what
        went wrong; scripts, htmx and the management API get the JSON error."""
        browser_form = (
            request.url.path.startswith(PREFIX)
            and "text/html" in request.headers.get("accept", "")
            and request.headers.get("hx-request") != "true"
        )
        if browser_form:
            return render_error(request, exc.status, "The form was refused", exc.message)
        response = app.exception_handlers[GatewayError](request, exc)
        return await response if inspect.isawaitable(response) else response

    @app.get("/docs", include_in_schema=False)
    async def _docs(gw: Admin) -> HTMLResponse:
        """Swagger UI for ``/openapi.json`` from the bundled files (works offline); behind the
        management API's authentication, like the document it shows."""
        vendor = f"{STATIC_URL}/vendor/swagger-ui"
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="OmniRoute management API",
            swagger_js_url=f"{vendor}/swagger-ui-bundle.js",
            swagger_css_url=f"{vendor}/swagger-ui.css",
            swagger_favicon_url=f"{vendor}/favicon-32x32.png",
        )

    @app.get("/", include_in_schema=False)
    async def _index(request: Request) -> Response:
        """Browsers go to the console; API clients get where things are."""
        if "text/html" in request.headers.get("accept", ""):
            return RedirectResponse(PREFIX, status_code=307)
        return JSONResponse(
            {
                "name": "OmniRoute",
                "openai_base_url": f"{request.base_url}v1",
                "console": f"{request.base_url}dashboard",
                "docs": f"{request.base_url}docs",
                "openapi": f"{request.base_url}openapi.json",
                "models": f"{request.base_url}v1/models",
                "health": f"{request.base_url}health",
            }
        )
