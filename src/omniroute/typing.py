"""The strategy Protocol that combo strategies implement and the planner calls (DESIGN house style 6),
re-exported for plugins from where it is defined, :mod:`omniroute.routing.strategies.base`.

The wire-format Protocols (provider adapter, stream parser, client surface) live in
:mod:`omniroute.wire.base`.
"""

from __future__ import annotations

from omniroute.routing.strategies.base import Strategy

__all__ = ["Strategy"]
