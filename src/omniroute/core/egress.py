"""Where the gateway may send a provider key: the ``base_url`` policy and safe upstream URL parts.

A connection's or provider's ``base_url`` receives the key, so the addresses it may point to are a
policy (``security`` in the config, :class:`~omniroute.config.SecurityConfig`):

- link-local and cloud-metadata addresses are always refused: ``169.254.0.0/16`` (AWS, GCP, Azure,
  OpenStack metadata at 169.254.169.254), ``fe80::/10``, AWS's IPv6 ``fd00:ec2::254``, Alibaba's
  ``100.100.100.200`` and the names ``metadata.google.internal``, ``metadata``, ``instance-data``
  (provider documentation of each cloud's instance metadata service);
- loopback (``127.0.0.0/8``, ``::1``, ``localhost``) is allowed unless
  ``allow_loopback_base_urls: false`` (local model servers such as Ollama or llama.cpp listen there);
- private ranges (RFC 1918 ``10/8``, ``172.16/12``, ``192.168/16``, RFC 4193 ``fc00::/7``, RFC 6598
  ``100.64/10``) are allowed unless ``allow_private_base_urls: false``;
- ``denied_base_url_hosts`` adds host names or CIDR ranges to refuse.

The policy is checked when a ``base_url`` is written (config file, management API, console, CLI) and
again when a request is sent: a literal address before the request, and every address a host name
resolves to (so a name that later resolves to a refused address is refused at connect time,
:class:`omniroute.providers.upstream.PolicyResolver`).

Model ids go into URL paths (Gemini-format upstreams: ``/models/{model}:generateContent``):
:func:`path_segment` checks them against :data:`MODEL_ID_PATTERN` and percent-encodes them, so a
model id can never change which path on the provider a request reaches.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALWAYS_DENIED_NETWORKS: Final[tuple[IPNetwork, ...]] = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
    ipaddress.ip_network("100.100.100.200/32"),
    ipaddress.ip_network("0.0.0.0/32"),
    ipaddress.ip_network("::/128"),
)
ALWAYS_DENIED_NAMES: Final = frozenset({"metadata.google.internal", "metadata", "instance-data"})
LOOPBACK_NETWORKS: Final[tuple[IPNetwork, ...]] = (
    ipaddress.ip_network("127.0.0.0/8"),
    ipaddress.ip_network("::1/128"),
)
PRIVATE_NETWORKS: Final[tuple[IPNetwork, ...]] = (
    ipaddress.ip_network("10.0.0.0/8"),
    ipaddress.ip_network("172.16.0.0/12"),
    ipaddress.ip_network("192.168.0.0/16"),
    ipaddress.ip_network("100.64.0.0/10"),
    ipaddress.ip_network("fc00::/7"),
)

#: A model id as providers spell them: letters, digits and ``. _ - : @ / + ~ %`` (``models/``
#: prefixes, ``org/model`` on OpenRouter-style hosts, ``name@version`` and ``:tag`` on Vertex/Ollama,
#: percent-escapes in test-server names), no ``.``/``..`` segment, at most 512 characters. ``?``,
#: ``#``, spaces and backslashes never pass.
MODEL_ID_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+/~%-]{0,511}$")


class EgressDenied(ValueError):
    """A ``base_url`` (or the address it resolves to) the policy refuses; the message says why."""


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """The ``base_url`` policy (see the module docstring for the ranges and their sources).

    ``allow_loopback``/``allow_private``: whether those ranges may receive keys; ``denied``: extra
    refused networks; ``denied_names``: extra refused host names (lower case).
    """

    allow_loopback: bool = True
    allow_private: bool = True
    denied: tuple[IPNetwork, ...] = ()
    denied_names: frozenset[str] = frozenset()

    @classmethod
    def from_config(cls, security: Any) -> EgressPolicy:
        """Build from a :class:`~omniroute.config.SecurityConfig` (``None`` → the defaults)."""
        if security is None:
            return cls()
        nets, names = parse_denied(security.denied_base_url_hosts)
        return cls(security.allow_loopback_base_urls, security.allow_private_base_urls, nets, names)

    def check_address(self, addr: IPAddress, where: str = "base_url") -> None:
        """Raise :class:`EgressDenied` when ``addr`` may not receive a provider key."""
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        if any(addr in n for n in ALWAYS_DENIED_NETWORKS):
            raise EgressDenied(f"{where}: {addr} is a link-local or cloud-metadata address (always refused)")
        if any(addr in n for n in self.denied):
            raise EgressDenied(f"{where}: {addr} is in security.denied_base_url_hosts")
        if not self.allow_loopback and any(addr in n for n in LOOPBACK_NETWORKS):
            raise EgressDenied(f"{where}: {addr} is a loopback address (security.allow_loopback_base_urls)")
        if not self.allow_private and any(addr in n for n in PRIVATE_NETWORKS):
            raise EgressDenied(f"{where}: {addr} is a private address (security.allow_private_base_urls)")

    def check_host(self, host: str, where: str = "base_url") -> None:
        """Check a URL host: a literal address by :meth:`check_address`, a name against the refused
        names (``localhost`` counts as loopback). Names are checked again once resolved."""
        name = host.strip("[]").rstrip(".").lower()
        try:
            addr = ipaddress.ip_address(name.split("%", 1)[0])
        except ValueError:
            if name in ALWAYS_DENIED_NAMES:
                raise EgressDenied(
                    f"{where}: {name} is a cloud-metadata host name (always refused)"
                ) from None
            if name in self.denied_names:
                raise EgressDenied(f"{where}: {name} is in security.denied_base_url_hosts") from None
            if not self.allow_loopback and (name == "localhost" or name.endswith(".localhost")):
                raise EgressDenied(
                    f"{where}: {name} is a loopback name (security.allow_loopback_base_urls)"
                ) from None
            return
        self.check_address(addr, where)

    def check_url(self, url: str, where: str = "base_url") -> None:
        """Check an absolute http(s) URL's host; :class:`EgressDenied` if refused or malformed."""
        try:
            host = urlsplit(url).hostname
        except ValueError:
            raise EgressDenied(f"{where}: not a valid URL") from None
        if not host:
            raise EgressDenied(f"{where}: the URL has no host")
        self.check_host(host, where)


