"""OmniRoute for Python: a self-hosted AI gateway.

Public names only (DESIGN house style 12); everything else is reachable through its module. The names
are loaded on first use, so importing a submodule (``omniroute.providers.catalog``) stays light, and
importing the package opens no sockets and reads no data files (house style 8).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omniroute.app import OmniRouteApp, create_app
    from omniroute.config import Config, ConfigError, load_config
    from omniroute.errors import GatewayError
    from omniroute.gateway import Gateway

__all__ = ["Config", "ConfigError", "Gateway", "GatewayError", "OmniRouteApp", "create_app", "load_config"]
__version__ = "0.1.0"

_HOME = {
    "Config": "omniroute.config",
    "ConfigError": "omniroute.config",
    "load_config": "omniroute.config",
    "Gateway": "omniroute.gateway",
    "GatewayError": "omniroute.errors",
    "OmniRouteApp": "omniroute.app",
    "create_app": "omniroute.app",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(_HOME[name]), name)
    raise AttributeError(f"module 'omniroute' has no attribute {name!r}")
