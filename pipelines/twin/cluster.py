"""The twin's simulated cluster: one node pool that acts on what Foresight publishes.

Details: docs/twin.md, "Notes from the code", `pipelines/twin/cluster.py`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import numpy as np
import pandas as pd

from pipelines.simulate.engine import NodeFleet
from pipelines.simulate.result import FRAME_COLUMNS, SimResult
from pipelines.simulate.types import SimPool
from pipelines.simulate.workqueue import WorkQueue
from policy.bounds import clamp
from policy.need import ceil_nodes

Semantics = Literal["replay", "autoscaler"]
"""How the cluster applies a recommendation (docs/twin.md, "Notes from the code")."""

UNNEEDED_TIME = timedelta(minutes=10)
"""cluster-autoscaler's default ``--scale-down-unneeded-time``."""


@dataclass(frozen=True)
class Reading:
    """What the cluster's exporters report at a step, the three signals the twin pushes.

    Attributes:
        allocated_gpus: GPUs held by running work (the ready GPUs, at most, are busy).
        queue_gpus: GPUs requested by pending work: the wanted work that does not fit.
    """

    allocated_gpus: float
    queue_gpus: float
    nodes: int

    @property
    def demand_gpus(self) -> float:
        """Allocated plus queued GPUs: the work wanted now."""
        return self.allocated_gpus + self.queue_gpus


@dataclass(frozen=True)
class Published:
    """The part of a recommendation a consumer acts on.

    Attributes:
        desired_nodes: the node count recommended (a ``replay`` consumer sets it).
        headroom_pods: placeholder pods of one node each (an ``autoscaler`` consumer's
            capacity buffer).
    """

    desired_nodes: int
    headroom_pods: int


class Unneeded:
    """cluster-autoscaler's scale-down timers of one node group.

    One timer per surplus ready node, oldest first: a node needed again loses its
    timer (the longest-unneeded keep theirs), and a node unneeded for ``steps`` steps
    is due for removal.
    """

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self._since: list[int] = []

    def due(self, t: int, surplus: int) -> int:
        """Record ``surplus`` unneeded ready nodes at ``t``; return how many go now."""
        since = self._since
        del since[surplus:]
        since.extend([t] * (surplus - len(since)))
        due = sum(1 for s in since if t - s >= self.steps)
        del since[:due]
        return due


