"""The offline replay on the twin's own cluster model: one rule for both runs (docs/twin.md)."""

from __future__ import annotations

from typing import Protocol

import pandas as pd

from pipelines.config.pools import PoolConfig
from pipelines.simulate.engine import Observations, demand_index
from pipelines.simulate.result import SimResult
from pipelines.simulate.types import History, SimPool
from pipelines.twin.cluster import Published, Semantics, SimCluster


class PublishingPolicy(Protocol):
    """A policy that decides what a service publishes: nodes and placeholder pods."""

    def reset(self) -> None:
        """Forget the state of an earlier replay."""
        ...

    def publish(self, history: History) -> Published:
        """Decide at the history's last step."""
        ...


def replay_on_cluster(
    demand: pd.Series,
    pool: PoolConfig,
    policy: PublishingPolicy,
    *,
    initial_nodes: int,
    semantics: Semantics,
) -> SimResult:
    """Replay ``policy`` over ``demand`` on a :class:`SimCluster` with ``semantics``.

    Args:
        demand: GPUs of work wanted per step (UTC index on a regular step).
        policy: decides each step from the history (reset first).
        initial_nodes: ready nodes at step 0.
        semantics: how the cluster acts on each decision, as in the twin.

    Raises:
        DataValidationError: the demand series is not a clean regular series.
    """
    index, step = demand_index(demand)
    sim = SimPool.of(pool, step)
    cluster = SimCluster(sim, index, initial_nodes, semantics)
    seen = Observations(sim, index)
    values = demand.to_numpy(dtype=float)
    policy.reset()
    for t in range(len(index)):
        cluster.begin(t)
        carried = cluster.backlog
        cluster.arrive(t, float(values[t]))
        history = seen.observe(t, float(values[t]), carried, cluster.ready, cluster.pending)
        cluster.act(t, policy.publish(history))
        cluster.serve(t)
    return cluster.result()
