"""The shadow scorecard of one pool: what the plan would have changed, against what happened.

Details: docs/scorecard.md, "Notes from the code", `pipelines/scorecard/compute.py`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final

import numpy as np
import pandas as pd

from forecaster.exceptions import DataValidationError
from pipelines.scorecard.types import PlanChange, Sides, Window, WindowScore

DS: Final = "ds"
HOURS: Final = "hours"
DEMAND_GPUS: Final = "demand_gpus"
NODES: Final = "nodes"
PLANNED: Final = "planned_nodes"
"""The recommendation in force one lead time earlier (NaN: none yet)."""
PLAN_NODES: Final = "plan_nodes"
"""The plan's nodes: max(nodes that existed, planned)."""

_NS_PER_HOUR: Final = 3_600 * 10**9


def score(
    demand: pd.Series,
    nodes: pd.Series,
    plan: Sequence[PlanChange],
    *,
    gpus_per_node: int,
    lead_time: timedelta,
    step: timedelta,
    end: datetime,
    windows: Iterable[Window] = tuple(Window),
) -> dict[Window, WindowScore]:
    """Score the plan against what happened over each window ending at ``end``.

    Args:
        demand: GPUs demanded (allocated + queued), indexed by tz-aware time.
        nodes: ready nodes that existed, indexed by tz-aware time.
        plan: the recommendations (any order), each in force from when it was made
            until the next.
        lead_time: the pool's lead time (>= 0).
        step: the longest a sample holds for (the series' sampling step).
        end: the end of every window ("now"; tz-aware).

    Raises:
        DataValidationError: a series is not indexed by tz-aware times.
        ValueError: ``gpus_per_node``, ``lead_time`` or ``step`` is out of range.
    """
    aligned = align(demand, nodes, plan, lead_time=lead_time, step=step, end=end)
    return {
        window: score_window(aligned, window, end=end, gpus_per_node=gpus_per_node)
        for window in windows
    }


def align(
    demand: pd.Series,
    nodes: pd.Series,
    plan: Sequence[PlanChange],
    *,
    lead_time: timedelta,
    step: timedelta,
    end: datetime,
) -> pd.DataFrame:
    """One row per demand sample before ``end``: its hours, the nodes and the plan's.

    Returns:
        Columns ``ds`` (UTC), ``hours``, ``demand_gpus``, ``nodes``, ``planned_nodes``
        and ``plan_nodes`` (NaN where unknown), sorted by ``ds``.

    Raises:
        DataValidationError: a series is not indexed by tz-aware times.
        ValueError: ``lead_time`` is negative or ``step`` is not positive.
    """
    if step <= timedelta(0) or lead_time < timedelta(0):
        raise ValueError(f"step must be positive and lead_time >= 0, not {step}, {lead_time}")
    end_ns = _ns(end)
    step_ns = pd.Timedelta(step).value
    wanted = _clean(demand, "demand")
    wanted = wanted[_stamps(wanted) < end_ns]
    times = _stamps(wanted)
    following = np.append(times[1:], end_ns)
    hours = np.minimum(following - times, step_ns) / _NS_PER_HOUR
    existed = _as_of(_clean(nodes, "nodes"), times, step_ns)
    planned = _in_force(plan, times - pd.Timedelta(lead_time).value)
    return pd.DataFrame(
        {
            DS: wanted.index,
            HOURS: hours,
            DEMAND_GPUS: wanted.to_numpy(dtype=np.float64),
            NODES: existed,
            PLANNED: planned,
            # NaN when either is unknown: numpy's maximum propagates it.
            PLAN_NODES: np.maximum(existed, planned),
        }
    )


def score_window(
    aligned: pd.DataFrame, window: Window, *, end: datetime, gpus_per_node: int
) -> WindowScore:
    """Score one window ending at ``end`` from the rows of :func:`align`.

    Raises:
        ValueError: ``gpus_per_node`` is below 1.
    """
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be >= 1, not {gpus_per_node}")
    start = end - window.duration
    inside = aligned[(aligned[DS] >= pd.Timestamp(start)) & (aligned[DS] < pd.Timestamp(end))]
    covered = inside[np.isfinite(inside[[DEMAND_GPUS, PLAN_NODES]].to_numpy()).all(axis=1)]
    hours = covered[HOURS].to_numpy()
    demand = covered[DEMAND_GPUS].to_numpy()
    actual = covered[NODES].to_numpy()
    planned = covered[PLAN_NODES].to_numpy()
    window_hours = window.duration / timedelta(hours=1)
    return WindowScore(
        window=window,
        start=start,
        end=end,
        waiting_gpu_hours=Sides(
            actual=_waiting(demand, actual, gpus_per_node, hours),
            plan=_waiting(demand, planned, gpus_per_node, hours),
        ),
        node_hours=Sides(actual=float(np.sum(actual * hours)), plan=float(np.sum(planned * hours))),
        samples=len(covered),
        coverage=min(1.0, float(np.sum(hours)) / window_hours),
    )


def _waiting(demand: np.ndarray, nodes: np.ndarray, gpus_per_node: int, hours: np.ndarray) -> float:
    return float(np.sum(np.maximum(0.0, demand - nodes * gpus_per_node) * hours))


def _ns(moment: datetime | pd.Timestamp) -> int:
    stamp = pd.Timestamp(moment)
    if stamp.tzinfo is None:
        raise DataValidationError(
            f"the scorecard needs tz-aware times, got {stamp}; pass UTC times"
        )
    return int(stamp.value)


def _stamps(series: pd.Series) -> np.ndarray:
    """The series' times as int64 nanoseconds since the epoch (UTC)."""
    index = pd.DatetimeIndex(series.index).tz_convert("UTC").tz_localize(None)
    return index.to_numpy(dtype="datetime64[ns]").astype(np.int64)


def _clean(series: pd.Series, name: str) -> pd.Series:
    """The series sorted by time with NaN dropped; its index must be tz-aware."""
    index = series.index
    if not isinstance(index, pd.DatetimeIndex) or index.tz is None:
        raise DataValidationError(
            f"the scorecard's {name} series must be indexed by tz-aware times "
            f"(got {type(index).__name__}); index it by the frame's ds column"
        )
    kept = series.astype(np.float64).dropna()
    # Nanoseconds whatever unit the caller's index has: the arithmetic below is in ns.
    kept.index = pd.DatetimeIndex(kept.index).tz_convert("UTC").as_unit("ns")
    return kept[~kept.index.duplicated(keep="last")].sort_index()


def _as_of(series: pd.Series, times: np.ndarray, tolerance_ns: int) -> np.ndarray:
    """The newest value at or before each time, if it is less than ``tolerance_ns`` old."""
    out = np.full(len(times), np.nan)
    if series.empty:
        return out
    known = _stamps(series)
    pos = np.searchsorted(known, times, side="right") - 1
    safe = np.clip(pos, 0, None)
    fresh = (pos >= 0) & (times - known[safe] < tolerance_ns)
    out[fresh] = series.to_numpy()[safe[fresh]]
    return out


def _in_force(plan: Sequence[PlanChange], times: np.ndarray) -> np.ndarray:
    """The nodes of the newest plan change made at or before each time (NaN: none)."""
    out = np.full(len(times), np.nan)
    if not plan:
        return out
    ordered = sorted(plan, key=lambda change: _ns(change.at))
    made = np.array([_ns(change.at) for change in ordered], dtype=np.int64)
    asked = np.array([float(change.nodes) for change in ordered])
    pos = np.searchsorted(made, times, side="right") - 1
    out[pos >= 0] = asked[pos[pos >= 0]]
    return out
