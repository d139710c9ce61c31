"""A pool's scorecard from the store: its demand and node samples and its recommendations.

Details: docs/scorecard.md, "Notes from the code", `pipelines/scorecard/load.py`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Final

import numpy as np
import pandas as pd

from forecaster.loaders import DEMAND
from forecaster.types import DS, UID, Y
from pipelines.config.pools import PoolConfig
from pipelines.config.signals import NODES
from pipelines.scorecard import compute
from pipelines.scorecard.types import PlanChange, PoolScorecard, TimelinePoint, Window
from pipelines.store.store import Store

TIMELINE_POINTS: Final = 500
"""The most samples a timeline keeps (evenly spaced), enough for a small plot."""


def pool_scorecard(
    store: Store,
    pool: PoolConfig,
    *,
    now: datetime,
    windows: Sequence[Window] = tuple(Window),
    timeline_points: int = TIMELINE_POINTS,
) -> PoolScorecard:
    """Read what a pool's scorecard needs from ``store`` and score it.

    Args:
        store: the store the service and the ingest job write.
        now: the end of every window (the service's clock).
        windows: the windows to score (at least one).
        timeline_points: the most samples of the shortest window's timeline.

    Raises:
        StoreError: the store failed.
        ValueError: no window is given.
    """
    if not windows:
        raise ValueError("name at least one window")
    start = now - max(window.duration for window in windows)
    # From one lead time earlier: the nodes sample just before the window is known, and
    # a sample there sets the step but is not scored.
    demand, nodes = _series(store, pool, start - pool.lead_time, now)
    # With fewer than two samples there is no spacing to read; the lead time stands in.
    step = _step(demand) or _step(nodes) or pool.lead_time
    # In force at t means made at or before t - lead_time, for t in [start, now).
    changes = store.recommendations.desired_in_force(
        pool.name, start - pool.lead_time, now - pool.lead_time
    )
    plan = [PlanChange(change.generated_at, change.desired_nodes) for change in changes]
    aligned = compute.align(demand, nodes, plan, lead_time=pool.lead_time, step=step, end=now)
    scores = {
        window: compute.score_window(aligned, window, end=now, gpus_per_node=pool.gpus_per_node)
        for window in windows
    }
    shortest = min(windows, key=lambda window: window.duration)
    return PoolScorecard(
        pool=pool.name,
        generated_at=now,
        gpus_per_node=pool.gpus_per_node,
        lead_time=pool.lead_time,
        cost_per_node_hour=pool.cost_per_node_hour,
        step=step,
        recommendations=len(plan),
        windows=scores,
        timeline=timeline(aligned, now - shortest.duration, timeline_points),
    )


def timeline(aligned: pd.DataFrame, since: datetime, points: int) -> tuple[TimelinePoint, ...]:
    """The aligned samples from ``since`` on, thinned evenly to at most ``points``."""
    rows = aligned[aligned[compute.DS] >= pd.Timestamp(since)]
    if len(rows) > points > 0:
        rows = rows.iloc[np.linspace(0, len(rows) - 1, points).round().astype(int)]
    return tuple(
        TimelinePoint(
            ds=ds.to_pydatetime(),
            demand_gpus=float(demand),
            nodes=_known(existed),
            planned_nodes=_known(planned),
        )
        for ds, demand, existed, planned in zip(
            rows[compute.DS],
            rows[compute.DEMAND_GPUS],
            rows[compute.NODES],
            rows[compute.PLAN_NODES],
            strict=True,
        )
    )


def _known(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _series(
    store: Store, pool: PoolConfig, start: datetime, end: datetime
) -> tuple[pd.Series, pd.Series]:
    """The pool's demand and node samples in ``[start, end)``, each indexed by time."""
    ids = {pool.series_id(DEMAND): DEMAND, pool.series_id(NODES): NODES}
    frame = store.samples.read(list(ids), start=start, end=end)
    found = {signal: frame.loc[frame[UID] == uid].set_index(DS)[Y] for uid, signal in ids.items()}
    return found[DEMAND], found[NODES]


def _step(series: pd.Series) -> timedelta | None:
    """The median spacing of a series' samples; None with fewer than two."""
    if len(series) < 2:
        return None
    stamps = pd.DatetimeIndex(series.index).tz_localize(None).to_numpy(dtype="datetime64[ns]")
    spacing = np.diff(stamps.astype(np.int64))
    return pd.Timedelta(int(np.median(spacing)), unit="ns").to_pytimedelta()
