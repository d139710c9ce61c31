"""The simulator's shared values: the pool it replays, what a policy sees, the Policy protocol.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/types.py`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
import pandas as pd

from policy.config import PoolShape

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class PoolLike(PoolShape, Protocol):
    """The part of a pool config the simulator needs; ``PoolConfig`` satisfies it."""

    @property
    def cost_per_node_hour(self) -> float:
        """Price of one node-hour."""
        ...


@dataclass(frozen=True)
class SimPool:
    """A pool as the simulator replays it, with the lead time in whole steps.

    Attributes:
        gpus_per_node: GPUs on one node, >= 1.
        min_nodes: the fewest nodes, >= 0.
        max_nodes: the most nodes, >= ``min_nodes``.
        lead_time: time from requesting a node to it running work, > 0.
        cost_per_node_hour: price of one node-hour, >= 0.
        step: the demand series' step, > 0.
    """

    gpus_per_node: int
    min_nodes: int
    max_nodes: int
    lead_time: timedelta
    cost_per_node_hour: float
    step: timedelta

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise ValueError(f"gpus_per_node must be >= 1, got {self.gpus_per_node}")
        if not 0 <= self.min_nodes <= self.max_nodes:
            raise ValueError(
                f"need 0 <= min_nodes <= max_nodes, got {self.min_nodes} and {self.max_nodes}"
            )
        if self.lead_time <= timedelta(0) or self.step <= timedelta(0):
            raise ValueError(
                f"lead_time and step must be positive, got {self.lead_time} and {self.step}"
            )
        if not (math.isfinite(self.cost_per_node_hour) and self.cost_per_node_hour >= 0):
            raise ValueError(f"cost_per_node_hour must be >= 0, got {self.cost_per_node_hour}")

    @classmethod
    def of(cls, pool: PoolLike, step: timedelta) -> SimPool:
        """Return the simulator's view of a pool config replayed on ``step``."""
        return cls(
            gpus_per_node=int(pool.gpus_per_node),
            min_nodes=int(pool.min_nodes),
            max_nodes=int(pool.max_nodes),
            lead_time=pool.lead_time,
            cost_per_node_hour=float(pool.cost_per_node_hour),
            step=step,
        )

    @property
    def lead_steps(self) -> int:
        """The lead time rounded *up* to whole steps (at least 1).

        Rounding up never lets a node work before it could in reality: a 7-minute lead
        on a 5-minute step makes a node requested at step t usable at step t + 2.
        """
        return max(1, -(-self.lead_time // self.step))

    @property
    def step_hours(self) -> float:
        """The step in hours, the factor from GPU-steps to GPU-hours."""
        return self.step / timedelta(hours=1)

    def steps(self, duration: timedelta) -> float:
        """Return ``duration`` in steps (not rounded)."""
        return duration / self.step


@dataclass(frozen=True)
class History:
    """What a policy sees at step ``t``: every observation up to and including ``t``.

    The arrays are read-only views of length ``t + 1``. Values of step ``t`` are
    observed *before* the policy's decision at ``t``:

    Attributes:
        pool: the replayed pool (sizes, bounds, lead time in steps).
        timestamps: the UTC timestamps of steps ``0..t``.
        demand: the trace's demand in GPUs per step (GPUs of work wanted during the step).
        carried: GPUs of work carried into the step unserved (the simulated backlog).
        queue: GPUs of work that the ready nodes cannot run this step (pending work, what
            cluster-autoscaler sees as pending pods): ``max(0, carried + demand - ready
            * gpus_per_node)``.
        ready: nodes ready for work at the step (those due at the step included).
        pending: nodes asked for and still booting.
    """

    pool: SimPool
    timestamps: pd.DatetimeIndex
    demand: FloatArray
    carried: FloatArray
    queue: FloatArray
    ready: IntArray
    pending: IntArray

    @property
    def t(self) -> int:
        """The index of the current step."""
        return len(self.demand) - 1

    @property
    def now(self) -> pd.Timestamp:
        """The timestamp of the current step."""
        return self.timestamps[-1]

    @property
    def wanted_now(self) -> float:
        """GPUs of work wanted now: the carried backlog plus this step's demand."""
        return float(self.carried[-1] + self.demand[-1])

    @property
    def ready_now(self) -> int:
        """Nodes ready now."""
        return int(self.ready[-1])

    @property
    def pending_now(self) -> int:
        """Nodes booting now."""
        return int(self.pending[-1])


class Policy(Protocol):
    """A scaling policy replayed by the simulator.

    ``reset`` is called once before each run, so one instance can be replayed on many
    series; ``decide`` once per step, in order, and returns the desired total of nodes
    (ready plus booting). The engine clamps the answer to the pool's bounds.
    """

    def reset(self) -> None:
        """Forget everything from an earlier run."""
        ...

    def decide(self, history: History) -> int:
        """Return the desired total nodes after observing ``history`` (steps ``0..t``)."""
        ...


@runtime_checkable
class DeclaresStart(Protocol):
    """A policy that says how many ready nodes its run starts with (e.g. a fixed size)."""

    def initial_nodes(self, pool: SimPool) -> int:
        """Return the ready nodes at step 0."""
        ...
