"""Pool configs to the query mappings the sources take."""

from __future__ import annotations

from pipelines.config.pools import PoolConfig, PoolsConfig
from pipelines.config.signals import DEFAULT_PROMQL, SIGNALS
from pipelines.sources.queries import KUEUE_PENDING_WORKLOADS, file_queries, promql_queries

POOLS = PoolsConfig(
    pools=[
        PoolConfig(name="a100-train", node_group_id="ng-a100"),
        PoolConfig(
            name="l4-infer",
            node_group_id="ng-l4",
            signals={
                "queue_gpus": {"promql": KUEUE_PENDING_WORKLOADS},
                "gpu_util": {"promql": None, "column": "l4_util"},
            },
        ),
    ]
)


def test_every_default_signal_of_every_pool_gets_a_filled_in_query() -> None:
    queries = promql_queries(POOLS)
    assert set(queries) == {f"a100-train/{s}" for s in SIGNALS} | {
        "l4-infer/queue_gpus",
        "l4-infer/allocated_gpus",
        "l4-infer/nodes",
    }
    assert all("$pool" not in query for query in queries.values())
    assert 'label_foresight_io_pool="a100-train"' in queries["a100-train/nodes"]
    # label_replace's "$1" is a regex group, not a placeholder.
    assert '"$1"' in queries["a100-train/gpu_util"]
    assert queries["a100-train/queue_gpus"] == DEFAULT_PROMQL["queue_gpus"].replace(
        "$pool", "a100-train"
    )


def test_pool_override_replaces_the_default() -> None:
    queries = promql_queries(POOLS, signals=["queue_gpus"])
    assert set(queries) == {"a100-train/queue_gpus", "l4-infer/queue_gpus"}
    assert queries["l4-infer/queue_gpus"] == (
        'sum(kueue_pending_workloads{cluster_queue="l4-infer", status=~"active|inadmissible"})'
    )


def test_file_queries_use_columns_or_series_ids() -> None:
    queries = file_queries(POOLS.pools, signals=["gpu_util", "nodes"])
    assert queries == {
        "a100-train/gpu_util": "a100-train/gpu_util",
        "a100-train/nodes": "a100-train/nodes",
        "l4-infer/gpu_util": "l4_util",
        "l4-infer/nodes": "l4-infer/nodes",
    }
