"""What every console page shares: access control, CSRF, template rendering and responses that work
with and without htmx (OPS-3).

Access is the management API's (API-8), after its Host/Origin checks against DNS rebinding: with
``server.admin_key`` set, a session signed in with that key (:mod:`omniroute.api.admin.session`);
without it, loopback clients only, each given an anonymous session so its forms still carry a CSRF
token. Every state-changing request (any method but GET, HEAD, OPTIONS) must carry the session's
token as the ``csrf_token`` form field or the ``X-CSRF-Token`` header, else 403. A page request
without a session is sent to the sign-in page; an htmx request gets 401 with ``HX-Redirect`` so the
browser goes there too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from fastapi import Request
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from omniroute.api.admin import session as sessions
from omniroute.api.admin.core import check_origin, is_loopback, loopback_only
from omniroute.core.fields import field_errors
from omniroute.errors import GatewayError
from omniroute.gateway import Gateway

if TYPE_CHECKING:
    from fastapi.templating import Jinja2Templates

__all__ = [
    "PACKAGE_DIR",
    "Page",
    "SignInRequired",
    "ago",
    "console_page",
    "form_errors",
    "make_templates",
    "redirect",
    "render_error",
]

PACKAGE_DIR: Final = Path(__file__).parent
PREFIX: Final = "/dashboard"
STATIC_URL: Final = f"{PREFIX}/static"
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
"""Console pages run only the console's own scripts (htmx attributes, no inline code) and cannot be
framed; uPlot sets element styles from script, hence ``'unsafe-inline'`` for styles only."""


class SignInRequired(Exception):
    """No signed-in session; handled by sending the browser to the sign-in page."""


@dataclass
class Page:
    """One console request: the gateway, the verified session, the parsed form of a POST and the
    cookie to set when this request started an anonymous (loopback) session."""

    request: Request
    gw: Gateway
    session: sessions.ConsoleSession
    form: FormData | None = None
    new_cookie: str | None = None

    @property
    def htmx(self) -> bool:
        """Whether htmx sent this request (it then wants a fragment, not a whole page)."""
        return self.request.headers.get("hx-request") == "true"

    def field(self, name: str) -> str:
        """A form field as stripped text (``""`` when absent)."""
        value = self.form.get(name) if self.form is not None else None
        return value.strip() if isinstance(value, str) else ""

    def render(self, template: str, status: int = 200, **context: Any) -> Response:
        """Render ``template`` with the page context (session, CSRF token, admin mode, nav)."""
        response = _templates(self.request).TemplateResponse(
            self.request,
            template,
            {
                "csrf_token": self.session.csrf,
                "admin_mode": bool(self.gw.config.server.admin_key),
                "static": STATIC_URL,
                "path": self.request.url.path,
                "now": self.gw.clock.time(),
                **context,
            },
            status_code=status,
        )
        _page_headers(response)
        if self.new_cookie is not None:
            sessions.set_cookie(response, self.request, self.new_cookie)
        return response


def _templates(request: Request) -> Jinja2Templates:
    state = request.app.state
    if state.console_templates is None:  # built on the first page served (PERF-5: ~2 MB at rest)
        state.console_templates = make_templates()
    templates: Jinja2Templates = state.console_templates
    return templates


def _page_headers(response: Response) -> None:
    response.headers["cache-control"] = "no-store"
    response.headers["content-security-policy"] = CONTENT_SECURITY_POLICY
    response.headers["x-content-type-options"] = "nosniff"
    response.headers["referrer-policy"] = "same-origin"


def render_error(request: Request, status: int, title: str, message: str) -> Response:
    """A standalone HTML error page (status ``status``) for a browser whose console request was
    refused before any page could be built (no session needed), with a way back to the console."""
    back = request.headers.get("referer") or ""
    origin = f"{request.url.scheme}://{request.url.netloc}{PREFIX}"
    response = _templates(request).TemplateResponse(
        request,
        "error.html",
        {
            "static": STATIC_URL,
            "title": title,
            "message": message,
            "back": back if back.startswith(origin) else PREFIX,
        },
        status_code=status,
    )
    _page_headers(response)
    return response


async def console_page(request: Request) -> Page:
    """Dependency of every console route: access control and, for unsafe methods, the CSRF check.

    Raises a 403 from the management API's Host/Origin checks (DNS rebinding, cross-site changes),
    :class:`SignInRequired` (no signed-in session while an admin key is set), a 403
    ``admin_loopback_only`` (non-loopback client without an admin key) or a 403 ``csrf_failed``."""
    gw: Gateway = request.app.state.gateway
    check_origin(request, gw)
    sess = await sessions.read_session(request, gw)
    new_cookie = None
    if gw.config.server.admin_key:
        if sess is None or not sess.admin:
            raise SignInRequired()
    elif not is_loopback(request):
        raise loopback_only()
    elif sess is None:
        sess, new_cookie = sessions.new_session(gw, admin=False)
    page = Page(request, gw, sess, new_cookie=new_cookie)
    if request.method not in sessions.SAFE_METHODS:
        page.form = await request.form()
        token = request.headers.get(sessions.CSRF_HEADER) or page.field(sessions.CSRF_FIELD)
        if new_cookie is not None or not sess.csrf_ok(token):
            raise sessions.csrf_error()
    return page


def redirect(url: str, page: Page | None = None) -> Response:
    """303 to ``url``; for htmx a 204 with ``HX-Redirect`` (htmx does not follow redirects itself)."""
    if page is not None and page.htmx:
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def form_errors(exc: GatewayError | ValidationError) -> tuple[str, str | None]:
    """``(message, field)`` for a form, worded as the management API words the same error."""
    if isinstance(exc, GatewayError):
        return exc.message, exc.param
    field, message = field_errors(exc.errors()[:1])[0]
    return f"{field}: {message}", field


def ago(ts: Any, now: float) -> str:
    """``"12 s ago"`` / ``"in 5 min"`` for an epoch-seconds value seen at ``now`` (``"—"`` when
    missing)."""
    if not isinstance(ts, int | float) or not ts:
        return "—"
    delta = now - float(ts)
    if delta < 0:
        return f"in {_span(-delta)}"
    return f"{_span(delta)} ago"


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 172_800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86_400:.0f} d"


def _clock(ts: Any) -> str:
    """Local-independent ``YYYY-MM-DD HH:MM:SS`` (UTC) for an epoch-seconds value."""
    if not isinstance(ts, int | float) or not ts or not math.isfinite(ts):
        return "—"
    return datetime.fromtimestamp(float(ts), UTC).strftime("%Y-%m-%d %H:%M:%S")


def _ms(v: Any) -> str:
    if not isinstance(v, int | float):
        return "—"
    return f"{v / 1000:.2f} s" if v >= 10_000 else f"{v:.0f} ms"


def _usd(v: Any) -> str:
    """USD with the digits a small amount needs: ``$0``, ``$0.000063``, ``$0.0421``, ``$12.50``."""
    if not isinstance(v, int | float):
        return "—"
    if v == 0:
        return "$0"
    if v < 0.01:
        return f"${v:.6f}"
    return f"${v:.4f}" if v < 1 else f"${v:,.2f}"


def make_templates() -> Jinja2Templates:
    """The console's Jinja2 environment (autoescaped HTML) with its display filters. Jinja2 is
    imported here, so a gateway nobody opens the console of never loads it (PERF-5)."""
    from fastapi.templating import Jinja2Templates

    templates = Jinja2Templates(directory=PACKAGE_DIR / "templates")
    templates.env.filters.update(ago=ago, clock=_clock, ms=_ms, usd=_usd)
    return templates
