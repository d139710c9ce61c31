"""Residuals of a forecaster, and the conformal quantile offsets made from them.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/residuals.py`."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from forecaster.types import Levels

FloatArray = npt.NDArray[np.float64]


def residual_quantiles(residuals: FloatArray, h: int, levels: Levels) -> FloatArray:
    """Return quantile offsets of shape ``(len(levels), h)`` from step residuals.

    Steps beyond the calibrated horizon reuse the last step's residuals widened by
    ``sqrt(step / horizon)``; steps with no finite residual get offset 0.
    """
    horizon = residuals.shape[1] if residuals.ndim == 2 else 0
    qs = np.asarray(list(levels), dtype=np.float64)
    offsets = np.zeros((len(qs), h), dtype=np.float64)
    if horizon == 0:
        return offsets
    per_column = column_quantiles(residuals, qs)
    steps = np.arange(1, h + 1)
    widen = np.where(steps > horizon, np.sqrt(steps / horizon), 1.0)
    offsets[:] = per_column[:, np.minimum(steps, horizon) - 1] * widen
    return offsets


def column_quantiles(values: FloatArray, qs: FloatArray) -> FloatArray:
    """Quantiles of each column's finite values, shape ``(len(qs), columns)``.

    Linear interpolation between order statistics, as ``np.quantile``'s default, but
    for all columns at once: a per-column ``np.quantile`` (or ``np.nanquantile``,
    which loops in Python) was 10 % of a training. A column with no finite value
    gets 0.
    """
    finite = np.isfinite(values)
    ordered = np.sort(np.where(finite, values, np.inf), axis=0)  # non-finite last
    counts = finite.sum(axis=0)
    out = np.zeros((len(qs), values.shape[1]), dtype=np.float64)
    cols = np.flatnonzero(counts)
    if cols.size == 0:
        return out
    position = qs[:, None] * (counts[cols] - 1)[None, :]
    lower = np.floor(position).astype(np.intp)
    upper = np.minimum(lower + 1, (counts[cols] - 1)[None, :])
    low = ordered[lower, cols[None, :]]
    high = ordered[upper, cols[None, :]]
    out[:, cols] = low + (position - lower) * (high - low)
    return out


def residuals_at(
    y: FloatArray, origins: range | npt.NDArray[np.integer[Any]], forecasts: FloatArray
) -> FloatArray:
    """Return ``actual - forecast`` for each origin's next ``horizon`` values."""
    horizon = forecasts.shape[1]
    idx = np.asarray(origins)[:, None] + np.arange(1, horizon + 1)[None, :]
    ok = idx < len(y)
    actual = np.where(ok, y[np.minimum(idx, len(y) - 1)], np.nan)
    return np.asarray(actual - forecasts, dtype=np.float64)


def lagged_residuals(y: FloatArray, horizon: int, period: int, window: int) -> FloatArray:
    """Exact residuals of a naive forecast that repeats the value ``period`` back.

    For persistence (``period=1``) the step-``k`` residual from origin ``t`` is
    ``y[t+k] - y[t]``; for seasonal naive it is ``y[t+k] - y[t+k-period*ceil(k/p)]``.
    Only the last ``window`` origins are used, so intervals track recent volatility.
    """
    n = len(y)
    origins = np.arange(max(period - 1, n - window - horizon), n - 1)
    residuals = np.full((len(origins), horizon), np.nan)
    for k in range(1, horizon + 1):
        back = period * int(np.ceil(k / period))
        target = origins + k
        source = target - back
        ok = (target < n) & (source >= 0)
        residuals[ok, k - 1] = y[target[ok]] - y[source[ok]]
    return residuals
