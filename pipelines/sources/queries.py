"""The queries of a deployment's pools: series id -> PromQL or file series (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from pipelines.config.pools import PoolConfig, PoolsConfig

KUEUE_PENDING_WORKLOADS: Final = (
    'sum(kueue_pending_workloads{cluster_queue="$pool", status=~"active|inadmissible"})'
)
"""An alternative ``queue_gpus`` query for clusters that queue work with Kueue.

It counts pending workloads of the ClusterQueue named like the pool, not GPUs:
multiply by GPUs per workload, or train on it as a queue signal of its own. Use it as
a pool's ``signals: {queue_gpus: {promql: ...}}``.
"""


def _pools(pools: PoolsConfig | Sequence[PoolConfig]) -> Sequence[PoolConfig]:
    return pools.pools if isinstance(pools, PoolsConfig) else pools


def promql_queries(
    pools: PoolsConfig | Sequence[PoolConfig], signals: Iterable[str] | None = None
) -> dict[str, str]:
    """Map each pool signal's series id to its PromQL, placeholders filled in.

    Args:
        signals: only these signals; default every signal of each pool. A signal
            without PromQL (a file-only signal) is left out.
    """
    wanted = None if signals is None else set(signals)
    queries = {}
    for pool in _pools(pools):
        for signal in pool.signals:
            query = pool.promql(signal)
            if query is not None and (wanted is None or signal in wanted):
                queries[pool.series_id(signal)] = query
    return queries


def file_queries(
    pools: PoolsConfig | Sequence[PoolConfig], signals: Iterable[str] | None = None
) -> dict[str, str]:
    """Map each pool signal's series id to the file series that holds it.

    A signal with a ``column`` reads that column of a wide file; otherwise the file
    is expected to hold the series under its own id, ``<pool>/<signal>``.

    Args:
        signals: only these signals; default every signal of each pool.
    """
    wanted = None if signals is None else set(signals)
    queries = {}
    for pool in _pools(pools):
        for signal, source in pool.signals.items():
            if wanted is None or signal in wanted:
                queries[pool.series_id(signal)] = source.column or pool.series_id(signal)
    return queries