def parse_denied(entries: Iterable[str]) -> tuple[tuple[IPNetwork, ...], frozenset[str]]:
    """Split ``denied_base_url_hosts`` into networks (CIDR or single address) and host names.
    Raises :class:`ValueError` naming an entry that is neither."""
    nets: list[IPNetwork] = []
    names: set[str] = set()
    for raw in entries:
        entry = raw.strip().lower()
        try:
            nets.append(ipaddress.ip_network(entry, strict=False))
            continue
        except ValueError:
            pass
        if not re.fullmatch(r"[a-z0-9.-]+", entry):
            raise ValueError(f"'{raw}' is neither a CIDR range, an address nor a host name")
        names.add(entry.rstrip("."))
    return tuple(nets), frozenset(names)


def path_segment(model: str, where: str = "model") -> str:
    """``model`` checked against :data:`MODEL_ID_PATTERN` (no ``.``/``..``/empty ``/``-separated part)
    and percent-encoded as one URL path segment (``/``, ``:`` and ``+`` encoded too, so the id can
    neither add path levels nor change the method suffix).
    Raises :class:`ValueError` naming ``where`` for an id that does not match."""
    if not MODEL_ID_PATTERN.fullmatch(model) or any(s in ("", ".", "..") for s in model.split("/")):
        raise ValueError(f"{where}: '{model[:80]}' is not a valid model id")
    return quote(model, safe="@")


def check_urls(policy: EgressPolicy, urls: Sequence[tuple[str, str | None]]) -> list[str]:
    """Problems for ``(where, url)`` pairs (``None`` urls skipped): one message per refused URL."""
    problems: list[str] = []
    for where, url in urls:
        if url:
            try:
                policy.check_url(url, where)
            except EgressDenied as exc:
                problems.append(str(exc))
    return problems
