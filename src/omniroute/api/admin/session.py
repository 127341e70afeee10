"""Console sessions: the signed cookie a browser holds after signing in with the admin key, and the
CSRF token bound to it (OPS-3, API-8).

The cookie (``omniroute_console``, HTTP-only, ``SameSite=Strict``, ``Secure`` on https) carries
``{"sid": random id, "admin": signed in with the admin key}`` signed and timestamped by
``itsdangerous``; it is valid for :data:`SESSION_MAX_AGE_S` unless signed out first (sign-out is
recorded in the store, so it holds on every worker and replica). The signing key is derived from the
store's secret key (shared by every worker and replica, README "Secrets") and the admin key, so
changing the admin key ends every session. The CSRF token is the session id's ``itsdangerous``
signature under another salt: a page embeds it, and every state-changing console form and every
cookie-authenticated unsafe call to the management API must send it back (form field
:data:`CSRF_FIELD` or header :data:`CSRF_HEADER`).
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Final

from itsdangerous import BadSignature, Signer, URLSafeTimedSerializer
from starlette.requests import HTTPConnection
from starlette.responses import Response

from omniroute.errors import GatewayError
from omniroute.gateway import Gateway

__all__ = [
    "COOKIE_NAME",
    "CSRF_FIELD",
    "CSRF_HEADER",
    "SAFE_METHODS",
    "SESSION_MAX_AGE_S",
    "ConsoleSession",
    "CsrfFailed",
    "clear_cookie",
    "csrf_error",
    "end_session",
    "new_session",
    "read_session",
    "set_cookie",
]

COOKIE_NAME: Final = "omniroute_console"
CSRF_HEADER: Final = "X-CSRF-Token"
CSRF_FIELD: Final = "csrf_token"
SESSION_MAX_AGE_S: Final = 12 * 3600
"""How long a signed-in console session lasts (s) before the operator signs in again."""
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_KEY_PURPOSE: Final = b"omniroute console sessions v1"


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A verified session: ``sid`` its random id, ``admin`` whether it signed in with the admin key,
    ``csrf`` the token its forms carry."""

    sid: str
    admin: bool
    csrf: str

    def csrf_ok(self, token: str | None) -> bool:
        """Whether ``token`` is this session's CSRF token (constant-time)."""
        return bool(token) and hmac.compare_digest(self.csrf.encode(), str(token).encode())


def _secret(gw: Gateway) -> bytes:
    assert gw.store is not None
    return gw.store.derive_key(_KEY_PURPOSE) + (gw.config.server.admin_key or "").encode()


def _serializer(secret: bytes) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt="omniroute-console-session")


def _csrf_for(secret: bytes, sid: str) -> str:
    return Signer(secret, salt="omniroute-console-csrf").get_signature(sid).decode("ascii")


def new_session(gw: Gateway, *, admin: bool) -> tuple[ConsoleSession, str]:
    """A fresh session and its cookie value (a new id on every sign-in: no session fixation)."""
    secret = _secret(gw)
    sid = secrets.token_urlsafe(18)
    value = _serializer(secret).dumps({"sid": sid, "admin": admin})
    return ConsoleSession(sid, admin, _csrf_for(secret, sid)), value


async def read_session(conn: HTTPConnection, gw: Gateway) -> ConsoleSession | None:
    """The request's session when its cookie verifies, has not expired and was not signed out (the
    store's record, shared by every worker and replica), else ``None``."""
    raw = conn.cookies.get(COOKIE_NAME)
    if not raw or gw.store is None:
        return None
    secret = _secret(gw)
    try:
        data: Any = _serializer(secret).loads(raw, max_age=SESSION_MAX_AGE_S)
    except BadSignature:  # includes SignatureExpired
        return None
    if not isinstance(data, dict) or not isinstance(data.get("sid"), str):
        return None
    sid = data["sid"]
    if await gw.store.console_session_revoked(sid):
        return None
    return ConsoleSession(sid, data.get("admin") is True, _csrf_for(secret, sid))


async def end_session(gw: Gateway, sess: ConsoleSession) -> None:
    """Sign ``sess`` out on the server: its cookie is refused from now on, by every worker and
    replica, even if a copy of it is replayed before it expires."""
    assert gw.store is not None
    await gw.store.revoke_console_session(sess.sid, gw.clock.time() + SESSION_MAX_AGE_S)


def set_cookie(response: Response, conn: HTTPConnection, value: str) -> None:
    """Attach the session cookie: HTTP-only, ``SameSite=Strict``, path ``/``, ``Secure`` on https."""
    response.set_cookie(
        COOKIE_NAME,
        value,
        max_age=SESSION_MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=conn.url.scheme == "https",
    )


def clear_cookie(response: Response) -> None:
    """Remove the session cookie (sign-out)."""
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="strict")


class CsrfFailed(GatewayError):
    """403 ``csrf_failed``: a state-changing request without this session's CSRF token (the console
    shows browser forms an HTML page for it, :func:`omniroute.dashboard.install`)."""

    status = 403
    code = "csrf_failed"


def csrf_error() -> CsrfFailed:
    """The 403 for a state-changing request without this session's CSRF token."""
    return CsrfFailed(
        f"Missing or wrong CSRF token: forms send the {CSRF_FIELD} field, scripts the {CSRF_HEADER} header."
    )
