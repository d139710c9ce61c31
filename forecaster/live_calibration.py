"""Online calibration of served quantiles from stored forecasts and realised actuals.

Details: docs/forecasting.md, "Notes from the code", `forecaster/live_calibration.py`."""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.peak.calibration import AdaptiveConformal
from forecaster.types import DS, UID, Y, quantile_column

DEFAULT_GAMMA: Final = 0.002
"""ACI step size per realised forecast (as the peak replay, ``forecaster.peak``)."""
DEFAULT_WINDOW: Final = 1000
"""Most recent scores the offset is a quantile of."""


@dataclass(frozen=True)
class LiveCalibration:
    """What replaying ACI over one series' realised forecasts at one level gave.

    Attributes:
        level: the nominal quantile.
        offset: what to add to the level's quantile forecast issued now (units of y).
        live_coverage: share of the realised forecasts with ``y <= q`` (raw bounds).
        calibrated_coverage: share with ``y <= q + issued offset``.
    """

    level: float
    offset: float
    live_coverage: float
    calibrated_coverage: float
    forecasts: int


def replay(
    issued_at: npt.ArrayLike,
    realised_at: npt.ArrayLike,
    scores: npt.ArrayLike,
    level: float,
    *,
    gamma: float = DEFAULT_GAMMA,
    window: int = DEFAULT_WINDOW,
) -> LiveCalibration:
    """Replay ACI over realised forecasts of one series and level, as if fed live.

    Args:
        issued_at: when each forecast was made (any ordered type: timestamps, numbers).
        realised_at: when its actual became known (its target time).
        scores: ``y - q`` of each forecast (NaN: skipped when learning).
        level: the nominal quantile.
        gamma: step size of the ``alpha`` update.
        window: most recent scores the offset is a quantile of.

    Raises:
        ValueError: the arrays differ in length.
    """
    issued = np.asarray(issued_at)
    realised = np.asarray(realised_at)
    values = np.asarray(scores, dtype=np.float64)
    if not len(issued) == len(realised) == len(values):
        raise ValueError(
            f"issued_at, realised_at and scores must be as long as each other, got "
            f"{len(issued)}, {len(realised)}, {len(values)}"
        )
    calibrator = AdaptiveConformal(level, lead=1, gamma=gamma, window=window)
    offsets = np.zeros(len(values))
    pending: list[tuple[Any, int]] = []
    order = np.argsort(issued, kind="stable")
    start = 0
    while start < len(order):
        now = issued[order[start]]
        end = start
        while end < len(order) and issued[order[end]] == now:
            end += 1
        while pending and pending[0][0] <= now:
            _, i = heapq.heappop(pending)
            calibrator.learn(float(values[i]), float(offsets[i]))
        offset = calibrator.offset()
        for i in order[start:end]:
            offsets[i] = offset
            heapq.heappush(pending, (realised[i], int(i)))
        start = end
    while pending:
        _, i = heapq.heappop(pending)
        calibrator.learn(float(values[i]), float(offsets[i]))
    known = np.isfinite(values)
    n = int(known.sum())
    raw = float((values[known] <= 0.0).mean()) if n else float("nan")
    calibrated = float((values[known] <= offsets[known]).mean()) if n else float("nan")
    return LiveCalibration(level, calibrator.offset(), raw, calibrated, n)


def calibrate_series(
    frame: pd.DataFrame,
    levels: tuple[float, ...],
    *,
    issued: str,
    gamma: float = DEFAULT_GAMMA,
    window: int = DEFAULT_WINDOW,
) -> dict[str, dict[float, LiveCalibration]]:
    """Replay ACI per series and level over a frame of realised forecasts.

    Args:
        frame: ``unique_id, ds, y, q<level>...`` and the ``issued`` column, one row per
            realised forecast (``ds`` its target time).
        levels: the levels to calibrate; a level without its column is left out.
        issued: the column of when each forecast was made.
    """
    out: dict[str, dict[float, LiveCalibration]] = {}
    for uid, part in frame.groupby(UID, sort=True, observed=True):
        by_level: dict[float, LiveCalibration] = {}
        for level in levels:
            column = quantile_column(level)
            if column not in part.columns:
                continue
            scores = part[Y].to_numpy(dtype=np.float64) - part[column].to_numpy(np.float64)
            by_level[level] = replay(
                part[issued].to_numpy(),
                part[DS].to_numpy(),
                scores,
                level,
                gamma=gamma,
                window=window,
            )
        out[str(uid)] = by_level
    return out
