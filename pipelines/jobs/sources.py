"""Which source a deployment ingests from, with its queries, step and first window.

Details: docs/jobs.md, "Notes from the code", `pipelines/jobs/sources.py`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta

import pandas as pd

from forecaster.exceptions import ConfigError
from pipelines.config.pools import PoolsConfig
from pipelines.config.settings import Settings
from pipelines.dataset import default_data_path
from pipelines.sources.files import FileSource
from pipelines.sources.prometheus import PrometheusConfig, PrometheusSource
from pipelines.sources.protocol import MetricSource
from pipelines.sources.queries import file_queries, promql_queries


@dataclass(frozen=True)
class SourcePlan:
    """A source and what to ask it.

    Attributes:
        source: where samples come from.
        queries: series id -> the source's query for it.
        step: the resolution asked for (the Prometheus query step).
        backfill: how far back the first ingest of a series reaches; ``None`` takes
            everything the source has (a file holds a bounded history).
        name: the source for messages, without secrets.
        owned: the plan built the source, so :meth:`close` releases it.
    """

    source: MetricSource
    queries: Mapping[str, str]
    step: timedelta
    backfill: timedelta | None
    name: str
    owned: bool = False

    def close(self) -> None:
        """Release the connections of a source this plan built (an injected one is kept)."""
        if self.owned and isinstance(self.source, PrometheusSource):
            self.source.close()


def query_step(settings: Settings) -> timedelta:
    """The ingest step of the settings (``prometheus.step``, e.g. ``5min``).

    Raises:
        ConfigError: the step is not a positive duration.
    """
    text = settings.prometheus.step
    try:
        step = pd.Timedelta(text).to_pytimedelta()
    except ValueError as exc:
        raise ConfigError(
            f"prometheus.step {text!r} is not a duration; use a pandas offset such as '5min'"
        ) from exc
    if step <= timedelta(0):
        raise ConfigError(f"prometheus.step must be positive, got {text!r}")
    return step


def prometheus_config(settings: Settings) -> PrometheusConfig:
    """The Prometheus client options of the settings (``url`` must be set)."""
    section = settings.prometheus
    if section.url is None:
        raise ConfigError("prometheus.url is not set; set FORESIGHT_PROMETHEUS__URL")
    return PrometheusConfig(
        url=section.url,
        timeout_s=section.timeout_s,
        max_attempts=section.max_attempts,
        bearer_token=section.bearer_token,
        username=section.username,
        password=section.password,
        verify_tls=section.verify_tls,
        ca_file=section.ca_file,
    )


def source_plan(
    settings: Settings,
    pools: PoolsConfig | None,
    source: MetricSource | None = None,
    queries: Mapping[str, str] | None = None,
) -> SourcePlan:
    """Choose the source, queries and first window from the settings.

    Args:
        settings: the deployment's settings.
        pools: the pools whose signals are ingested (may be None with ``queries``).
        source: use this source instead of building one (tests, custom plug-ins);
            queries are still chosen by whether ``prometheus.url`` is set.
        queries: use these queries instead of the pools' ones.

    Raises:
        ConfigError: the Prometheus options are invalid, or neither pools nor
            queries are given.
    """
    step = query_step(settings)
    backfill = timedelta(days=settings.prometheus.backfill_days)
    if settings.prometheus.url is not None:
        config = prometheus_config(settings)
        chosen = source if source is not None else PrometheusSource(config)
        return SourcePlan(
            source=chosen,
            queries=_queries(queries, pools, promql_queries),
            step=step,
            backfill=backfill,
            name=repr(chosen) if source is None else type(chosen).__name__,
            owned=source is None,
        )
    path = default_data_path(settings)
    chosen = source if source is not None else FileSource(path)
    return SourcePlan(
        source=chosen,
        queries=_queries(queries, pools, file_queries),
        step=step,
        backfill=None,
        name=f"file {path}" if source is None else type(chosen).__name__,
    )


def _queries(
    given: Mapping[str, str] | None,
    pools: PoolsConfig | None,
    default: Callable[[PoolsConfig], dict[str, str]],
) -> dict[str, str]:
    if given is not None:
        return dict(given)
    if pools is None:
        raise ConfigError("nothing to ingest: give the pools or the queries")
    return default(pools)
