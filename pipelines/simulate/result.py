"""What one replay produced: the totals, the wait distribution and the per-step frame.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/result.py`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

import numpy as np
import pandas as pd

from pipelines.simulate.types import FloatArray, SimPool

FRAME_COLUMNS: Final = (
    "demand_gpus",
    "desired_nodes",
    "ready_nodes",
    "pending_nodes",
    "capacity_gpus",
    "served_gpus",
    "backlog_gpus",
)
"""Columns of :attr:`SimResult.frame`, indexed by the series' timestamps."""


def weighted_quantile(values: FloatArray, weights: FloatArray, q: float) -> float:
    """Return the smallest value whose cumulative weight reaches ``q`` of the total.

    Args:
        values: sorted ascending.
        weights: non-negative, aligned with ``values``.
        q: in [0, 1].

    Returns:
        The quantile, 0.0 when the weights sum to nothing.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q}")
    total = float(weights.sum())
    if total <= 0:
        return 0.0
    cumulative = np.cumsum(weights)
    # The relative slack keeps exact hand-built cases (95 of 100) from tipping over.
    index = int(np.searchsorted(cumulative, q * total * (1 - 1e-12), side="left"))
    return float(values[min(index, len(values) - 1)])


@dataclass(frozen=True)
class SimResult:
    """The outcome of replaying one policy on one demand series.

    Attributes:
        frame: per step (index: UTC timestamps) the columns of :data:`FRAME_COLUMNS`;
            nodes are those held during the step, after the step's decision.
        wait_gpu_steps: ``wait_gpu_steps[k]`` GPU-steps of work waited ``k`` steps (the
            last slot also holds work unserved at the end).
        gpu_hours_provisioned: GPUs held (ready or booting) times hours.
        gpu_hours_used: work run, in GPU-hours.
        idle_ready_gpu_hours: ready GPUs without work.
        booting_gpu_hours: GPUs of nodes asked for and not ready yet.
        waiting_gpu_hours: work left waiting, summed over steps.
        unserved_gpu_hours: work still waiting at the end of the series.
        node_hours: nodes held times hours.
        scale_ups: steps at which nodes were asked for.
        scale_downs: steps at which nodes were removed or cancelled.
        nodes_added: nodes asked for, summed.
        nodes_removed: nodes removed or cancelled, summed.
        carry: whether unmet work was carried to the next step (see
            :func:`accounting`).
    """

    pool: SimPool
    frame: pd.DataFrame
    wait_gpu_steps: FloatArray
    gpu_hours_provisioned: float
    gpu_hours_used: float
    idle_ready_gpu_hours: float
    booting_gpu_hours: float
    waiting_gpu_hours: float
    unserved_gpu_hours: float
    node_hours: float
    scale_ups: int
    scale_downs: int
    nodes_added: int
    nodes_removed: int
    carry: bool = True

    @property
    def idle_gpu_hours(self) -> float:
        """Provisioned GPU-hours that ran no work: idle ready plus booting."""
        return self.idle_ready_gpu_hours + self.booting_gpu_hours

    @property
    def cost(self) -> float:
        """Node-hours times the pool's price per node-hour."""
        return self.node_hours * self.pool.cost_per_node_hour

    def wait_quantile(self, q: float) -> timedelta:
        """Return the ``q`` quantile of the wait over units of work (docs/simulate.md)."""
        steps = np.arange(len(self.wait_gpu_steps), dtype=np.float64)
        return self.pool.step * weighted_quantile(steps, self.wait_gpu_steps, q)

    @property
    def p95_wait(self) -> timedelta:
        """The 95th percentile of the wait over units of work."""
        return self.wait_quantile(0.95)

    @property
    def p95_wait_minutes(self) -> float:
        """:attr:`p95_wait` in minutes."""
        return self.p95_wait / timedelta(minutes=1)

    @property
    def mean_wait_minutes(self) -> float:
        """Mean wait per unit of work, in minutes (0 without work)."""
        total = float(self.wait_gpu_steps.sum())
        if total <= 0:
            return 0.0
        steps = np.arange(len(self.wait_gpu_steps), dtype=np.float64)
        mean_steps = float(steps @ self.wait_gpu_steps) / total
        return mean_steps * self.pool.step / timedelta(minutes=1)

    def summary(self) -> dict[str, float | int]:
        """Return the headline figures as plain numbers (JSON-ready)."""
        return {
            "gpu_hours_provisioned": self.gpu_hours_provisioned,
            "gpu_hours_used": self.gpu_hours_used,
            "idle_gpu_hours": self.idle_gpu_hours,
            "idle_ready_gpu_hours": self.idle_ready_gpu_hours,
            "booting_gpu_hours": self.booting_gpu_hours,
            "waiting_gpu_hours": self.waiting_gpu_hours,
            "unserved_gpu_hours": self.unserved_gpu_hours,
            "p95_wait_minutes": self.p95_wait_minutes,
            "mean_wait_minutes": self.mean_wait_minutes,
            "scale_ups": self.scale_ups,
            "scale_downs": self.scale_downs,
            "nodes_added": self.nodes_added,
            "nodes_removed": self.nodes_removed,
            "node_hours": self.node_hours,
            "cost": self.cost,
        }

    def accounting(self) -> dict[str, object]:
        """How the figures were counted: step, carry of unmet work, when a node is paid."""
        return accounting(self.pool.step, carry=self.carry)


def accounting(step: timedelta, *, carry: bool) -> dict[str, object]:
    """The replay's accounting, stated beside its numbers (JSON-ready).

    Keys: ``step_minutes``; ``unmet_demand`` (``carried``: work the ready nodes cannot
    run waits, FIFO, for the next step; ``dropped``: it is counted as waiting for the
    step and leaves); ``node_paid`` (from the step it is asked for, booting included,
    to the step it is removed).
    """
    return {
        "step_minutes": step / timedelta(minutes=1),
        "unmet_demand": "carried" if carry else "dropped",
        "node_paid": "from the step it is asked for (booting included) until removed",
    }


def accounting_line(step: timedelta, *, carry: bool) -> str:
    """One sentence of the accounting, for tables and plots."""
    unmet = "carried to the next step" if carry else "dropped after one step (no carry)"
    return (
        f"Accounting: {step / timedelta(minutes=1):g}-min steps; unmet demand {unmet}; "
        "a node is paid from the step it is asked for (booting included)."
    )
