"""The oracle (zero wait, fewest GPU-hours) and the static policy's hindsight search."""

from __future__ import annotations

import itertools
from datetime import timedelta

import numpy as np
import pytest

from pipelines.simulate.engine import simulate
from pipelines.simulate.oracle import OraclePolicy, zero_wait_nodes
from pipelines.simulate.reactive import ReactivePolicy
from pipelines.simulate.static import StaticPolicy, smallest_static_meeting
from pipelines.simulate.types import SimPool


def test_oracle_asks_one_lead_time_ahead_and_never_waits(series, pool):
    # L = 2; need = [1,1,1,3,1,1,1,1,5,1]; it holds the max need over [t, t+2].
    demand = series([8, 8, 8, 24, 8, 8, 8, 8, 40, 8])
    result = simulate(demand, pool(lead_minutes=10), OraclePolicy(demand))
    frame = result.frame
    assert frame["desired_nodes"].tolist() == [1, 3, 3, 3, 1, 1, 5, 5, 5, 1]
    assert frame["ready_nodes"].tolist() == [1, 1, 1, 3, 1, 1, 1, 1, 5, 1]
    assert result.waiting_gpu_hours == 0
    assert result.p95_wait == timedelta(0)
    assert result.gpu_hours_provisioned == pytest.approx(28 * 8 / 12)
    # Reactive waits on the same toy and pays for it afterwards too.
    reactive = simulate(demand, pool(lead_minutes=10), ReactivePolicy())
    assert reactive.waiting_gpu_hours > 0


def test_oracle_is_the_cheapest_zero_wait_policy_by_exhaustive_search(series, pool):
    # Every sequence of 0..3 nodes over 5 steps (L = 1): none that never waits holds
    # fewer node-steps than the oracle's 1 + 2 + 2 + 3 + 3 = 11.
    demand = series([8, 0, 16, 8, 24])
    config = pool()
    oracle = simulate(demand, config, OraclePolicy(demand))
    assert oracle.waiting_gpu_hours == 0
    assert oracle.node_hours == pytest.approx(11 / 12)

    class Fixed:
        def __init__(self, plan: tuple[int, ...]) -> None:
            self.plan = plan

        def reset(self) -> None:
            pass

        def decide(self, history):  # type: ignore[no-untyped-def]
            return self.plan[history.t]

    cheapest = min(
        run.node_hours
        for plan in itertools.product(range(4), repeat=5)
        if (run := simulate(demand, config, Fixed(plan))).waiting_gpu_hours == 0
    )
    assert cheapest == pytest.approx(oracle.node_hours)


def test_zero_wait_bound_is_the_forward_window_maximum():
    sim = SimPool(8, 0, 10, timedelta(minutes=10), 1.0, timedelta(minutes=5))
    need = zero_wait_nodes(np.array([8.0, 16.0, 0.0, 0.0, 0.0, 24.0, 8.0]), sim)
    assert need.tolist() == [2, 2, 0, 3, 3, 3, 1]


def test_oracle_catches_up_a_backlog_it_did_not_cause(series, pool):
    # Started cold (0 nodes), the oracle waits one lead time, then clears the backlog.
    demand = series([16, 16, 16, 8, 8, 8])
    result = simulate(demand, pool(), OraclePolicy(demand), initial_nodes=0)
    assert result.frame["backlog_gpus"].tolist() == [16, 16, 0, 0, 0, 0]
    assert result.unserved_gpu_hours == 0


def test_oracle_refuses_a_different_series(series, pool):
    demand = series([8, 8, 8])
    other = series([8, 8, 8], minutes=10)
    with pytest.raises(ValueError, match="built on a series"):
        simulate(other, pool(), OraclePolicy(demand))


# Static, 10-min steps, demand [8, 16, 40, 16, 8, 8]: waiting GPU-steps by node count:
# 5 nodes: 0; 4 nodes: 8 (1.33 GPU-h); 3 nodes: 16 + 8 = 24 (4 GPU-h); 2 nodes: 72.
STATIC_TOY = [8, 16, 40, 16, 8, 8]


@pytest.mark.parametrize(
    ("budget", "nodes"), [(0.0, 5), (1.5, 4), (4.0, 3), (3.99, 4), (100.0, 2), (1000.0, 2)]
)
def test_smallest_static_meeting_a_waiting_budget(series, pool, budget, nodes):
    demand = series(STATIC_TOY, minutes=10)
    choice = smallest_static_meeting(demand, pool(min_nodes=2), max_waiting_gpu_hours=budget)
    assert (choice.nodes, choice.met) == (nodes, True)
    assert choice.result.waiting_gpu_hours <= budget + 1e-9


def test_smallest_static_meeting_a_p95_budget(series, pool):
    demand = series(STATIC_TOY, minutes=10)
    assert smallest_static_meeting(demand, pool(), max_p95_wait=timedelta(0)).nodes == 5
    # 3 nodes: 24 of 96 GPU-steps wait one step (25 %): p95 = 10 min; 2 nodes: longer.
    assert smallest_static_meeting(demand, pool(), max_p95_wait=timedelta(minutes=10)).nodes == 3


def test_smallest_static_reports_an_unreachable_budget(series, pool):
    choice = smallest_static_meeting(
        series(STATIC_TOY, minutes=10), pool(max_nodes=4), max_waiting_gpu_hours=0.0
    )
    assert (choice.nodes, choice.met) == (4, False)
    with pytest.raises(ValueError, match="give max_waiting_gpu_hours"):
        smallest_static_meeting(series(STATIC_TOY), pool())


@pytest.mark.parametrize("seed", range(6))
def test_bisection_agrees_with_a_linear_scan(series, pool, seed):
    rng = np.random.default_rng(seed)
    demand = series(rng.gamma(2.0, 15.0, 60).round(2))
    config = pool(lead_minutes=10, max_nodes=20)
    budget = float(rng.uniform(0, 5))
    choice = smallest_static_meeting(demand, config, max_waiting_gpu_hours=budget)
    scan = next(
        n
        for n in range(21)
        if simulate(demand, config, StaticPolicy(n)).waiting_gpu_hours <= budget + 1e-9
    )
    assert choice.nodes == scan
