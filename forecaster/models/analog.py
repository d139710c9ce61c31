"""Analog forecasting: what the series did after the moments most like now.

The last ``pattern`` values, taken relative to the last one and divided by their mean
absolute step (so a quiet hour matches a quiet hour at any level), are compared with
every earlier stretch of the same length. The ``neighbours`` closest stretches (least
squared distance; every stretch as close as the ``neighbours``-th counts, so equally
close ones are never picked by the sort's whim) each say how the series moved over
the following steps; the forecast at step ``k`` is the last value plus the median of
their moves at ``k``. The median, because the benchmark scores absolute error and
moves are heavy-tailed; moves from the last value, so "no change" stays the answer
where the neighbours disagree on the direction. Moves are kept in the series' units:
rescaled by the ratio of step sizes, a flat stretch (an outage at zero, then the
return) turned a near-flat present into a forecast of thousands of GPUs.

It catches shapes a trailing feature set misses: a daily ramp seen from its first
hour, a pool at its quota whose dips refill, a burst that usually decays.

Calibration residuals are exact and out of sample: from each of the last
``calibration`` origins (``stride`` steps apart) the same search runs over the
stretches whose following steps were all observed by that origin. The guarded choice
(:mod:`forecaster.models.guarded`) reads them, so how many there are decides how often
the family forecasts. Measured on the tune windows: ``docs/forecasting.md``, "The
analog family".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from forecaster.models.base import FloatArray, Forecaster

TIES = 1e-9
"""Distances within this share of their terms' size of the k-th nearest count as equal
to it (rounding, not a real difference)."""


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
    """Moves over the following steps, in the series' units: ``(stretches, horizon)``."""
    norms: FloatArray
    """Each shape's squared norm."""


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
        library = self._library(y)
        # Stretches usable from an origin: their following steps end at or before it
        # (from the last origin, every stretch of the library). The library is in time
        # order, so they are its first ``usable`` stretches.
        everything = np.r_[origins, n - 1]
        usable = np.asarray(
            np.searchsorted(library.ends + self.horizon, everything, side="right"), dtype=np.intp
        )
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

    def _library(self, y: FloatArray) -> _Library:
        ends = np.arange(self.pattern - 1, len(y) - self.horizon)
        windows = sliding_window_view(y, self.pattern)[: len(ends)]
        shapes = (windows - y[ends, None]) / self._scale(windows)[:, None]
        following = sliding_window_view(y[self.pattern :], self.horizon)[: len(ends)]
        moves = following - y[ends, None]
        # A stretch with a gap in it, or in what followed, is never a neighbour.
        complete = np.isfinite(shapes).all(axis=1) & np.isfinite(moves).all(axis=1)
        ends, shapes = ends[complete], shapes[complete]
        return _Library(ends, shapes, moves[complete], np.sum(shapes**2, axis=1))

    def _scale(self, windows: FloatArray) -> FloatArray:
        """Each stretch's mean absolute step; 1 for a flat one (its shape is 0 anyway)."""
        if self.pattern < 2:
            return np.ones(len(windows))
        with np.errstate(invalid="ignore"):
            steps = np.mean(np.abs(np.diff(windows, axis=1)), axis=1)
        return np.asarray(np.where(steps > 0.0, steps, 1.0), dtype=np.float64)

    def _changes(
        self, y: FloatArray, library: _Library, origins: np.ndarray, usable: np.ndarray
    ) -> FloatArray:
        """Median neighbour move from each origin: ``(origins, horizon)``.

        ``usable[i]``: how many of the library's first stretches origin ``i`` may use.
        An origin whose stretch has a gap, or that has no usable stretch, gets no
        change (persistence).
        """
        out = np.zeros((len(origins), self.horizon))
        k = min(self.neighbours, int(usable.max(initial=0)))
        if k < 1:
            return out
        queries = sliding_window_view(y, self.pattern)[origins - self.pattern + 1]
        shapes = (queries - y[origins, None]) / self._scale(queries)[:, None]
        known = np.isfinite(shapes).all(axis=1)
        shapes = np.where(known[:, None], shapes, 0.0)
        # Squared distances less each query's own norm (which ranks nothing), without
        # the (origins x stretches x pattern) array; in place, on one array.
        dist = shapes @ library.shapes.T
        dist *= -2.0
        dist += library.norms[None, :]
        for i, count in enumerate(usable.tolist()):
            dist[i, count:] = np.inf
        nearest = np.argpartition(dist, k - 1, axis=1)[:, :k]
        kth = np.take_along_axis(dist, nearest, axis=1).max(axis=1)
        # Every stretch as close as the k-th is a neighbour, so which of several equally
        # close stretches count does not depend on how a sort breaks ties (flat stretches
        # are exact ties: hundreds of them on a Helios queue).
        bound = kth + TIES * (1.0 + np.abs(kth) + np.sum(shapes**2, axis=1))
        ok = known & (usable > 0)
        plain = ok & np.isfinite(kth) & (np.count_nonzero(dist <= bound[:, None], axis=1) == k)
        out[plain] = _middle(library.moves[nearest[plain]])
        for i in np.flatnonzero(ok & ~plain).tolist():
            row = dist[i, : usable[i]]
            within = row <= bound[i] if np.isfinite(kth[i]) else np.ones(len(row), dtype=bool)
            out[i] = np.median(library.moves[: usable[i]][within], axis=0)
        return out


def _middle(moves: FloatArray) -> FloatArray:
    """The median over axis 1 of ``(origins, neighbours, steps)``, as ``np.median``.

    Sorting the short neighbour axis is about 5x faster than ``np.median`` here.
    """
    ordered = np.sort(moves, axis=1)
    half = ordered.shape[1] // 2
    if ordered.shape[1] % 2:
        return np.asarray(ordered[:, half], dtype=np.float64)
    return np.asarray((ordered[:, half - 1] + ordered[:, half]) / 2.0, dtype=np.float64)
