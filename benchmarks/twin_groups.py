"""Several node groups that the same work runs on, grown where the priority expander says.

The multi-pool twin's cluster (``benchmarks/twin_multipool.py``); details: docs/twin.md,
"Notes from the code", `benchmarks/twin_groups.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.twin_expander import Priorities, choose
from pipelines.simulate.engine import NodeFleet
from pipelines.simulate.types import SimPool
from pipelines.simulate.workqueue import WorkQueue
from pipelines.twin.cluster import UNNEEDED_TIME, Published, Reading, Semantics, Unneeded
from policy.bounds import clamp
from policy.need import ceil_nodes


@dataclass(frozen=True)
class Group:
    """One node group of the cluster: Foresight's pool and cluster-autoscaler's group.

    Attributes:
        name: the pool's name (its series and recommendation).
        node_group_id: the id the expander's regexes match.
        pool: sizes, bounds, lead in steps and price.
        initial_nodes: ready nodes at step 0.
    """

    name: str
    node_group_id: str
    pool: SimPool
    initial_nodes: int


@dataclass
class GroupResult:
    """A multi-group run's figures.

    Attributes:
        waiting_gpu_hours: the shared backlog summed over steps, in GPU-hours.
        groups: per group: node-hours, cost, scale-ups and downs, nodes added by the
            expander's choice for pending pods (``expander_nodes``).
        frame: per step and group: desired, ready and booting nodes.
        choices: ``(step time, node group id, nodes)`` of each expander choice.
    """

    step: timedelta
    waiting_gpu_hours: float
    groups: dict[str, dict[str, float]]
    frame: pd.DataFrame
    choices: list[tuple[pd.Timestamp, str, int]] = field(default_factory=list)

    @property
    def node_hours(self) -> float:
        """Node-hours of every group."""
        return sum(g["node_hours"] for g in self.groups.values())

    @property
    def cost(self) -> float:
        """The price of every group's node-hours."""
        return sum(g["cost"] for g in self.groups.values())

    def summary(self) -> dict[str, Any]:
        """The figures as plain data."""
        return {
            "waiting_gpu_hours": self.waiting_gpu_hours,
            "node_hours": self.node_hours,
            "cost": self.cost,
            "groups": self.groups,
            "expander_choices": [(str(ts), g, n) for ts, g, n in self.choices],
        }


