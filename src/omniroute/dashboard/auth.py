"""Console sign-in and sign-out with the admin key (OPS-3, API-8).

``GET /dashboard/login`` shows the form (with no admin key configured there is nothing to sign in to:
loopback clients go straight to the console, others get 403). ``POST /dashboard/login`` checks the
key in constant time and starts a new signed-in session; the form carries the CSRF token of the
anonymous session the sign-in page started. ``POST /dashboard/logout`` ends the session.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from omniroute.api.admin import session as sessions
from omniroute.api.admin.core import check_origin, is_loopback, loopback_only
from omniroute.dashboard.web import PREFIX, Page, console_page, redirect
from omniroute.gateway import Gateway

router = APIRouter()


def _next(target: str | None) -> str:
    """Where to go after signing in: a console path only (never another site)."""
    if target and target.startswith(PREFIX) and not target.startswith("//"):
        return target
    return PREFIX


async def _anonymous(request: Request) -> Page:
    """The sign-in page's own session: read, or started (no CSRF check: nothing is changed yet)."""
    gw: Gateway = request.app.state.gateway
    check_origin(request, gw)
    if not gw.config.server.admin_key and not is_loopback(request):
        raise loopback_only()
    sess = await sessions.read_session(request, gw)
    cookie = None
    if sess is None:
        sess, cookie = sessions.new_session(gw, admin=False)
    return Page(request, gw, sess, new_cookie=cookie)


@router.get("/login")
async def login_form(page: Annotated[Page, Depends(_anonymous)], next: str | None = None) -> Response:
    """The sign-in form (admin key); straight to the console when no key is needed or already in."""
    if not page.gw.config.server.admin_key or page.session.admin:
        return redirect(_next(next))
    return page.render("login.html", next=_next(next), error=None)


@router.post("/login")
async def login(page: Annotated[Page, Depends(_anonymous)]) -> Response:
    """Check the admin key; on success a new signed-in session (new id) and on to ``next``."""
    page.form = await page.request.form()
    admin_key = page.gw.config.server.admin_key
    if not admin_key:
        return redirect(PREFIX)
    if page.new_cookie is not None or not page.session.csrf_ok(page.field(sessions.CSRF_FIELD)):
        raise sessions.csrf_error()
    if not hmac.compare_digest(page.field("admin_key").encode(), admin_key.encode()):
        return page.render(
            "login.html", status=401, next=_next(page.field("next")), error="That is not the admin key."
        )
    _, cookie = sessions.new_session(page.gw, admin=True)
    response = redirect(_next(page.field("next")))
    sessions.set_cookie(response, page.request, cookie)
    return response


@router.post("/logout")
async def logout(page: Annotated[Page, Depends(console_page)]) -> Response:
    """End the session on the server (a copy of the cookie no longer works) and in the browser (the
    cookie is removed), then show the sign-in page."""
    await sessions.end_session(page.gw, page.session)
    response = redirect(f"{PREFIX}/login")
    sessions.clear_cookie(response)
    return response
