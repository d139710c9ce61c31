"""Waits and GPU-hour accounting: a hand-checked toy and identities on random inputs."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from pipelines.simulate.engine import simulate
from pipelines.simulate.oracle import OraclePolicy
from pipelines.simulate.reactive import ReactivePolicy
from pipelines.simulate.result import weighted_quantile
from pipelines.simulate.static import StaticPolicy
from pipelines.simulate.types import History

HOUR_PER_STEP = 1 / 6  # 10-minute steps


def test_six_step_toy_waits_by_hand(series, pool):
    # Static 2 nodes x 8 GPUs = 16 GPUs per step, demand [10, 30, 20, 0, 4, 10]:
    # t1: 16 run, 14 wait; t2: the 14 (waited 1) + 2 new run, 18 wait; t3: 16 of them
    # run (waited 1), 2 wait; t4: those 2 (waited 2) + 4 new; t5: 10 new.
    demand = series([10, 30, 20, 0, 4, 10], minutes=10)
    result = simulate(demand, pool(lead_minutes=10), StaticPolicy(2))
    assert result.frame["backlog_gpus"].tolist() == [0, 14, 18, 2, 0, 0]
    assert result.frame["served_gpus"].tolist() == [10, 16, 16, 16, 6, 10]
    assert result.wait_gpu_steps[:3].tolist() == [42, 30, 2]
    assert result.wait_gpu_steps[3:].sum() == 0
    # Waiting GPU-hours: backlog summed (34 GPU-steps) = waits summed (30x1 + 2x2).
    assert result.waiting_gpu_hours == pytest.approx(34 * HOUR_PER_STEP)
    # p95 over 74 GPU-steps of work: 42 waited 0 (57 %), 72 waited <= 1 step (97 %).
    assert result.p95_wait == timedelta(minutes=10)
    assert result.p95_wait_minutes == 10.0
    assert result.wait_quantile(0.5) == timedelta(0)
    assert result.wait_quantile(0.99) == timedelta(minutes=20)
    assert result.mean_wait_minutes == pytest.approx(34 / 74 * 10)
    assert result.gpu_hours_provisioned == pytest.approx(96 * HOUR_PER_STEP)
    assert result.gpu_hours_used == pytest.approx(74 * HOUR_PER_STEP)
    assert result.idle_gpu_hours == pytest.approx(22 * HOUR_PER_STEP)
    assert result.unserved_gpu_hours == 0
    assert result.cost == pytest.approx(2.0 * 3.0)  # 2 nodes x 1 hour x 3.0


def test_work_still_waiting_at_the_end_counts_its_wait_so_far(series, pool):
    # One node, demand [16, 16]: t0 runs 8, 8 wait; t1 runs those 8 (waited 1 step) and
    # all 16 of t1 are still waiting when the series ends, counted as waiting 1 step.
    result = simulate(series([16, 16], minutes=10), pool(), StaticPolicy(1))
    assert result.unserved_gpu_hours == pytest.approx(16 * HOUR_PER_STEP)
    assert result.wait_gpu_steps.tolist() == [8, 24, 0]
    assert result.waiting_gpu_hours == pytest.approx(24 * HOUR_PER_STEP)


def test_weighted_quantile_is_the_smallest_value_reaching_the_share():
    values = np.array([0.0, 1.0, 2.0])
    assert weighted_quantile(values, np.array([95.0, 5.0, 0.0]), 0.95) == 0.0
    assert weighted_quantile(values, np.array([94.0, 5.0, 1.0]), 0.95) == 1.0
    assert weighted_quantile(values, np.zeros(3), 0.95) == 0.0
    with pytest.raises(ValueError, match="q must be"):
        weighted_quantile(values, np.ones(3), 1.5)


class _RandomPolicy:
    """Asks for a random count each step (seeded): exercises every engine path."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def decide(self, history: History) -> int:
        return int(self.rng.integers(0, 12))


@pytest.mark.parametrize("seed", range(24))
def test_accounting_identities_hold_on_random_inputs(series, pool, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 120))
    bursts = rng.random(n) < 0.1
    values = rng.gamma(2.0, 12.0, n) + bursts * rng.uniform(20, 80, n)
    demand = series(np.round(values, 3), minutes=int(rng.choice([1, 5, 10])))
    config = pool(lead_minutes=float(rng.uniform(1, 25)), max_nodes=int(rng.integers(4, 30)))
    policies = [
        ReactivePolicy("packed"),
        ReactivePolicy("spread"),
        StaticPolicy(int(rng.integers(0, 10))),
        OraclePolicy(demand),
        _RandomPolicy(seed),
    ]
    for policy in policies:
        result = simulate(demand, config, policy)
        frame, hours = result.frame, result.pool.step_hours
        # Provisioned = used + idle, with idle = ready-without-work + booting.
        assert result.gpu_hours_provisioned == pytest.approx(
            result.gpu_hours_used + result.idle_ready_gpu_hours + result.booting_gpu_hours
        )
        assert result.gpu_hours_provisioned == pytest.approx(result.node_hours * 8)
        # Work is conserved: what arrived either ran or is still waiting.
        arrived = frame["demand_gpus"].sum() * hours
        assert arrived == pytest.approx(result.gpu_hours_used + result.unserved_gpu_hours)
        # Every unit is in the wait distribution once; its waits sum to the backlog.
        assert result.wait_gpu_steps.sum() * hours == pytest.approx(arrived)
        waits = np.arange(len(result.wait_gpu_steps)) @ result.wait_gpu_steps
        assert waits * hours == pytest.approx(result.waiting_gpu_hours)
        # Never more served than ready capacity, never a negative backlog, bounds hold.
        assert (frame["served_gpus"] <= frame["capacity_gpus"] + 1e-9).all()
        assert (frame["backlog_gpus"] >= 0).all()
        assert frame["desired_nodes"].between(0, config.max_nodes).all()
        held = frame["ready_nodes"] + frame["pending_nodes"]
        assert (held == frame["desired_nodes"]).all()
