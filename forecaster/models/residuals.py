"""Residuals of a forecaster, and the conformal quantile offsets made from them.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/residuals.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from forecaster.types import Levels

FloatArray = npt.NDArray[np.float64]


class CompactResiduals(Protocol):
    """What a residual matrix is rebuilt from, exactly, when :meth:`matrix` is called."""

    def matrix(self) -> FloatArray:
        """Return the residuals, shape ``(n_windows, horizon)``; may hold NaN."""
        ...


Calibration: TypeAlias = FloatArray | CompactResiduals
"""A fit's calibration residuals: the matrix itself, or what rebuilds it."""


def residual_matrix(calibration: Calibration) -> FloatArray:
    """Return the residual matrix of ``calibration`` (rebuilt when it is compact)."""
    if isinstance(calibration, np.ndarray):
        return calibration
    return calibration.matrix()


def residual_quantiles(residuals: FloatArray, h: int, levels: Levels) -> FloatArray:
    """Return quantile offsets of shape ``(len(levels), h)`` from step residuals.

    Steps beyond the calibrated horizon reuse the last step's residuals widened by
    ``sqrt(step / horizon)``; steps with no finite residual get offset 0.
    """
    horizon = residuals.shape[1] if residuals.ndim == 2 else 0
    if horizon == 0:
        return np.zeros((len(levels), h), dtype=np.float64)
    return widened(column_quantiles(residuals, np.asarray(list(levels), dtype=np.float64)), h)


def widened(per_column: FloatArray, h: int) -> FloatArray:
    """Offsets for steps ``1..h`` from per-step ones (``(levels, horizon)``), as
    :func:`residual_quantiles` extends them past the horizon."""
    horizon = per_column.shape[1]
    steps = np.arange(1, h + 1)
    widen = np.where(steps > horizon, np.sqrt(steps / horizon), 1.0)
    return np.asarray(per_column[:, np.minimum(steps, horizon) - 1] * widen, dtype=np.float64)


def column_mae(residuals: FloatArray) -> FloatArray | None:
    """Mean absolute residual of each step (NaN where a step has none); ``None`` when
    the matrix holds no finite residual at all."""
    r = np.abs(np.asarray(residuals, dtype=np.float64))
    if r.ndim != 2 or r.shape[1] == 0 or not np.isfinite(r).any():
        return None
    known = np.isfinite(r)
    count = known.sum(axis=0)
    mae = np.where(count > 0, np.where(known, r, 0.0).sum(axis=0) / np.maximum(count, 1), np.nan)
    return np.asarray(mae, dtype=np.float64)


class Summarised:
    """What the compact forms share: the few numbers per step a forecast reads, kept.

    A forecast reads the matrix twice (its quantiles for the intervals, its mean absolute
    value for the guarded choice's errors): both are kept once the matrix is rebuilt,
    never the matrix itself, so a long-lived forecast process stays as small as the
    compact form. They are not pickled.
    """

    def matrix(self) -> FloatArray:
        """Return the residuals, shape ``(n_windows, horizon)``; may hold NaN."""
        raise NotImplementedError

    def summaries(self, levels: tuple[float, ...]) -> tuple[FloatArray, FloatArray | None]:
        """Per-step quantiles at ``levels`` (``(levels, horizon)``) and per-step MAE."""
        memo = self._memo()
        if levels not in memo:
            residuals = self.matrix()
            memo[levels] = column_quantiles(residuals, np.asarray(levels, dtype=np.float64))
            memo[None] = column_mae(residuals)
        return memo[levels], memo[None]

    def mae(self) -> FloatArray | None:
        """Per-step mean absolute residual (:func:`column_mae`)."""
        memo = self._memo()
        if None not in memo:
            memo[None] = column_mae(self.matrix())
        result: FloatArray | None = memo[None]
        return result

    def _memo(self) -> dict[tuple[float, ...] | None, Any]:
        # Frozen dataclasses: the memo goes into the instance's dict directly.
        memo: dict[tuple[float, ...] | None, Any] = self.__dict__.setdefault("_summaries", {})
        return memo

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_summaries", None)
        return state


def calibration_offsets(calibration: Calibration, h: int, levels: Levels) -> FloatArray:
    """:func:`residual_quantiles` of ``calibration``'s residuals (kept when compact)."""
    if not isinstance(calibration, Summarised):
        return residual_quantiles(residual_matrix(calibration), h, levels)
    per_column, _ = calibration.summaries(tuple(levels))
    if per_column.shape[1] == 0:
        return np.zeros((len(levels), h), dtype=np.float64)
    return widened(per_column, h)


def calibration_mae(calibration: Calibration) -> FloatArray | None:
    """:func:`column_mae` of ``calibration``'s residuals (kept when compact)."""
    if not isinstance(calibration, Summarised):
        return column_mae(residual_matrix(calibration))
    return calibration.mae()


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


@dataclass(frozen=True, eq=False)
class LaggedResiduals(Summarised):
    """Exact residuals of a naive forecast that repeats the value ``period`` back.

    For persistence (``period=1``) the step-``k`` residual from origin ``t`` is
    ``y[t+k] - y[t]``; for seasonal naive it is ``y[t+k] - y[t+k-period*ceil(k/p)]``.
    Only the last ``window`` origins are used, so intervals track recent volatility.
    Kept are the values those residuals read (``window + horizon + period - 1`` at
    most) rather than the ``(window + horizon - 1) x horizon`` matrix.

    Attributes:
        values: the series from index ``start`` to its end.
        start: where ``values`` begins in the series.
    """

    values: FloatArray
    start: int
    horizon: int
    period: int
    window: int

    @classmethod
    def of(cls, y: FloatArray, horizon: int, period: int, window: int) -> LaggedResiduals:
        """Keep the values of ``y`` the residuals of its last ``window`` origins read."""
        first = max(period - 1, len(y) - window - horizon)
        start = max(0, first - period + 1)  # the oldest value the first origin repeats
        return cls(np.array(y[start:], dtype=np.float64), start, horizon, period, window)

    def matrix(self) -> FloatArray:
        """Return the residuals, shape ``(n_origins, horizon)``, NaN past the series' end."""
        n = self.start + len(self.values)
        first = max(self.period - 1, n - self.window - self.horizon)
        origins = np.arange(first, n - 1)
        k = np.arange(1, self.horizon + 1)
        # Every step at once, as a forecast rebuilds it. Origins start at ``period - 1``,
        # so a source is never before the series; a target past its end reads the pad
        # and is dropped.
        padded = np.concatenate([self.values, np.zeros(self.horizon)])
        if self.period == 1:  # persistence: each step against the origin's own value
            windows = sliding_window_view(padded, self.horizon + 1)
            rows = windows[first - self.start :][: len(origins)]
            diff = rows[:, 1:] - rows[:, :1]
        else:
            back = self.period * -(-k // self.period)  # period * ceil(k / period)
            at = (origins - self.start)[:, None] + k[None, :]
            diff = padded[at] - padded[at - back[None, :]]
        ok = k[None, :] < (n - origins)[:, None]
        return np.where(ok, diff, np.nan)
