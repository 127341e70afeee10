"""OmniRoute for Python: a self-hosted AI gateway.

Public names only (DESIGN house style 12); everything else is reachable through its module.
Importing the package opens no sockets and reads no data files (house style 8).
"""

from omniroute.app import OmniRouteApp, create_app
from omniroute.config import Config, ConfigError, load_config
from omniroute.errors import GatewayError
from omniroute.gateway import Gateway

__all__ = ["Config", "ConfigError", "Gateway", "GatewayError", "OmniRouteApp", "create_app", "load_config"]
__version__ = "0.1.0"
