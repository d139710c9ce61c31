"""The twin's simulated cluster: the replay's engine under ``replay``, CA under ``autoscaler``."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from pipelines.simulate.engine import simulate
from pipelines.simulate.types import History, SimPool
from pipelines.twin.cluster import Published, SimCluster

STEP = timedelta(minutes=10)


def _pool(lead: timedelta = timedelta(minutes=20), max_nodes: int = 40) -> SimPool:
    return SimPool(
        gpus_per_node=8,
        min_nodes=0,
        max_nodes=max_nodes,
        lead_time=lead,
        cost_per_node_hour=1.0,
        step=STEP,
    )


def _index(n: int) -> pd.DatetimeIndex:
    return pd.date_range("2025-03-03", periods=n, freq=STEP, tz="UTC")


class _Scripted:
    """A policy that answers a fixed sequence of desired nodes."""

    def __init__(self, desired: list[int]) -> None:
        self.desired = desired

    def reset(self) -> None:
        """Nothing to forget."""

    def decide(self, history: History) -> int:
        return self.desired[history.t]


def _run(
    cluster: SimCluster, demand: np.ndarray, published: list[Published]
) -> list[tuple[float, float, int]]:
    readings = []
    for t, value in enumerate(demand):
        cluster.begin(t)
        reading = cluster.arrive(t, float(value))
        readings.append((reading.allocated_gpus, reading.queue_gpus, reading.nodes))
        cluster.act(t, published[t])
        cluster.serve(t)
    return readings


def test_replay_semantics_equal_the_replay_engine_step_for_step() -> None:
    rng = np.random.default_rng(35)
    n = 200
    demand = rng.gamma(2.0, 40.0, n).round(1)
    desired = [int(v) for v in rng.integers(0, 30, n)]
    index = _index(n)
    pool = _pool()
    expected = simulate(pd.Series(demand, index=index), pool, _Scripted(desired), initial_nodes=5)

    cluster = SimCluster(pool, index, initial_nodes=5, semantics="replay")
    readings = _run(cluster, demand, [Published(d, 0) for d in desired])
    got = cluster.result()

    pd.testing.assert_frame_equal(got.frame, expected.frame, check_dtype=False)
    assert got.summary() == pytest.approx(expected.summary())
    np.testing.assert_allclose(got.wait_gpu_steps, expected.wait_gpu_steps)
    # What the cluster reports is what the replay's policy observes.
    queue = [q for _, q, _ in readings]
    ready_before = [nodes for _, _, nodes in readings]
    wanted = [a + q for a, q, _ in readings]
    backlog = np.concatenate([[0.0], expected.frame["backlog_gpus"].to_numpy()[:-1]])
    np.testing.assert_allclose(wanted, backlog + demand)
    np.testing.assert_allclose(queue, np.maximum(0, wanted - np.array(ready_before) * 8.0))


def test_autoscaler_adds_nodes_for_pending_placeholders_one_lead_later() -> None:
    index = _index(6)
    cluster = SimCluster(_pool(lead=timedelta(minutes=20)), index, 1, semantics="autoscaler")
    cluster.begin(0)
    cluster.arrive(0, 8.0)  # fills the one ready node
    cluster.act(0, Published(desired_nodes=4, headroom_pods=3))
    cluster.serve(0)
    assert (cluster.ready, cluster.pending) == (1, 3)
    for t in (1, 2):
        cluster.begin(t)
        cluster.arrive(t, 8.0)
        cluster.act(t, Published(4, 3))  # booting nodes count: no second request
        cluster.serve(t)
    assert cluster.ups == 1
    assert (cluster.ready, cluster.pending) == (4, 0)  # due at step 0 + 2


def test_autoscaler_removes_a_node_only_after_the_unneeded_time() -> None:
    index = _index(8)
    cluster = SimCluster(_pool(), index, 4, semantics="autoscaler", unneeded=timedelta(minutes=20))
    ready = []
    for t in range(5):
        cluster.begin(t)
        cluster.arrive(t, 8.0)  # one node's work, no placeholders: three unneeded
        cluster.act(t, Published(desired_nodes=1, headroom_pods=0))
        cluster.serve(t)
        ready.append(cluster.ready)
    # Unneeded from step 0, removed when 20 minutes (2 steps) have passed.
    assert ready == [4, 4, 1, 1, 1]
    assert (cluster.downs, cluster.removed) == (1, 3)


def test_autoscaler_resets_the_timer_of_a_node_needed_again() -> None:
    index = _index(6)
    cluster = SimCluster(_pool(), index, 2, semantics="autoscaler", unneeded=timedelta(minutes=20))
    demand = [8.0, 16.0, 8.0, 8.0, 8.0, 8.0]
    ready = []
    for t, value in enumerate(demand):
        cluster.begin(t)
        cluster.arrive(t, value)
        cluster.act(t, Published(1, 0))
        cluster.serve(t)
        ready.append(cluster.ready)
    # Unneeded at 0, needed at 1, unneeded again from 2: removed at 4, not at 2.
    assert ready == [2, 2, 2, 2, 1, 1]


def test_autoscaler_never_cancels_booting_nodes() -> None:
    index = _index(3)
    cluster = SimCluster(_pool(), index, 0, semantics="autoscaler", unneeded=timedelta(0))
    cluster.begin(0)
    cluster.arrive(0, 0.0)
    cluster.act(0, Published(3, 3))
    cluster.serve(0)
    cluster.begin(1)
    cluster.arrive(1, 0.0)
    cluster.act(1, Published(0, 0))
    cluster.serve(1)
    assert (cluster.ready, cluster.pending, cluster.removed) == (0, 3, 0)


def test_bad_semantics_and_demand_are_refused() -> None:
    with pytest.raises(ValueError, match="semantics"):
        SimCluster(_pool(), _index(2), 1, semantics="eager")  # type: ignore[arg-type]
    cluster = SimCluster(_pool(), _index(2), 1)
    with pytest.raises(ValueError, match="finite"):
        cluster.arrive(0, float("nan"))
