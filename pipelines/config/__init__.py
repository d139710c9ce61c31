"""Configuration: the typed deployment settings and the node pools file."""

from pipelines.config.pools import (
    PoolConfig,
    PoolsConfig,
    ScaleDownConfig,
    ServiceConfig,
    SignalSource,
    load_pools,
    parse_duration,
)
from pipelines.config.settings import Settings, load_settings

__all__ = [
    "PoolConfig",
    "PoolsConfig",
    "ScaleDownConfig",
    "ServiceConfig",
    "Settings",
    "SignalSource",
    "load_pools",
    "load_settings",
    "parse_duration",
]
