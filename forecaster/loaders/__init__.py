"""Loaders: tidy CSV / Parquet files and the shared public traces to long series frames.

Loaders only reshape and type; cleaning is :func:`forecaster.contract.validate_series`.
"""

from forecaster.loaders.files import Layout, load_frame, read_table, to_long
from forecaster.loaders.traces import (
    DEMAND,
    TRACES,
    TraceSpec,
    derive_demand,
    load_trace,
    shared_data_dir,
)

__all__ = [
    "DEMAND",
    "TRACES",
    "Layout",
    "TraceSpec",
    "derive_demand",
    "load_frame",
    "load_trace",
    "read_table",
    "shared_data_dir",
    "to_long",
]
