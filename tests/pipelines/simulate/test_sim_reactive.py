"""Reactive (cluster-autoscaler) policy: scale-up for pending work and each scale-down flag.

Toys run on 5-minute steps with 8-GPU nodes; the flags' defaults are 10 minutes (two
steps) and a 0.5 utilisation threshold.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from pipelines.simulate.engine import simulate
from pipelines.simulate.reactive import ReactivePolicy

MIN = timedelta(minutes=1)


def _first_drop(ready: list[int]) -> int:
    """Return the first step with fewer ready nodes than the step before."""
    return next(t for t in range(1, len(ready)) if ready[t] < ready[t - 1])


def test_scale_up_asks_for_the_pending_work_at_once(series, pool):
    # L = 1. t1: 24 wanted on 1 node -> ask 3; t2: 16 waiting + 24 new = 40 -> ask 5.
    result = simulate(series([8, 24, 24, 24, 24]), pool(), ReactivePolicy())
    assert result.frame["desired_nodes"].tolist() == [1, 3, 5, 5, 5]
    assert result.frame["backlog_gpus"].tolist() == [0, 16, 16, 0, 0]
    assert result.wait_gpu_steps[:2].tolist() == [72, 32]
    assert result.scale_ups == 2


def test_scale_up_counts_nodes_already_booting(series, pool):
    # L = 2. t1 asks for 1 more (due t3); at t2 the 8 waiting + 8 new fit on 1 ready + 1
    # booting, so nothing more is asked for.
    result = simulate(series([8, 16, 8, 8]), pool(lead_minutes=10), ReactivePolicy())
    assert result.frame["desired_nodes"].tolist() == [1, 2, 2, 2]
    assert result.scale_ups == 1


@pytest.mark.parametrize(("unneeded", "drop_at"), [(0, 3), (5, 4), (10, 5), (20, 7)])
def test_unneeded_time_sets_when_an_empty_node_goes(series, pool, unneeded, drop_at):
    # From t3 one of two nodes is empty; it goes once it has been empty `unneeded` min.
    policy = ReactivePolicy(scale_down_unneeded_time=unneeded * MIN)
    result = simulate(series([16] * 3 + [8] * 7), pool(), policy)
    ready = result.frame["ready_nodes"].tolist()
    assert _first_drop(ready) == drop_at
    assert ready[-1] == 1
    assert result.scale_downs == 1


@pytest.mark.parametrize(("delay", "drop_at"), [(0, 3), (10, 3), (20, 5), (30, 7)])
def test_delay_after_add_holds_scale_down_after_a_scale_up(series, pool, delay, drop_at):
    # Scale-up at t1 (ready t2, which runs t1's 8 waiting GPUs and t2's 8); from t3 a
    # node is empty. Unneeded time 0 isolates the delay: removal at the first t >= 3
    # with (t - 1) x 5 min >= delay.
    policy = ReactivePolicy(
        scale_down_unneeded_time=timedelta(0), scale_down_delay_after_add=delay * MIN
    )
    result = simulate(series([8, 16] + [8] * 8), pool(), policy)
    assert result.scale_ups == 1
    assert _first_drop(result.frame["ready_nodes"].tolist()) == drop_at


@pytest.mark.parametrize(("threshold", "final"), [(0.5, 2), (0.4, 2), (0.3, 4), (0.375, 4)])
def test_utilisation_threshold_decides_whether_nodes_are_unneeded(series, pool, threshold, final):
    # Spread: 12 GPUs over 4 nodes is 0.375 utilisation on each; below the threshold the
    # two nodes the others can absorb go after 10 min, at or above it none does.
    policy = ReactivePolicy("spread", scale_down_utilization_threshold=threshold)
    result = simulate(series([32, 32] + [12] * 6), pool(), policy)
    ready = result.frame["ready_nodes"].tolist()
    assert ready[-1] == final
    if final == 2:
        assert _first_drop(ready) == 4


def test_packed_nodes_are_never_unneeded_at_threshold_zero(series, pool):
    result = simulate(series([32, 32] + [8] * 6), pool(), ReactivePolicy("packed"))
    assert result.frame["ready_nodes"].iloc[-1] == 1
    zero = ReactivePolicy("packed", scale_down_utilization_threshold=0.0)
    assert simulate(series([32, 32] + [8] * 6), pool(), zero).frame["ready_nodes"].iloc[-1] == 4


def test_packed_and_spread_differ_where_work_could_be_packed(series, pool):
    # 20 GPUs on 4 nodes: packed fills 3 nodes and empties one (removed after 10 min);
    # spread puts 0.625 on every node, above 0.5, so all 4 stay.
    demand = series([32, 32] + [20] * 6)
    packed = simulate(demand, pool(), ReactivePolicy("packed"))
    spread = simulate(demand, pool(), ReactivePolicy("spread"))
    assert packed.frame["ready_nodes"].tolist() == [4, 4, 4, 4, 3, 3, 3, 3]
    assert spread.frame["ready_nodes"].tolist() == [4] * 8
    assert packed.gpu_hours_provisioned == pytest.approx(28 * 8 / 12)
    assert spread.gpu_hours_provisioned == pytest.approx(32 * 8 / 12)
    assert packed.waiting_gpu_hours == spread.waiting_gpu_hours == 0


def test_a_node_that_is_needed_again_restarts_its_clock(series, pool):
    # Empty at t2, needed at t3, empty again from t4: the 10 min count from t4, not t2.
    result = simulate(series([16, 16, 8, 16, 8, 8, 8, 8]), pool(), ReactivePolicy())
    assert _first_drop(result.frame["ready_nodes"].tolist()) == 6


def test_invalid_flags_are_refused():
    with pytest.raises(ValueError, match="utilisation must be one of"):
        ReactivePolicy("even")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threshold"):
        ReactivePolicy(scale_down_utilization_threshold=1.5)
    with pytest.raises(ValueError, match=">= 0"):
        ReactivePolicy(scale_down_unneeded_time=-MIN)


def test_reset_forgets_an_earlier_run(series, pool):
    policy = ReactivePolicy()
    demand = series([16, 16, 8, 8, 8, 8])
    first = simulate(demand, pool(), policy)
    second = simulate(demand, pool(), policy)
    assert first.frame.equals(second.frame)