class SimCluster:
    """One simulated node pool over ``steps`` steps (docs/twin.md, "Notes from the code").

    Args:
        pool: the pool replayed (sizes, bounds, lead in steps, price).
        index: the UTC timestamps of the steps.
        initial_nodes: ready nodes at step 0, clamped to the pool's bounds.
        semantics: ``replay`` or ``autoscaler``.
        unneeded: how long a node must be unneeded before ``autoscaler`` removes it.
    """

    def __init__(
        self,
        pool: SimPool,
        index: pd.DatetimeIndex,
        initial_nodes: int,
        semantics: Semantics = "replay",
        unneeded: timedelta = UNNEEDED_TIME,
    ) -> None:
        if semantics not in ("replay", "autoscaler"):
            raise ValueError(f"semantics must be 'replay' or 'autoscaler', not {semantics!r}")
        if unneeded < timedelta(0):
            raise ValueError(f"unneeded must be >= 0, got {unneeded}")
        n = len(index)
        self.pool, self.index, self.semantics = pool, index, semantics
        self.unneeded_steps = int(np.ceil(unneeded / pool.step))
        # The replay engine's own nodes: booting, ready and the scale-event counts.
        self.fleet = NodeFleet(
            clamp(initial_nodes, pool.min_nodes, pool.max_nodes), pool.lead_steps
        )
        self._unneeded = Unneeded(self.unneeded_steps)
        self._work = WorkQueue(n)
        self._wanted = 0.0
        self._columns = {name: np.zeros(n) for name in FRAME_COLUMNS}

    @property
    def ready(self) -> int:
        """Nodes ready for work."""
        return self.fleet.ready

    @property
    def pending(self) -> int:
        """Nodes asked for and still booting."""
        return self.fleet.pending

    @property
    def ups(self) -> int:
        """Scale-up events so far."""
        return self.fleet.ups

    @property
    def downs(self) -> int:
        """Scale-down events so far."""
        return self.fleet.downs

    @property
    def added(self) -> int:
        """Nodes asked for so far."""
        return self.fleet.added

    @property
    def removed(self) -> int:
        """Nodes removed so far."""
        return self.fleet.removed

    @property
    def backlog(self) -> float:
        """GPU-steps of work carried, waiting to run."""
        return self._work.size

    def begin(self, t: int) -> None:
        """Make the nodes due at ``t`` ready."""
        self.fleet.boot(t)

    def arrive(self, t: int, demand: float) -> Reading:
        """Add the step's demand to the backlog; return what the exporters report."""
        if not np.isfinite(demand) or demand < 0:
            raise ValueError(f"demand at step {t} must be finite and >= 0, got {demand}")
        self._wanted = self._work.size + demand
        self._work.arrive(t, demand)
        self._columns["demand_gpus"][t] = demand
        capacity = float(self.ready * self.pool.gpus_per_node)
        allocated = min(self._wanted, capacity)
        return Reading(allocated, max(0.0, self._wanted - allocated), self.ready)

    def act(self, t: int, published: Published) -> None:
        """Apply the step's recommendation as the cluster's consumer does."""
        desired = clamp(published.desired_nodes, self.pool.min_nodes, self.pool.max_nodes)
        self._columns["desired_nodes"][t] = desired
        if self.semantics == "replay":
            self.fleet.resize(t, desired)
        else:
            self._autoscale(t, max(0, published.headroom_pods))

    def serve(self, t: int) -> float:
        """Run the backlog on the ready nodes (oldest first); return GPU-steps served."""
        capacity = float(self.ready * self.pool.gpus_per_node)
        served = self._work.serve(t, capacity)
        columns = self._columns
        columns["ready_nodes"][t] = self.ready
        columns["pending_nodes"][t] = self.pending
        columns["capacity_gpus"][t] = capacity
        columns["served_gpus"][t] = served
        columns["backlog_gpus"][t] = self._work.size
        return served

    # -- consumers --------------------------------------------------------------------

    def _autoscale(self, t: int, placeholders: int) -> None:
        """cluster-autoscaler: nodes for pending pods; remove nodes unneeded long enough."""
        pool = self.pool
        needed = ceil_nodes(self._wanted / pool.gpus_per_node) + placeholders
        needed = clamp(needed, pool.min_nodes, pool.max_nodes)
        held = self.ready + self.pending
        if needed > held:
            self.fleet.resize(t, needed)
        # Booting nodes are capacity CA waits for, never cancelled: only ready ones go.
        surplus = max(0, min(self.ready, held - needed))
        self.fleet.remove_ready(self._unneeded.due(t, surplus))

    # -- figures ----------------------------------------------------------------------

    def result(self) -> SimResult:
        """The run's figures with the replay's accounting (call after the last step)."""
        n = len(self.index)
        pool, columns = self.pool, self._columns
        unserved, _ = self._work.close(n)
        frame = pd.DataFrame(columns, index=self.index, columns=list(FRAME_COLUMNS))
        for name in ("desired_nodes", "ready_nodes", "pending_nodes"):
            frame[name] = frame[name].astype(np.int64)
        hours, gpn = pool.step_hours, pool.gpus_per_node
        held_nodes = float((columns["ready_nodes"] + columns["pending_nodes"]).sum())
        capacity, served = columns["capacity_gpus"], columns["served_gpus"]
        return SimResult(
            pool=pool,
            frame=frame,
            wait_gpu_steps=self._work.waited,
            gpu_hours_provisioned=held_nodes * gpn * hours,
            gpu_hours_used=float(served.sum()) * hours,
            idle_ready_gpu_hours=float((capacity - served).sum()) * hours,
            booting_gpu_hours=float(columns["pending_nodes"].sum()) * gpn * hours,
            waiting_gpu_hours=float(columns["backlog_gpus"].sum()) * hours,
            unserved_gpu_hours=unserved * hours,
            node_hours=held_nodes * hours,
            scale_ups=self.ups,
            scale_downs=self.downs,
            nodes_added=self.added,
            nodes_removed=self.removed,
        )
