"""The replay on the twin's cluster model: the engine's figures under ``replay``, the
twin's own consumer under ``autoscaler``."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from pipelines.config.pools import PoolConfig
from pipelines.simulate.engine import simulate
from pipelines.simulate.types import History, SimPool
from pipelines.twin.cluster import Published, SimCluster
from pipelines.twin.offline import replay_on_cluster

STEP = timedelta(minutes=10)
POOL = PoolConfig(
    name="p",
    node_group_id="ng-p",
    gpus_per_node=8,
    min_nodes=0,
    max_nodes=40,
    lead_time=timedelta(minutes=20),
)


def _nodes_for(wanted: float, ready: int, t: int) -> Published:
    """A reactive rule with a wobble, so the decision depends on what is observed."""
    need = math.ceil(wanted / 8)
    extra = 2 if t % 7 < 3 else 0
    return Published(need + extra + (1 if ready < need else 0), extra)


class _Reactive:
    """Decides from the history as the service decides from the pushed readings."""

    def __init__(self) -> None:
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def publish(self, history: History) -> Published:
        return _nodes_for(history.wanted_now, history.ready_now, history.t)

    def decide(self, history: History) -> int:
        return self.publish(history).desired_nodes


def _demand(n: int = 150) -> pd.Series:
    index = pd.date_range("2025-03-03", periods=n, freq=STEP, tz="UTC")
    return pd.Series(np.random.default_rng(11).gamma(2.0, 40.0, n).round(1), index=index)


def test_replay_semantics_reproduce_the_replay_engine() -> None:
    demand = _demand()
    expected = simulate(demand, POOL, _Reactive(), initial_nodes=6)
    policy = _Reactive()
    got = replay_on_cluster(demand, POOL, policy, initial_nodes=6, semantics="replay")
    assert policy.resets == 1
    pd.testing.assert_frame_equal(got.frame, expected.frame, check_dtype=False)
    assert got.summary() == pytest.approx(expected.summary())


@pytest.mark.parametrize("semantics", ["replay", "autoscaler"])
def test_the_policy_sees_what_the_twin_pushes_and_the_cluster_acts_alike(semantics: str) -> None:
    demand = _demand()
    sem = "replay" if semantics == "replay" else "autoscaler"
    got = replay_on_cluster(demand, POOL, _Reactive(), initial_nodes=6, semantics=sem)
    # The twin's way: decide from the cluster's readings (what it pushes), act on it.
    index = pd.DatetimeIndex(demand.index)
    cluster = SimCluster(SimPool.of(POOL, STEP), index, 6, sem)
    for t, value in enumerate(demand.to_numpy()):
        cluster.begin(t)
        reading = cluster.arrive(t, float(value))
        cluster.act(t, _nodes_for(reading.demand_gpus, reading.nodes, t))
        cluster.serve(t)
    twin = cluster.result()
    pd.testing.assert_frame_equal(got.frame, twin.frame)
    assert got.summary() == twin.summary()


def test_autoscaler_semantics_differ_from_the_engine_on_a_swinging_trace() -> None:
    demand = _demand()
    engine = replay_on_cluster(demand, POOL, _Reactive(), initial_nodes=6, semantics="replay")
    ca = replay_on_cluster(demand, POOL, _Reactive(), initial_nodes=6, semantics="autoscaler")
    # CA keeps unneeded nodes for 10 min and never cancels a booting one.
    assert ca.node_hours != engine.node_hours
