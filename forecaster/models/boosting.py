"""What the two gradient boosting families share: changes at anchor steps, shrunk.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/boosting.py`."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

# Imported at module level on purpose: threadpool_limits only caps OpenMP runtimes that
# are already loaded, so scikit-learn must be imported before a fit enters the limit.
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

from forecaster.models.base import FloatArray, OnePassForecaster

SHRINK_GRID: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)


def shift(y: FloatArray, lag: int) -> FloatArray:
    """``out[t] = y[t - lag]`` (NaN where that is outside ``y``); lag may be <= 0."""
    out = np.full(len(y), np.nan)
    if abs(lag) >= len(y):
        return out  # the whole series is shorter than the lag (a week lag on days)
    if lag >= 0:
        out[lag:] = y[: len(y) - lag] if lag else y
    else:
        out[:lag] = y[-lag:]
    return out


@functools.cache
def _threadpools() -> Any:
    """The process's thread pools, found once: finding them reads the loaded libraries."""
    return ThreadpoolController()


def openmp_threads(limit: int) -> Any:
    """A context that limits OpenMP to ``limit`` threads, cheap to enter per series.

    ``threadpool_limits`` looks the libraries up on every call (about 15 ms, more
    than an update's predictions); the controller found once is enough where the
    libraries (scikit-learn's OpenMP) are loaded already, as they are once a fitted
    regressor is in the process.
    """
    return _threadpools().limit(limits=limit, user_api="openmp")


def interpolate_changes(anchors: tuple[int, ...], changes: FloatArray, h: int) -> FloatArray:
    """Linear interpolation of anchor changes over steps ``1..h`` (held past the last)."""
    steps = np.arange(1, h + 1, dtype=np.float64)
    # Step 0 has change 0 by definition, so steps before the first anchor ramp from it.
    xs = np.asarray([0, *anchors], dtype=np.float64)
    if changes.ndim == 1:
        return np.asarray(np.interp(steps, xs, np.r_[0.0, changes]), dtype=np.float64)
    return _interp_rows(steps, xs, np.column_stack([np.zeros(len(changes)), changes]))


def _interp_rows(x: FloatArray, xp: FloatArray, fp: FloatArray) -> FloatArray:
    """``np.interp(x, xp, row)`` for every row of ``fp`` at once, bit for bit."""
    out = np.empty((fp.shape[0], len(x)), dtype=np.float64)
    # j: the knot at or before each x, as numpy's binary search finds it.
    j = np.searchsorted(xp, x, side="right") - 1
    for i, (x_i, j_i) in enumerate(zip(x, j, strict=True)):  # few steps, many rows
        if j_i < 0 or j_i >= len(xp) - 1 or xp[j_i] == x_i:
            out[:, i] = fp[:, min(max(j_i, 0), len(xp) - 1)]
            continue
        with np.errstate(invalid="ignore", over="ignore"):  # np.interp is silent too
            slope = (fp[:, j_i + 1] - fp[:, j_i]) / (xp[j_i + 1] - xp[j_i])
            value = slope * (x_i - xp[j_i]) + fp[:, j_i]
            nan = np.isnan(value)
            if nan.any():
                other = slope * (x_i - xp[j_i + 1]) + fp[:, j_i + 1]
                flat = np.isnan(other) & (fp[:, j_i] == fp[:, j_i + 1])
                value = np.where(nan, np.where(flat, fp[:, j_i], other), value)
        out[:, i] = value
    return out


def shrink_weight(errors: FloatArray, min_improvement: float) -> float:
    """The weight of ``SHRINK_GRID`` whose held-out error (``errors``, in its order) is least.

    Weight 0 is persistence; any other weight must beat persistence's error by the
    relative margin ``min_improvement``, so noise-level gains on a random walk (or a
    level that simply persists) keep persistence.
    """
    best = int(np.argmin(errors))
    if errors[best] > (1.0 - min_improvement) * errors[0]:
        return 0.0
    return float(SHRINK_GRID[best])


class AnchoredBoosting(OnePassForecaster):
    """Base of the boosting families: the anchor steps, the held-out fold, the regressor.

    Subclasses store these hyperparameters in ``__init__`` (each family lists its own,
    with its own defaults, as the estimator contract wants).
    """

    anchors: tuple[int, ...]
    max_iter: int
    learning_rate: float
    max_leaf_nodes: int
    max_bins: int
    min_samples_leaf: int
    validation_fraction: float
    random_state: int | None

    def min_history(self) -> int:
        """Return enough rows to train on and to hold out a tail of 2 horizons."""
        return max(100, 6 * self.horizon)

    def anchor_steps(self) -> tuple[int, ...]:
        """Return the anchor steps that get a regressor."""
        steps = {k for k in self.anchors if 1 <= k <= self.horizon} | {self.horizon}
        return tuple(sorted(steps))

    def _fold_start(self, n: int) -> int:
        """Where the held-out tail of ``n`` observations starts (at least 2 horizons)."""
        return n - max(2 * self.horizon, int(self.validation_fraction * n))

    def _regressor(self) -> Any:
        return HistGradientBoostingRegressor(
            # Absolute error: the scores are MAE (or MASE, the MAE of scaled changes) and
            # changes are heavy-tailed (bursts).
            loss="absolute_error",
            max_iter=self.max_iter,
            learning_rate=self.learning_rate,
            max_leaf_nodes=self.max_leaf_nodes,
            max_bins=self.max_bins,
            min_samples_leaf=self.min_samples_leaf,
            early_stopping=False,
            random_state=self.random_state,
        )
