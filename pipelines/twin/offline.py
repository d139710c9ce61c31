"""The offline replay on the twin's own cluster model: one rule for both runs.

The replay beside a twin run must model the cluster the twin ran against, so the two
differ only by the live loop. :func:`replay_on_cluster` replays a deciding policy on
the same :class:`~.cluster.SimCluster` the twin drives, with the same consumer
semantics, building each step's history with the replay engine's own
:class:`~pipelines.simulate.engine.Observations`:

- under ``replay`` semantics the cluster is the replay engine's (its ``NodeFleet``
  resized to ``desired_nodes``), so the result is :func:`pipelines.simulate.simulate`'s
  (a unit test checks it step for step);
- under ``autoscaler`` semantics the replay's decisions are acted on as
  cluster-autoscaler acts on the twin's: placeholder pods, boot delay, the unneeded
  time, booting nodes never cancelled.
"""

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
