"""Host and Origin checks of the management surface, against DNS rebinding and cross-site requests.

A web page on ``evil.example`` can make its own name resolve to 127.0.0.1 and then talk to a
gateway on loopback from the visitor's browser: the request arrives from a loopback address, so the
loopback-only rule of a gateway without an admin key lets it in. What the browser cannot forge is
the ``Host`` header (``evil.example``) and, on state-changing requests, the ``Origin`` header. So:

- without ``server.admin_key``, the management API answers only requests whose ``Host`` is a
  loopback name (``localhost``, ``*.localhost``, 127.0.0.0/8, ``[::1]``) or is listed in
  ``server.allowed_hosts``; with an admin key the key is the guard, and ``Host`` is checked only
  when ``allowed_hosts`` is set;
- a state-changing request (not GET/HEAD/OPTIONS) that carries an ``Origin`` is refused unless the
  origin is the request's own host, a loopback name or an allowed host.

:func:`check_management_request` is the one function the management app (and any console served
beside it) calls; refusals are a 403 :class:`GatewayError`.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Collection

from omniroute.errors import GatewayError

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def hostname_of(host: str) -> str:
    """The lower-case name in a ``Host`` value without port or brackets (``[::1]:80`` → ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name.rstrip(".")


def is_loopback_name(name: str) -> bool:
    """``localhost``, a ``*.localhost`` name (always loopback, RFC 6761 §6.3) or a loopback IP."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _trusted(name: str, allowed: Collection[str]) -> bool:
    return is_loopback_name(name) or name in allowed


def check_management_request(
    method: str,
    host: str | None,
    origin: str | None,
    *,
    allowed_hosts: Collection[str],
    admin_key_set: bool,
) -> None:
    """Raise a 403 :class:`GatewayError` when ``host`` or ``origin`` (header values, ``None`` when
    absent) fail the rules of this module; ``allowed_hosts`` are lower-case host names."""
    host_checked = not admin_key_set or bool(allowed_hosts)
    if host is not None and host_checked and not _trusted(hostname_of(host), allowed_hosts):
        raise GatewayError(
            f"Host '{host}' is not served by the management API: use a loopback name, or add it to "
            "server.allowed_hosts.",
            status=403,
            code="host_not_allowed",
        )
    if origin is None or method.upper() in SAFE_METHODS:
        return
    parts = urllib.parse.urlsplit(origin.strip().lower())
    same_origin = host is not None and parts.netloc == host.strip().lower()
    if not same_origin and not _trusted((parts.hostname or "").rstrip("."), allowed_hosts):
        raise GatewayError(
            f"Cross-site request from origin '{origin}' refused: the management API accepts changes "
            "only from its own origin, loopback origins or server.allowed_hosts.",
            status=403,
            code="origin_not_allowed",
        )


__all__ = ["check_management_request", "hostname_of", "is_loopback_name"]
