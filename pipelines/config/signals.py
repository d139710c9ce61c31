"""The signals of a pool: the names every pool has and their default PromQL queries.

Details: docs/jobs.md, "Notes from the code", `pipelines/config/signals.py`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

QUEUE_GPUS: Final = "queue_gpus"
ALLOCATED_GPUS: Final = "allocated_gpus"
GPU_UTIL: Final = "gpu_util"
NODES: Final = "nodes"
SIGNALS: Final = (QUEUE_GPUS, ALLOCATED_GPUS, GPU_UTIL, NODES)
"""The signals every pool has (more may be added per pool)."""
MAX_SIGNALS_PER_POOL: Final = 32
"""The most signals one pool may declare: the push API stores only declared signals,
so this caps the series per pool (every training reads every one)."""

# Nodes and GPU pods carry the label ``foresight.io/pool=<pool>``; kube-state-metrics
# exports it once allowed (``--metric-labels-allowlist=nodes=[foresight.io/pool],
# pods=[foresight.io/pool]``). ``$pool`` and ``$node_group_id`` are substituted per pool;
# ``$1`` in label_replace is not an identifier, so substitution leaves it alone.
_POOL_NODES: Final = 'kube_node_labels{label_foresight_io_pool="$pool"}'
_GPU_REQUESTS: Final = 'kube_pod_container_resource_requests{resource="nvidia_com_gpu"}'
DEFAULT_PROMQL: Final[Mapping[str, str]] = {
    QUEUE_GPUS: (
        f"sum({_GPU_REQUESTS}"
        ' * on(namespace, pod) group_left() (kube_pod_status_phase{phase="Pending"} == 1)'
        ' * on(namespace, pod) group_left() kube_pod_labels{label_foresight_io_pool="$pool"})'
    ),
    ALLOCATED_GPUS: (
        f"sum({_GPU_REQUESTS}"
        ' * on(namespace, pod) group_left() (kube_pod_status_phase{phase="Running"} == 1)'
        f" * on(node) group_left() {_POOL_NODES})"
    ),
    GPU_UTIL: (
        "avg(DCGM_FI_DEV_GPU_UTIL * on(Hostname) group_left() "
        f'label_replace({_POOL_NODES}, "Hostname", "$1", "node", "(.*)"))'
    ),
    NODES: (
        'sum(kube_node_status_condition{condition="Ready",status="true"}'
        f" * on(node) group_left() {_POOL_NODES})"
    ),
}
