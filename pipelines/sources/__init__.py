"""Metric sources: Prometheus over HTTP and tidy files, behind one ``fetch`` protocol."""

from pipelines.sources.files import FileSource
from pipelines.sources.prometheus import (
    MAX_POINTS,
    PrometheusConfig,
    PrometheusSource,
    Window,
    plan_windows,
)
from pipelines.sources.protocol import MetricSource, TimeLike
from pipelines.sources.queries import KUEUE_PENDING_WORKLOADS, file_queries, promql_queries

__all__ = [
    "KUEUE_PENDING_WORKLOADS",
    "MAX_POINTS",
    "FileSource",
    "MetricSource",
    "PrometheusConfig",
    "PrometheusSource",
    "TimeLike",
    "Window",
    "file_queries",
    "plan_windows",
    "promql_queries",
]
