"""Node lifecycle: lead time in steps, immediate removal, payment from the request."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError
from pipelines.simulate.engine import simulate
from pipelines.simulate.types import SimPool


def test_node_requested_at_t_is_usable_at_t_plus_lead(series, pool, scripted):
    # Step 5 min, lead 10 min: L = 2. Ask for 2 more nodes at t=1; they work from t=3.
    demand = series([8, 8, 24, 24, 24, 24, 8])
    policy = scripted([1, 3, 3, 3, 3, 3, 1])
    result = simulate(demand, pool(lead_minutes=10), policy)
    frame = result.frame
    assert frame["ready_nodes"].tolist() == [1, 1, 1, 3, 3, 3, 1]
    assert frame["pending_nodes"].tolist() == [0, 2, 2, 0, 0, 0, 0]
    assert frame["capacity_gpus"].tolist() == [8, 8, 8, 24, 24, 24, 8]
    # Paid from the request: held = ready + pending = 1+3+3+3+3+3+1 = 17 node-steps.
    assert result.node_hours == pytest.approx(17 / 12)
    assert result.gpu_hours_provisioned == pytest.approx(17 * 8 / 12)
    assert result.booting_gpu_hours == pytest.approx(2 * 2 * 8 / 12)
    assert result.cost == pytest.approx(17 / 12 * 3.0)
    assert (result.scale_ups, result.scale_downs) == (1, 1)
    assert (result.nodes_added, result.nodes_removed) == (2, 2)


def test_removal_is_immediate_and_affects_the_same_step(series, pool, scripted):
    # Removing a node at t=2 takes its capacity away at t=2 already: work waits.
    result = simulate(series([16, 16, 16, 0]), pool(), scripted([2, 2, 1, 1]))
    assert result.frame["capacity_gpus"].tolist() == [16, 16, 8, 8]
    assert result.frame["backlog_gpus"].tolist() == [0, 0, 8, 0]
    assert result.waiting_gpu_hours == pytest.approx(8 / 12)


@pytest.mark.parametrize(
    ("lead", "step", "steps"),
    [(10, 5, 2), (7, 5, 2), (10, 10, 1), (1, 10, 1), (20, 10, 2), (21, 10, 3)],
)
def test_lead_time_is_rounded_up_to_whole_steps(series, pool, scripted, lead, step, steps):
    sim = SimPool.of(pool(lead_minutes=lead), timedelta(minutes=step))
    assert sim.lead_steps == steps
    # And the engine uses it: one node asked for at t=0 is ready at t=steps.
    result = simulate(series([0.0] * 5, minutes=step), pool(lead_minutes=lead), scripted([1] * 5))
    ready = result.frame["ready_nodes"].to_numpy()
    assert ready.tolist() == [0] * steps + [1] * (5 - steps)


def test_removal_cancels_the_newest_booting_nodes_first(series, pool, scripted):
    # L = 3: 1 node asked at t=0 (due 3), 2 at t=1 (due 4); cutting 1 at t=2 cancels
    # one of the newest request, so the t=0 node still arrives at t=3.
    result = simulate(series([8] * 6), pool(lead_minutes=15), scripted([2, 4, 3, 3, 3, 3]))
    assert result.frame["ready_nodes"].tolist() == [1, 1, 1, 2, 3, 3]
    assert result.frame["pending_nodes"].tolist() == [1, 3, 2, 1, 0, 0]
    # Cancelling below the booting nodes then removes ready ones.
    result = simulate(series([8] * 4), pool(lead_minutes=15), scripted([3, 0, 0, 0]))
    assert result.frame["ready_nodes"].tolist() == [1, 0, 0, 0]
    assert result.frame["pending_nodes"].tolist() == [2, 0, 0, 0]


def test_answers_are_clamped_to_the_pool_bounds(series, pool, scripted):
    result = simulate(series([8] * 4), pool(min_nodes=1, max_nodes=3), scripted([0, 50, 50, 0]))
    assert result.frame["desired_nodes"].tolist() == [1, 3, 3, 1]


def test_initial_nodes_default_to_the_first_demand_and_can_be_set(series, pool, scripted):
    demand = series([17, 17])
    assert simulate(demand, pool(), scripted([3, 3])).frame["ready_nodes"].iloc[0] == 3
    started = simulate(demand, pool(), scripted([3, 3]), initial_nodes=5)
    assert started.frame["ready_nodes"].tolist() == [3, 3]  # 5 held, cut to 3 at once
    assert started.nodes_removed == 2


def test_a_policy_answer_that_is_not_whole_nodes_is_refused(series, pool, scripted):
    with pytest.raises(TypeError, match="return whole nodes"):
        simulate(series([8, 8]), pool(), scripted([1.5, 1]))  # type: ignore[list-item]
    # numpy integers are whole nodes.
    result = simulate(series([8, 8]), pool(), scripted([np.int64(2), np.int64(2)]))
    assert result.frame["ready_nodes"].tolist() == [1, 2]


@pytest.mark.parametrize(
    ("values", "index", "message"),
    [
        ([1.0, -1.0], None, "negative"),
        ([1.0, float("nan")], None, "NaN"),
        ([1.0, 2.0], pd.date_range("2024-01-01", periods=2, freq="5min"), "timezone-aware"),
        (
            [1.0, 2.0, 3.0],
            pd.DatetimeIndex(
                ["2024-01-01 00:00", "2024-01-01 00:05", "2024-01-01 00:15"], tz="UTC"
            ),
            "regular step",
        ),
        ([], pd.DatetimeIndex([], tz="UTC"), "empty"),
        ([1.0], pd.DatetimeIndex(["2024-01-01"], tz="UTC"), "pass step="),
    ],
)
def test_bad_demand_series_are_rejected_with_the_fix(
    series, pool, scripted, values, index, message
):
    demand = series(values) if index is None else pd.Series(values, index=index, dtype=float)
    with pytest.raises(DataValidationError, match=message):
        simulate(demand, pool(), scripted([1] * 3))


def test_a_single_point_replays_with_an_explicit_step(pool, scripted):
    demand = pd.Series([8.0], index=pd.DatetimeIndex(["2024-01-01"], tz="UTC"))
    result = simulate(demand, pool(), scripted([1]), step=timedelta(minutes=10))
    assert result.gpu_hours_provisioned == pytest.approx(8 / 6)
