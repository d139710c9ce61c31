"""The settings decision_quality.py sweeps: Foresight's floors are pools the policy serves."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from benchmarks.decision_sweep import (
    FLOOR_QUANTILES,
    MARGINS,
    QUANTILES,
    foresight_settings,
)
from pipelines.config.pools import PoolConfig
from pipelines.simulate.engine import simulate
from pipelines.simulate.foresight import ForesightPolicy
from pipelines.simulate.reference import ReferenceForecaster

POOL = PoolConfig(
    name="p", node_group_id="g", gpus_per_node=8, max_nodes=20, lead_time=timedelta(minutes=10)
)


def test_floors_are_swept_only_within_the_scored_costs_each_with_a_few_quantiles() -> None:
    swept = dict(foresight_settings(POOL, margins=True, floors={3: 0.9, 5: 1.1, 8: 1.4, 12: 1.7}))
    floors = {label: pool for label, pool in swept.items() if "+min" in label}
    assert len(swept) == len(QUANTILES) + len(MARGINS) + len(floors)
    assert {pool.min_nodes for pool in floors.values()} == {5, 8}  # 0.9x and 1.7x left out
    assert sorted({pool.quantile for pool in floors.values()}) == sorted(FLOOR_QUANTILES)
    assert swept["q0.9+min8"].min_nodes == 8
    assert swept["q0.9+min8"].quantile == 0.9


def test_without_a_scale_no_margin_is_swept() -> None:
    labels = [label for label, _ in foresight_settings(POOL, margins=False, floors={})]
    assert labels == [f"q{q:g}" for q in QUANTILES]


def test_a_floor_holds_the_replayed_pool_at_min_nodes_and_follows_peaks_above_it() -> None:
    index = pd.date_range("2024-01-01", periods=300, freq="10min", tz="UTC")
    demand = pd.Series(np.where(np.arange(300) % 50 < 5, 100.0, 10.0), index=index)
    pool = dict(foresight_settings(POOL, margins=False, floors={6: 1.2}))["q0.05+min6"]
    policy = ForesightPolicy(pool, ReferenceForecaster("persistence", 0.0))
    nodes = simulate(demand, pool, policy).frame["desired_nodes"]
    assert nodes.min() == 6
    assert nodes.max() >= 13  # 100 GPUs need 13 nodes: above the floor it still follows
