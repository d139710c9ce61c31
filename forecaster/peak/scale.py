"""Per-series scale: the recent volatility every series is measured in (docs/forecasting.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.peak.types import FloatArray

LONG_WEIGHT = 0.5
"""Share of the week's mean absolute change the scale never goes under."""
LEVEL_FLOOR = 1e-3
"""Least scale relative to the week's mean absolute level."""
EPSILON = 1e-9


def recent_scale(y: FloatArray, day: int) -> FloatArray:
    """Return the causal volatility scale of a series at every origin.

    Args:
        y: the series' values, oldest first, on a regular grid (NaN allowed).
        day: steps in a day (144 at 10 min).

    Returns:
        Positive finite scales, one per value.
    """
    if day < 1:
        raise ValueError(f"day must be a positive number of steps, got {day}")
    values = pd.Series(np.asarray(y, dtype=np.float64))
    change = values.diff().abs()
    short = change.rolling(day, min_periods=1).mean()
    long = change.rolling(7 * day, min_periods=1).mean()
    level = values.abs().rolling(7 * day, min_periods=1).mean()
    scale = np.fmax(short.to_numpy(), LONG_WEIGHT * long.to_numpy())
    floor = LEVEL_FLOOR * np.nan_to_num(level.to_numpy()) + EPSILON
    return np.asarray(np.fmax(np.nan_to_num(scale), floor), dtype=np.float64)
