"""Analog forecasting: what the series did after the moments most like now.

The last ``pattern`` values, taken relative to the last one and divided by their mean
absolute step (so a quiet hour matches a quiet hour at any level), are compared with
every earlier stretch of the same length. The ``neighbours`` closest stretches (least
mean squared distance) each say how the series moved over the following steps; the
forecast at step ``k`` is the last value plus the median of their moves at ``k``,
rescaled to the present's step size. The median, because the benchmark scores
absolute error and moves are heavy-tailed; relative, so "no change" stays the answer
where the neighbours disagree on the direction.

It catches shapes a trailing feature set misses: a daily ramp seen from its first
hour, a burst that usually decays. On the tune windows of
``benchmarks/forecast_accuracy.py`` (50-75 % of each series, the only windows design
choices are made on) the Alibaba LoRA and NAB series scored 0.70-0.73x persistence's
summed MASE against gbm's 0.82x, almost all of it LoRA at 1 h and 3 h and the RDS CPU
series (``docs/forecasting.md``, "The analog family").

Calibration residuals are exact and out of sample: from each of the last
``calibration`` origins (``stride`` steps apart) the same search runs over the
stretches whose following steps were all observed by that origin. The guarded choice
(:mod:`forecaster.models.guarded`) reads them, so how many there are decides how often
the family forecasts: 168 origins 6 steps apart (a week at 10 min, as persistence's
residual window) scored 0.932x persistence's mean MASE on the tune windows, against
0.953x with 96 and 0.951x with 336 (cells up to 1.22x there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from forecaster.models.base import FloatArray, Forecaster

SCALE_FLOOR = 0.1
"""A stretch's step size is at least this share of the history's mean absolute step,
so a flat stretch does not turn into an arbitrarily stretched pattern."""


@dataclass(frozen=True)
class AnalogState:
    """Last value plus the median neighbour move at steps ``1..horizon``."""

    last: float
    changes: FloatArray


@dataclass(frozen=True)
class _Library:
    """Every stretch of a history that has a full following horizon."""

    ends: np.ndarray
    """Position of each stretch's last value."""
    shapes: FloatArray
    """Each stretch relative to its last value, divided by its scale: ``(stretches, pattern)``."""
    moves: FloatArray
    """Moves over the following steps divided by the stretch's scale: ``(stretches, horizon)``."""
    floor: float


