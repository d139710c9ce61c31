"""Features of one origin, in the series' own scale, from data up to the origin only.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/features.py`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from forecaster.peak.frames import SeriesInput
from forecaster.peak.scale import recent_scale
from forecaster.peak.types import ROLES, FloatArray

CHANGE_STEPS: tuple[int, ...] = (1, 2, 3, 6, 12)
SHORT_WINDOW = 12
"""Steps of the short volatility window (2 hours at 10 min)."""


def feature_names(leads: Sequence[int]) -> list[str]:
    """Return the feature columns, in order, for the given leads."""
    names = [f"change_{k}" for k in CHANGE_STEPS]
    names += ["vol_short", *(f"vol_lead_{lead}" for lead in leads)]
    names += ["level_vs_mean", "below_max", "above_min", "rise_share", "flat_share"]
    names += ["since_jump", "hour", "weekday", "log_level", "log_scale"]
    names += ["queue", "queue_change_1", "queue_change_3", "queue_share"]
    for role in ROLES[1:]:
        names += [f"{role}", f"{role}_change_1", f"{role}_change_3"]
    return names


def _lag(x: FloatArray, k: int) -> FloatArray:
    out = np.full(len(x), np.nan)
    out[k:] = x[: len(x) - k]
    return out


def _steps_since(event: np.ndarray, cap: int) -> FloatArray:
    """Steps since the latest ``True`` at or before each index (``cap`` if none)."""
    index = np.arange(len(event))
    last = np.maximum.accumulate(np.where(event, index, -1))
    since = np.where(last >= 0, index - last, cap)
    return np.minimum(since, cap).astype(np.float64)


def series_features(
    item: SeriesInput,
    leads: Sequence[int],
    day: int,
) -> tuple[FloatArray, FloatArray]:
    """Return ``(X, scale)`` for every origin of one series.

    Args:
        item: the target series and its covariates.
        leads: the lead times (steps) the model forecasts.
        day: steps in a day.

    Returns:
        ``X`` of shape ``(n, len(feature_names(leads)))`` and the scale
        per origin.
    """
    y = item.y
    s = recent_scale(y, day)
    series = pd.Series(y)
    change = series.diff()
    cols: list[FloatArray] = [(y - _lag(y, k)) / s for k in CHANGE_STEPS]
    cols.append(change.rolling(SHORT_WINDOW, min_periods=2).std().to_numpy() / s)
    for lead in leads:
        lead_change = series.diff(lead).rolling(day, min_periods=2).std().to_numpy()
        cols.append(lead_change / s)
    rolling = series.rolling(day, min_periods=1)
    cols.append((y - rolling.mean().to_numpy()) / s)
    cols.append((rolling.max().to_numpy() - y) / s)
    cols.append((y - rolling.min().to_numpy()) / s)
    cols.append((change > 0).astype(float).rolling(day, min_periods=1).mean().to_numpy())
    cols.append((change == 0).astype(float).rolling(day, min_periods=1).mean().to_numpy())
    cols.append(_steps_since((change > s).to_numpy(), day))
    cols.append(np.asarray(item.ds.hour + item.ds.minute / 60.0, dtype=np.float64))
    cols.append(np.asarray(item.ds.dayofweek, dtype=np.float64))
    cols.append(np.log1p(np.abs(rolling.mean().to_numpy())))
    cols.append(np.log1p(s))
    cols += _queue_features(item.covariates.get("queue"), y, s)
    for role in ROLES[1:]:
        cols += _relative_features(item.covariates.get(role), len(y), day)
    return np.column_stack(cols).astype(np.float64), s


def _queue_features(queue: FloatArray | None, y: FloatArray, s: FloatArray) -> list[FloatArray]:
    if queue is None:
        return [np.full(len(y), np.nan)] * 4
    share = np.divide(queue, np.abs(y), out=np.zeros(len(y)), where=np.abs(y) > 0)
    return [queue / s, (queue - _lag(queue, 1)) / s, (queue - _lag(queue, 3)) / s, share]


def _relative_features(values: FloatArray | None, n: int, day: int) -> list[FloatArray]:
    """Level and changes of a covariate over its own trailing-day mean magnitude."""
    if values is None:
        return [np.full(n, np.nan)] * 3
    unit = pd.Series(np.abs(values)).rolling(day, min_periods=1).mean().to_numpy() + 1e-9
    return [values / unit, (values - _lag(values, 1)) / unit, (values - _lag(values, 3)) / unit]
