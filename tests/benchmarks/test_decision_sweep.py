"""The settings decision_quality.py sweeps: Foresight's floors are pools the policy serves."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from benchmarks.decision_sweep import (
    FLOOR_MARGINS,
    FLOOR_QUANTILES,
    LOW_MARGIN_QUANTILES,
    LOW_MARGINS,
    MARGINS,
    NO_HOLD,
    QUANTILES,
    foresight_settings,
    no_hold,
    prehistory_cost,
)
from pipelines.config.pools import PoolConfig
from pipelines.simulate.engine import simulate
from pipelines.simulate.foresight import ForesightPolicy
from pipelines.simulate.reference import ReferenceForecaster

POOL = PoolConfig(
    name="p", node_group_id="g", gpus_per_node=8, max_nodes=20, lead_time=timedelta(minutes=10)
)


def test_floors_below_the_prehistory_demand_are_left_out_each_with_a_few_quantiles() -> None:
    floors_in = {3: 0.9, 5: 1.1, 8: 1.4, 12: 1.7, 30: 1.2}
    swept = dict(foresight_settings(POOL, margins=True, floors=floors_in))
    floors = {label: pool for label, pool in swept.items() if "+min" in label}
    margined = len(MARGINS) + len(LOW_MARGIN_QUANTILES) * len(LOW_MARGINS)
    assert len(swept) == 2 * len(QUANTILES) + margined + len(floors)
    # 0.9x sits below the demand; 30 nodes is above the pool's max_nodes (20).
    assert {pool.min_nodes for pool in floors.values()} == {5, 8, 12}
    assert len(floors) == 3 * (len(FLOOR_QUANTILES) + len(FLOOR_MARGINS))
    assert sorted({pool.quantile for pool in floors.values()}) == sorted(
        set(FLOOR_QUANTILES) | {q for q, _ in FLOOR_MARGINS}
    )
    assert swept["q0.9+min8"].min_nodes == 8
    assert swept["q0.9+min8"].quantile == 0.9


def test_without_a_scale_no_margin_is_swept() -> None:
    labels = [label for label, _ in foresight_settings(POOL, margins=False, floors={})]
    assert labels == [f"q{q:g}" for q in QUANTILES] + [f"q{q:g}+nohold" for q in QUANTILES]
    floored = dict(foresight_settings(POOL, margins=False, floors={8: 1.4}))
    assert all(pool.safety_margin == 0 for pool in floored.values())


def test_margins_are_swept_on_lower_quantiles_and_over_each_floor_as_pool_settings() -> None:
    swept = dict(foresight_settings(POOL, margins=True, floors={8: 1.4}))
    top = QUANTILES[-1]
    margined = {label: pool for label, pool in swept.items() if pool.safety_margin > 0}
    on_quantiles = {
        (pool.quantile, pool.safety_margin) for pool in margined.values() if pool.min_nodes == 0
    }
    assert on_quantiles == {(top, m) for m in MARGINS} | {
        (q, m) for q in LOW_MARGIN_QUANTILES for m in LOW_MARGINS
    }
    assert all(q < top for q in LOW_MARGIN_QUANTILES)
    q, m = FLOOR_MARGINS[0]
    floored = swept[f"q{q:g}+min8+m{m:g}"]
    assert (floored.quantile, floored.min_nodes, floored.safety_margin) == (q, 8, m)
    # Every margin is a pool's own quantile and safety_margin, held as the pool's default:
    # a pools file could say each of them.
    assert all(pool.scale_down == POOL.scale_down for pool in margined.values())
    assert all(PoolConfig.model_validate(p.model_dump()) == p for p in margined.values())
    assert {label for label, pool in margined.items() if pool.min_nodes} == {
        f"q{q:g}+min8+m{m:g}" for q, m in FLOOR_MARGINS
    }


def test_every_quantile_is_also_swept_without_the_hold_unless_the_pool_has_none() -> None:
    swept = dict(foresight_settings(POOL, margins=False, floors={}))
    assert swept["q0.9+nohold"].scale_down == NO_HOLD
    assert swept["q0.9+nohold"].quantile == 0.9
    assert swept["q0.9"].scale_down == POOL.scale_down
    unheld = no_hold(POOL)
    assert unheld is not None
    assert no_hold(unheld) is None
    labels = [label for label, _ in foresight_settings(unheld, margins=False, floors={})]
    assert labels == [f"q{q:g}" for q in QUANTILES]


def test_a_floors_cost_is_read_on_the_prehistory_against_the_nodes_its_demand_occupied() -> None:
    index = pd.date_range("2024-01-01", periods=4, freq="10min", tz="UTC")
    pre = pd.Series([8.0, 16.0, 1.0, 0.0], index=index)  # occupies 1 + 2 + 1 + 0 = 4 nodes
    assert prehistory_cost(pre, POOL, 2) == 2.0  # 2 nodes x 4 steps / 4
    assert prehistory_cost(pre * 0, POOL, 2) == float("inf")


def test_a_floor_holds_the_replayed_pool_at_min_nodes_and_follows_peaks_above_it() -> None:
    index = pd.date_range("2024-01-01", periods=300, freq="10min", tz="UTC")
    demand = pd.Series(np.where(np.arange(300) % 50 < 5, 100.0, 10.0), index=index)
    pool = dict(foresight_settings(POOL, margins=False, floors={6: 1.2}))["q0.05+min6"]
    policy = ForesightPolicy(pool, ReferenceForecaster("persistence", 0.0))
    nodes = simulate(demand, pool, policy).frame["desired_nodes"]
    assert nodes.min() == 6
    assert nodes.max() >= 13  # 100 GPUs need 13 nodes: above the floor it still follows