class Analog(Forecaster):
    """Nearest-neighbour (analog) forecasts of the change from the last value.

    Args:
        pattern: steps in the stretch compared (36 by default: 3 h at 5 min).
        neighbours: stretches whose following moves are combined.
        calibration: origins the calibration residuals come from.
        stride: steps between those origins.
        max_history: only the last this many observations are searched.
        horizon: steps ahead forecast by each neighbour and calibrated.
        alias: name in forecast frames.
    """

    name = "analog"

    def __init__(
        self,
        *,
        pattern: int = 36,
        neighbours: int = 25,
        calibration: int = 168,
        stride: int = 6,
        max_history: int = 8064,
        horizon: int = 36,
        alias: str | None = None,
    ) -> None:
        super().__init__(horizon=horizon, alias=alias)
        if min(pattern, neighbours, calibration, stride) < 1:
            raise ValueError(
                "pattern, neighbours, calibration and stride must be >= 1, got "
                f"{pattern}, {neighbours}, {calibration}, {stride}"
            )
        self.pattern = pattern
        self.neighbours = neighbours
        self.calibration = calibration
        self.stride = stride
        self.max_history = max_history

    def min_history(self) -> int:
        """Return enough rows for a library of stretches, each with its horizon."""
        return max(6 * self.horizon, 2 * (self.pattern + self.horizon))

    def _fit_and_calibrate(self, y: FloatArray, ds: pd.DatetimeIndex) -> tuple[Any, FloatArray]:
        y = np.asarray(y[-self.max_history :], dtype=np.float64)
        n = len(y)
        origins = n - 2 - self.stride * np.arange(self.calibration)[::-1]
        origins = origins[origins >= self.pattern - 1]
        # The scale floor is read before the first calibration origin, so nothing a
        # calibration forecast uses comes after its origin.
        library = self._library(y, y[: origins[0] + 1] if len(origins) else y)
        # Stretches usable from an origin: their following steps end at or before it
        # (from the last origin, every stretch of the library).
        everything = np.r_[origins, n - 1]
        usable = library.ends[None, :] + self.horizon <= everything[:, None]
        changes = self._changes(y, library, everything, usable)
        state = AnalogState(last=float(y[-1]), changes=changes[-1])
        idx = origins[:, None] + np.arange(1, self.horizon + 1)[None, :]
        actual = np.where(idx < n, y[np.minimum(idx, n - 1)], np.nan)
        residuals = actual - (y[origins, None] + changes[:-1])
        return state, np.asarray(residuals, dtype=np.float64)

    def _fit_series(self, y: FloatArray, ds: pd.DatetimeIndex) -> Any:
        return self._fit_and_calibrate(y, ds)[0]

    def _calibration_residuals(self, y: FloatArray, ds: pd.DatetimeIndex) -> FloatArray:
        return np.asarray(self._fit_and_calibrate(y, ds)[1], dtype=np.float64)

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        if not isinstance(state, AnalogState):
            raise TypeError(f"expected an AnalogState, got {type(state).__name__}")
        steps = np.minimum(np.arange(h), len(state.changes) - 1)  # past the horizon: held
        return np.asarray(state.last + state.changes[steps], dtype=np.float64)

    # -- search -------------------------------------------------------------------

    def _library(self, y: FloatArray, before: FloatArray) -> _Library:
        steps = np.abs(np.diff(before))
        typical = float(np.nanmean(steps)) if np.isfinite(steps).any() else 0.0
        floor = SCALE_FLOOR * max(typical, 1e-9)
        ends = np.arange(self.pattern - 1, len(y) - self.horizon)
        windows = sliding_window_view(y, self.pattern)[: len(ends)]
        scale = self._scale(windows, floor)
        shapes = (windows - y[ends, None]) / scale[:, None]
        following = y[ends[:, None] + np.arange(1, self.horizon + 1)[None, :]]
        moves = (following - y[ends, None]) / scale[:, None]
        # A stretch with a gap in it, or in what followed, is never a neighbour.
        complete = np.isfinite(shapes).all(axis=1) & np.isfinite(moves).all(axis=1)
        return _Library(ends[complete], shapes[complete], moves[complete], floor)

    def _scale(self, windows: FloatArray, floor: float) -> FloatArray:
        if self.pattern < 2:
            return np.full(len(windows), floor)
        with np.errstate(invalid="ignore"):
            steps = np.mean(np.abs(np.diff(windows, axis=1)), axis=1)
        return np.asarray(np.maximum(steps, floor), dtype=np.float64)

    def _changes(
        self, y: FloatArray, library: _Library, origins: np.ndarray, usable: np.ndarray
    ) -> FloatArray:
        """Median neighbour move, rescaled, from each origin: ``(origins, horizon)``.

        An origin whose stretch has a gap, or that has no usable stretch, gets no
        change (persistence).
        """
        out = np.zeros((len(origins), self.horizon))
        if len(library.ends) == 0:
            return out
        queries = sliding_window_view(y, self.pattern)[origins - self.pattern + 1]
        scale = self._scale(queries, library.floor)
        shapes = (queries - y[origins, None]) / scale[:, None]
        known = np.isfinite(shapes).all(axis=1)
        shapes = np.where(known[:, None], shapes, 0.0)
        # Squared distances without the (origins x stretches x pattern) array.
        dist = (
            np.sum(library.shapes**2, axis=1)[None, :]
            - 2.0 * shapes @ library.shapes.T
            + np.sum(shapes**2, axis=1)[:, None]
        )
        dist = np.where(usable, dist, np.inf)
        available = usable.sum(axis=1)
        k = min(self.neighbours, int(available.max()))
        if k < 1:
            return out
        nearest = np.argpartition(dist, k - 1, axis=1)[:, :k]
        moves = library.moves[nearest]  # (origins, k, horizon)
        # Origins with fewer usable stretches than k drew some from the excluded ones.
        taken = np.take_along_axis(dist, nearest, axis=1)
        moves = np.where(np.isfinite(taken)[:, :, None], moves, np.nan)
        ok = known & (available > 0)
        with np.errstate(invalid="ignore"):
            median = np.nanmedian(moves[ok], axis=1) if ok.any() else moves[:0, 0]
        out[ok] = median * scale[ok, None]
        return out
