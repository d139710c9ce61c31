"""Per-series scale: the recent volatility every series is measured in.

A global model sees pools of 1 GPU and of 800 side by side. Each series' features and
target are divided by its own recent typical step change, so "a jump of 3 usual steps"
means the same thing on every pool, and the learned quantiles transfer to a new or
small pool. The scale is causal (it uses only values up to the origin).

The scale is the larger of the mean absolute 1-step change over the trailing day and
half of it over the trailing week, so that a quiet day does not shrink the unit to
nothing before a burst; a floor relative to the level (and an absolute epsilon) keeps
a constant series finite.
"""

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
