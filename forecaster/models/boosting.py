"""What the two gradient boosting families share: changes at anchor steps, shrunk.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/boosting.py`."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

# Imported at module level on purpose: threadpool_limits only caps OpenMP runtimes that
# are already loaded, so scikit-learn must be imported before a fit enters the limit.
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

from forecaster.models.base import FloatArray, OnePassForecaster
from forecaster.models.residuals import Summarised, residuals_at

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
    # j: the knot at or before each x, as numpy's binary search finds it.
    j = np.searchsorted(xp, x, side="right") - 1
    # At a knot or outside the knots, the knot's (or the end's) value.
    out = fp[:, np.clip(j, 0, len(xp) - 1)]
    inside = (j >= 0) & (j < len(xp) - 1)
    inside[inside] = xp[j[inside]] != x[inside]
    if not inside.any():
        return out
    # Between knots, every step at once (a loop over the steps cost as much again when a
    # forecast rebuilds held-out paths, PathResiduals); each value is the same arithmetic.
    lo = j[inside]
    left, right = fp[:, lo], fp[:, lo + 1]
    with np.errstate(invalid="ignore", over="ignore"):  # np.interp is silent too
        slope = (right - left) / (xp[lo + 1] - xp[lo])
        value = slope * (x[inside] - xp[lo]) + left
        nan = np.isnan(value)
        if nan.any():
            other = slope * (x[inside] - xp[lo + 1]) + right
            flat = np.isnan(other) & (left == right)
            value = np.where(nan, np.where(flat, left, other), value)
    out[:, inside] = value
    return out


@dataclass(frozen=True, eq=False)
class PathResiduals(Summarised):
    """Held-out residuals of paths interpolated from anchor changes, kept compact.

    The residuals from origin ``t`` of the held-out tail are ``y[t+1..t+horizon]``
    minus the path ``y[t] + interpolate_changes(anchors, changes[t], horizon)``: the
    tail's values and the changes (a column per anchor) give them exactly, at
    ``1 + len(anchors)`` numbers per origin instead of ``horizon``. An anchor whose
    changes are all zero (weight 0: persistence) keeps only their signs.

    Attributes:
        values: the series from the tail's first origin to its end.
        anchors: the anchor steps.
        changes: the changes of the anchors not in ``zero_anchors``, a row per origin
            (every value of ``values`` but the last).
        zero_anchors: the positions in ``anchors`` whose changes are all 0.
        zero_signs: per zero anchor, its changes' sign bits (``np.packbits``).
        horizon: the steps of a path.
    """

    values: FloatArray
    anchors: tuple[int, ...]
    changes: FloatArray
    zero_anchors: tuple[int, ...]
    zero_signs: npt.NDArray[np.uint8]
    horizon: int

    @classmethod
    def of(
        cls, tail: FloatArray, anchors: tuple[int, ...], changes: FloatArray, horizon: int
    ) -> PathResiduals:
        """Keep the held-out ``tail`` (``y`` from the first origin) and its ``changes``."""
        zero = tuple(int(j) for j in np.flatnonzero((changes == 0.0).all(axis=0)))
        kept = [j for j in range(changes.shape[1]) if j not in zero]
        signs = np.packbits(np.signbit(changes[:, list(zero)]), axis=0).T
        return cls(
            np.array(tail, dtype=np.float64),
            anchors,
            np.ascontiguousarray(changes[:, kept]),
            zero,
            np.ascontiguousarray(signs),
            horizon,
        )

    def matrix(self) -> FloatArray:
        """Return the residuals, shape ``(n_origins, horizon)``, NaN past the tail's end."""
        n = len(self.values) - 1
        changes = np.empty((n, len(self.anchors)), dtype=np.float64)
        kept = [j for j in range(len(self.anchors)) if j not in self.zero_anchors]
        changes[:, kept] = self.changes
        if self.zero_anchors:
            signs = np.unpackbits(self.zero_signs, axis=1, count=n).T.astype(bool)
            changes[:, list(self.zero_anchors)] = np.where(signs, -0.0, 0.0)
        paths = self.values[:-1, None] + interpolate_changes(self.anchors, changes, self.horizon)
        return residuals_at(self.values, range(n), paths)


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
