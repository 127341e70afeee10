"""THE registry of wire formats (PROV-1): :data:`FORMATS` lists every format, one line each.

Each format is one package holding everything about it — inbound parsing and validation, rendering,
the client stream encoder, the error shape and, for formats providers speak, the upstream adapter and
stream parser — and exports one :class:`~omniroute.wire.base.WireFormat` object. Everything that
needs the list of formats derives it from here: the gateway's routes and adapters, the check of a
provider's ``format`` (config, management API, catalog), the conformance suites and the docs tests.
"""

from __future__ import annotations

from collections.abc import Sequence

from omniroute.wire import anthropic, gemini, openai, responses
from omniroute.wire.base import ProviderAdapter, WireFormat

__all__ = ["FORMATS", "adapters", "unknown_upstream_format", "upstream_formats"]

FORMATS: tuple[WireFormat, ...] = (
    openai.FORMAT,
    anthropic.FORMAT,
    gemini.FORMAT,
    responses.FORMAT,
)
"""Every wire format, in the order their routes are matched."""


def upstream_formats(formats: Sequence[WireFormat] = FORMATS) -> tuple[str, ...]:
    """Sorted names of the formats providers speak (those with an upstream adapter): the valid values
    of a provider's ``format``. ``formats``: the built-ins, or a gateway's with its extensions."""
    return tuple(sorted(f.name for f in formats if f.upstream is not None))


def adapters(formats: Sequence[WireFormat] = FORMATS) -> dict[str, ProviderAdapter]:
    """Format name → its upstream adapter, for every format of ``formats`` providers speak (PROV-1)."""
    return {f.name: f.upstream for f in formats if f.upstream is not None}


def unknown_upstream_format(name: str, formats: Sequence[WireFormat] = FORMATS) -> str | None:
    """``None`` when providers may use ``name`` as their ``format``, else the error text, e.g.
    ``unknown wire format 'foo' (known: anthropic, gemini, openai)``."""
    known = upstream_formats(formats)
    return None if name in known else f"unknown wire format '{name}' (known: {', '.join(known)})"
