"""The replay engine: a demand trace, a pool and a policy in; what it would have cost out.

The numbered steps of the model are listed in the doc.
Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/engine.py`."""

from __future__ import annotations

import operator
from collections import deque
from datetime import timedelta
from typing import NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.exceptions import DataValidationError
from pipelines.simulate.result import FRAME_COLUMNS, SimResult
from pipelines.simulate.types import (
    DeclaresStart,
    FloatArray,
    History,
    IntArray,
    Policy,
    PoolLike,
    SimPool,
)
from pipelines.simulate.workqueue import WorkQueue
from policy.bounds import clamp
from policy.need import ceil_nodes

_Number = TypeVar("_Number", np.float64, np.int64)


def demand_index(
    demand: pd.Series, step: timedelta | None = None
) -> tuple[pd.DatetimeIndex, timedelta]:
    """Check a demand series and return its UTC index and step.

    Args:
        demand: GPUs per step, indexed by timezone-aware timestamps on a regular step.
        step: the step; required for a single point, else checked against the index.

    Raises:
        DataValidationError: the index is not timezone-aware, increasing and regular,
            or a value is negative, NaN or infinite; the message names the fix.
    """
    name = demand.name if demand.name is not None else "demand"
    if len(demand) == 0:
        raise DataValidationError(f"{name}: the demand series is empty; replay at least one step")
    index = demand.index
    if not isinstance(index, pd.DatetimeIndex) or index.tz is None:
        raise DataValidationError(
            f"{name}: index must be timezone-aware timestamps; localise it, e.g. "
            "series.tz_localize('UTC')"
        )
    index = index.tz_convert("UTC")
    values = demand.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(values) | (values < 0)
    if bad.any():
        first = index[int(np.argmax(bad))]
        raise DataValidationError(
            f"{name}: {int(bad.sum())} values are negative, NaN or infinite (first at "
            f"{first}); clean the series (forecaster.contract) before replaying it"
        )
    if len(index) == 1:
        if step is None:
            raise DataValidationError(f"{name}: a single point has no step; pass step=")
        return index, step
    gaps = np.unique(np.diff(index.to_numpy(dtype="datetime64[ns]").astype(np.int64)))
    if len(gaps) != 1 or gaps[0] <= 0:
        raise DataValidationError(
            f"{name}: timestamps must be strictly increasing on one regular step, found "
            f"{len(gaps)} different gaps; regularise the series (forecaster.contract) first"
        )
    inferred = pd.Timedelta(int(gaps[0]), unit="ns").to_pytimedelta()
    if step is not None and step != inferred:
        raise DataValidationError(f"{name}: step {step} given but the index steps by {inferred}")
    return index, inferred


class Observations:
    """Observation buffers, written one step at a time.

    What a policy holds (read-only views, their base included) therefore never
    contains a value from after its step: future slots are still NaN or -1. The
    closed-loop twin's replay (:mod:`pipelines.twin.offline`) builds its histories
    with it too, so its policy sees what this engine's does.
    """

    def __init__(self, pool: SimPool, index: pd.DatetimeIndex) -> None:
        n = len(index)
        self.pool, self.index = pool, index
        self.demand = np.full(n, np.nan)
        self.carried = np.full(n, np.nan)
        self.queue = np.full(n, np.nan)
        self.ready: IntArray = np.full(n, -1, dtype=np.int64)
        self.pending: IntArray = np.full(n, -1, dtype=np.int64)

    def observe(self, t: int, demand: float, carried: float, ready: int, pending: int) -> History:
        self.demand[t] = demand
        self.carried[t] = carried
        self.queue[t] = max(0.0, carried + demand - ready * self.pool.gpus_per_node)
        self.ready[t] = ready
        self.pending[t] = pending
        return History(
            pool=self.pool,
            timestamps=self.index[: t + 1],
            demand=_view(self.demand, t),
            carried=_view(self.carried, t),
            queue=_view(self.queue, t),
            ready=_view(self.ready, t),
            pending=_view(self.pending, t),
        )


def _view(buffer: npt.NDArray[_Number], t: int) -> npt.NDArray[_Number]:
    view = buffer[: t + 1]
    view.flags.writeable = False
    return view


class NodeFleet:
    """Ready nodes and booting requests (oldest first), with the scale-event counts.

    The replay's cluster; the closed-loop twin (:mod:`pipelines.twin.cluster`) holds
    one too, so the live loop's nodes follow the very rules the replay judged.
    """

    def __init__(self, ready: int, lead_steps: int) -> None:
        self.ready, self.pending, self.lead = ready, 0, lead_steps
        self._booting: deque[list[int]] = deque()  # [due step, nodes]
        self.ups = self.downs = self.added = self.removed = 0

    def boot(self, t: int) -> None:
        """Make the nodes due at ``t`` ready."""
        while self._booting and self._booting[0][0] <= t:
            arrived = self._booting.popleft()[1]
            self.ready += arrived
            self.pending -= arrived

    def resize(self, t: int, want: int) -> None:
        """Ask for nodes due at ``t + lead``, or remove: booting newest first, then ready."""
        held = self.ready + self.pending
        if want > held:
            self._booting.append([t + self.lead, want - held])
            self.pending += want - held
            self.ups, self.added = self.ups + 1, self.added + want - held
            return
        if want == held:
            return
        cut = held - want
        self.downs, self.removed = self.downs + 1, self.removed + cut
        while cut and self._booting:
            take = min(cut, self._booting[-1][1])
            self._booting[-1][1] -= take
            self.pending -= take
            cut -= take
            if self._booting[-1][1] == 0:
                self._booting.pop()
        self.ready -= cut

    def remove_ready(self, nodes: int) -> None:
        """Remove ``nodes`` ready nodes at once (one scale-down event)."""
        if nodes <= 0:
            return
        self.ready -= nodes
        self.downs, self.removed = self.downs + 1, self.removed + nodes


