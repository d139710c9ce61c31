"""Configuration: the typed deployment settings and the node pools file."""

from pipelines.config.pools import PoolConfig, PoolsConfig, ServiceConfig, SignalSource
from pipelines.config.pools_file import load_pools
from pipelines.config.settings import Settings, load_settings

__all__ = [
    "PoolConfig",
    "PoolsConfig",
    "ServiceConfig",
    "Settings",
    "SignalSource",
    "load_pools",
    "load_settings",
]