class GroupCluster:
    """Node groups sharing one queue of work (docs/twin.md, "Notes from the code").

    Args:
        groups: the groups, in the order running work fills them.
        index: the UTC timestamps of the steps.
        semantics: ``replay`` or ``autoscaler``.
        unneeded: cluster-autoscaler's scale-down unneeded time.

    Raises:
        ValueError: no group, duplicate names, or groups of different node sizes.
    """

    def __init__(
        self,
        groups: Sequence[Group],
        index: pd.DatetimeIndex,
        semantics: Semantics = "autoscaler",
        unneeded: timedelta = UNNEEDED_TIME,
    ) -> None:
        if not groups or len({g.name for g in groups}) != len(groups):
            raise ValueError("give at least one group, each with its own name")
        sizes = {g.pool.gpus_per_node for g in groups}
        if len(sizes) != 1:
            raise ValueError(f"the groups must share one node size (GPUs per node), got {sizes}")
        self.groups, self.index, self.semantics = tuple(groups), index, semantics
        self.gpn = sizes.pop()
        self.fleets = {
            g.name: NodeFleet(
                clamp(g.initial_nodes, g.pool.min_nodes, g.pool.max_nodes), g.pool.lead_steps
            )
            for g in groups
        }
        steps = {g.name: int(np.ceil(unneeded / g.pool.step)) for g in groups}
        self._unneeded = {name: Unneeded(n) for name, n in steps.items()}
        self._work = WorkQueue(len(index))
        self._wanted = 0.0
        self._last_choice = groups[0].name
        self._backlog = np.zeros(len(index))
        self._rows: list[dict[str, Any]] = []
        self.choices: list[tuple[pd.Timestamp, str, int]] = []

    def begin(self, t: int) -> None:
        """Make the nodes due at ``t`` ready."""
        for fleet in self.fleets.values():
            fleet.boot(t)

    def arrive(self, t: int, demand: float) -> dict[str, Reading]:
        """Add the step's work to the backlog; return each pool's readings."""
        if not np.isfinite(demand) or demand < 0:
            raise ValueError(f"demand at step {t} must be finite and >= 0, got {demand}")
        self._wanted = self._work.size + demand
        self._work.arrive(t, demand)
        left, allocated = self._wanted, {}
        for g in self.groups:
            allocated[g.name] = min(left, float(self.fleets[g.name].ready * self.gpn))
            left -= allocated[g.name]
        queued = dict.fromkeys(allocated, 0.0)
        for g in self.groups:
            queued[g.name] = min(left, float(self.fleets[g.name].pending * self.gpn))
            left -= queued[g.name]
        queued[self._last_choice] += left
        return {
            name: Reading(allocated[name], queued[name], self.fleets[name].ready)
            for name in allocated
        }

    def act(self, t: int, published: Mapping[str, Published], priorities: Priorities) -> None:
        """Apply each pool's recommendation; under ``autoscaler`` the expander places pods."""
        desired = {
            g.name: clamp(published[g.name].desired_nodes, g.pool.min_nodes, g.pool.max_nodes)
            for g in self.groups
        }
        ts = self.index[t]
        self._rows.extend({"ts": ts, "group": n, "desired": d} for n, d in desired.items())
        if self.semantics == "replay":
            for name, nodes in desired.items():
                self.fleets[name].resize(t, nodes)
            return
        placeholders = {name: max(0, published[name].headroom_pods) for name in desired}
        self._autoscale(t, placeholders, priorities)

    def _autoscale(self, t: int, placeholders: Mapping[str, int], priorities: Priorities) -> None:
        """Real pods on held nodes, the expander for the pending ones, then placeholders."""
        fleets = self.fleets
        held = {name: f.ready + f.pending for name, f in fleets.items()}
        left = ceil_nodes(self._wanted / self.gpn)
        real: dict[str, int] = {}
        for g in self.groups:
            real[g.name] = min(held[g.name], left)
            left -= real[g.name]
        target = dict(held)
        by_id = {g.node_group_id: g for g in self.groups}
        while left > 0:
            room = [g.node_group_id for g in self.groups if target[g.name] < g.pool.max_nodes]
            picked = choose(priorities, room)
            if picked is None:
                break  # every group is at its max size: the pods stay pending
            group = by_id[picked]
            nodes = min(left, group.pool.max_nodes - target[group.name])
            target[group.name] += nodes
            real[group.name] += nodes
            left -= nodes
            self._last_choice = group.name
            self.choices.append((self.index[t], picked, nodes))
        for g in self.groups:
            name = g.name
            need = clamp(real[name] + placeholders[name], g.pool.min_nodes, g.pool.max_nodes)
            fleet = fleets[name]
            if max(need, target[name]) > held[name]:
                fleet.resize(t, max(need, target[name]))
            surplus = max(0, min(fleet.ready, fleet.ready + fleet.pending - need))
            fleet.remove_ready(self._unneeded[name].due(t, surplus))

    def serve(self, t: int) -> float:
        """Run the backlog on every group's ready nodes; return GPU-steps served."""
        capacity = float(sum(f.ready for f in self.fleets.values()) * self.gpn)
        served = self._work.serve(t, capacity)
        self._backlog[t] = self._work.size
        row = self._rows[-len(self.groups) :]
        for entry in row:
            fleet = self.fleets[entry["group"]]
            entry["ready"], entry["pending"] = fleet.ready, fleet.pending
        return served

    def result(self) -> GroupResult:
        """The run's figures (call after the last step)."""
        frame = pd.DataFrame(self._rows)
        groups: dict[str, dict[str, float]] = {}
        for g in self.groups:
            hours = g.pool.step_hours
            mine = frame[frame["group"] == g.name]
            node_hours = float((mine["ready"] + mine["pending"]).sum()) * hours
            fleet = self.fleets[g.name]
            groups[g.name] = {
                "node_hours": node_hours,
                "cost": node_hours * g.pool.cost_per_node_hour,
                "scale_ups": fleet.ups,
                "scale_downs": fleet.downs,
                "nodes_added": fleet.added,
                "expander_nodes": sum(n for _, gid, n in self.choices if gid == g.node_group_id),
            }
        hours = self.groups[0].pool.step_hours
        return GroupResult(
            step=self.groups[0].pool.step,
            waiting_gpu_hours=float(self._backlog.sum()) * hours,
            groups=groups,
            frame=frame,
            choices=list(self.choices),
        )