def _start_nodes(
    policy: Policy, pool: SimPool, first_demand: float, initial_nodes: int | None
) -> int:
    if initial_nodes is not None:
        start = initial_nodes
    elif isinstance(policy, DeclaresStart):
        start = policy.initial_nodes(pool)
    else:
        # A warm pool: capacity for the first step's work, as any running cluster has.
        start = ceil_nodes(first_demand / pool.gpus_per_node)
    return clamp(start, pool.min_nodes, pool.max_nodes)


def _desired(policy: Policy, history: History) -> int:
    answer = policy.decide(history)
    try:
        nodes = operator.index(answer)
    except TypeError as exc:
        raise TypeError(
            f"{type(policy).__name__}.decide returned {answer!r}; return whole nodes (int)"
        ) from exc
    return clamp(nodes, history.pool.min_nodes, history.pool.max_nodes)


def simulate(
    demand: pd.Series,
    pool: PoolLike,
    policy: Policy,
    *,
    initial_nodes: int | None = None,
    step: timedelta | None = None,
    carry: bool = True,
) -> SimResult:
    """Replay ``policy`` on ``demand`` for ``pool`` and account for every GPU-hour.

    Args:
        demand: GPUs of work wanted per step, indexed by UTC timestamps on a regular step.
        pool: sizes, bounds, lead time and price (a ``PoolConfig`` or :class:`SimPool`).
        policy: the policy replayed; ``reset()`` is called first.
        initial_nodes: ready nodes at step 0; default what the policy declares
            (:class:`~pipelines.simulate.types.DeclaresStart`), else enough for the first
            step's demand. Clamped to the bounds.
        step: the series step, needed only for a single point.
        carry: True carries unmet work to the next step (FIFO backlog); False drops it
            after counting it as waiting for the step (no-carry accounting).

    Raises:
        DataValidationError: the demand series breaks the rules of :func:`demand_index`.
        TypeError: the policy returned something other than an integer.
    """
    index, series_step = demand_index(demand, step)
    sim = SimPool.of(pool, series_step)
    values: FloatArray = demand.to_numpy(dtype=np.float64)
    steps, fleet, work = _replay(sim, index, values, policy, initial_nodes, carry)
    return _account(sim, index, values, steps, fleet, work, carry)


class _Steps(NamedTuple):
    """What the replay recorded at each step, for the accounting."""

    desired: IntArray
    ready: IntArray
    pending: IntArray
    served: FloatArray
    backlog: FloatArray


def _replay(
    sim: SimPool,
    index: pd.DatetimeIndex,
    values: FloatArray,
    policy: Policy,
    initial_nodes: int | None,
    carry: bool,
) -> tuple[_Steps, NodeFleet, WorkQueue]:
    """Run steps 1-5 of the model (docs/simulate.md) at every step, recording each."""
    n, gpn = len(values), sim.gpus_per_node

    desired: IntArray = np.zeros(n, dtype=np.int64)
    ready: IntArray = np.zeros(n, dtype=np.int64)
    pending: IntArray = np.zeros(n, dtype=np.int64)
    served: FloatArray = np.zeros(n)
    backlog: FloatArray = np.zeros(n)

    seen = Observations(sim, index)
    work = WorkQueue(n)
    fleet = NodeFleet(_start_nodes(policy, sim, float(values[0]), initial_nodes), sim.lead_steps)
    policy.reset()
    for t in range(n):
        fleet.boot(t)
        carried = work.size
        work.arrive(t, float(values[t]))
        history = seen.observe(t, float(values[t]), carried, fleet.ready, fleet.pending)
        desired[t] = _desired(policy, history)
        fleet.resize(t, int(desired[t]))
        ready[t], pending[t] = fleet.ready, fleet.pending
        served[t] = work.serve(t, float(fleet.ready * gpn))
        backlog[t] = work.size
        if not carry:
            work.drop(t)
    return _Steps(desired, ready, pending, served, backlog), fleet, work


def _account(
    sim: SimPool,
    index: pd.DatetimeIndex,
    values: FloatArray,
    steps: _Steps,
    fleet: NodeFleet,
    work: WorkQueue,
    carry: bool,
) -> SimResult:
    """Account for every GPU-hour of a finished replay: the per-step frame and the totals."""
    n, gpn = len(values), sim.gpus_per_node
    desired, ready, pending, served, backlog = steps
    unserved, _ = work.close(n)
    hours = sim.step_hours
    capacity = ready * float(gpn)
    frame = pd.DataFrame(
        {
            "demand_gpus": values,
            "desired_nodes": desired,
            "ready_nodes": ready,
            "pending_nodes": pending,
            "capacity_gpus": capacity,
            "served_gpus": served,
            "backlog_gpus": backlog,
        },
        index=index,
        columns=list(FRAME_COLUMNS),
    )
    held_nodes = float((ready + pending).sum())
    return SimResult(
        pool=sim,
        frame=frame,
        wait_gpu_steps=work.waited,
        gpu_hours_provisioned=held_nodes * gpn * hours,
        gpu_hours_used=float(served.sum()) * hours,
        idle_ready_gpu_hours=float((capacity - served).sum()) * hours,
        booting_gpu_hours=float(pending.sum()) * gpn * hours,
        waiting_gpu_hours=float(backlog.sum()) * hours,
        unserved_gpu_hours=unserved * hours,
        node_hours=held_nodes * hours,
        scale_ups=fleet.ups,
        scale_downs=fleet.downs,
        nodes_added=fleet.added,
        nodes_removed=fleet.removed,
        carry=carry,
    )
