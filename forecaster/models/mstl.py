"""MSTL: daily and weekly seasons removed by statsmodels, the rest smoothed.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/mstl.py`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from forecaster.exceptions import ModelError, UpdateError
from forecaster.models.base import FloatArray
from forecaster.models.ets import (
    SmoothingFamily,
    SmoothingState,
    advance,
    estimate_params,
    newer_values,
    smoothing_filter,
    smoothing_forecast,
)
from forecaster.models.residuals import residuals_at


@dataclass(frozen=True)
class MSTLState:
    """Smoothing state of the adjusted series plus the seasonal pattern ahead."""

    smoothing: SmoothingState
    cycles: tuple[FloatArray, ...]
    """Last cycle of each seasonal component, aligned so index 0 is the prefix end."""
    prefix: int
    n: int


def seasonal_ahead(cycles: Sequence[FloatArray], start: int, count: int) -> FloatArray:
    """Sum of the repeated seasonal cycles at positions ``start..start+count-1``.

    Positions count from the end of the decomposed prefix (0 = first value after it).
    """
    out = np.zeros(count, dtype=np.float64)
    positions = np.arange(start, start + count)
    for cycle in cycles:
        out += cycle[positions % len(cycle)]
    return out


def decompose(y: FloatArray, periods: Sequence[int]) -> tuple[FloatArray, tuple[FloatArray, ...]]:
    """Return the in-sample seasonal sum and each component's last cycle.

    Raises:
        ModelError: when statsmodels cannot decompose the series.
    """
    if not periods or np.ptp(y) == 0.0:
        return np.zeros(len(y)), ()
    from statsmodels.tsa.seasonal import MSTL as _MSTL

    # Jumps evaluate the LOESS smoothers every ~10 % of the shortest period and
    # interpolate: 25x faster on a month of 5-min data, with visually identical seasons.
    jump = max(1, min(periods) // 10)
    stl_kwargs = {"seasonal_jump": jump, "trend_jump": jump, "low_pass_jump": jump}
    try:
        result = _MSTL(y, periods=list(periods), stl_kwargs=stl_kwargs).fit()
    except (ValueError, np.linalg.LinAlgError) as exc:
        raise ModelError(f"MSTL decomposition with periods {list(periods)} failed: {exc}") from exc
    seasonal = np.asarray(result.seasonal, dtype=np.float64).reshape(len(y), -1)
    cycles = tuple(seasonal[-p:, i].copy() for i, p in enumerate(periods))
    return seasonal.sum(axis=1), cycles


class MSTL(SmoothingFamily):
    """Multiple seasonal decomposition plus damped-trend smoothing of the remainder.

    Args:
        periods: season lengths in steps (a day and a week of 5-min steps by default);
            a period is dropped when the estimation prefix holds fewer than two cycles.
        trend: whether the adjusted series' smoother has a (damped) trend.
        max_history: only the last this many observations are used (4 weeks of 5 min).
        calibration_window: how many recent origins provide out-of-sample residuals.
        select: when true, also try dropping the longest periods (down to none) and
            keep the choice with the least mean absolute error on the calibration origins.
        horizon: steps ahead the intervals are calibrated for.
    """

    name = "mstl"

    def __init__(
        self,
        *,
        periods: tuple[int, ...] = (288, 2016),
        trend: bool = True,
        max_history: int = 8064,
        calibration_window: int = 576,
        select: bool = True,
        horizon: int = 36,
        alias: str | None = None,
    ) -> None:
        super().__init__(horizon=horizon, alias=alias)
        self.periods = periods
        self.trend = trend
        self.max_history = max_history
        self.calibration_window = calibration_window
        self.select = select

    def _candidates(
        self, y: FloatArray, prefix: int, origins: range
    ) -> Iterator[tuple[MSTLState, FloatArray]]:
        periods = sorted(p for p in set(self.periods) if p > 1 and 2 * p <= prefix)
        # Nested candidates (all periods, then dropping the longest, ...): a weak or
        # non-repeating season adds its own noise to every forecast, so it must earn
        # its place on the calibration origins.
        candidates = [periods[:i] for i in range(len(periods), -1, -1)]
        if not self.select:
            candidates = candidates[:1]
        for subset in candidates:
            yield self._fit_periods(y, prefix, origins, subset)

    def _fit_periods(
        self, y: FloatArray, prefix: int, origins: range, periods: list[int]
    ) -> tuple[MSTLState, FloatArray]:
        n = len(y)
        fitted_seasons, cycles = decompose(y[:prefix], periods)
        seasons = np.concatenate([fitted_seasons, seasonal_ahead(cycles, 0, n - prefix)])
        adjusted = y - seasons
        params = estimate_params(adjusted[:prefix], self.trend and prefix >= 10, True, 0)
        smoothing, forecasts = smoothing_filter(adjusted, params, origins, self.horizon)
        smoothing = replace(smoothing, params=params)
        # Add back the seasons at each forecast's target positions (relative to prefix).
        targets = np.asarray(origins)[:, None] + np.arange(1, self.horizon + 1)[None, :] - prefix
        ahead = seasonal_ahead(cycles, 0, int(targets.max()) + 1)
        forecasts = forecasts + ahead[targets]
        state = MSTLState(smoothing=smoothing, cycles=cycles, prefix=prefix, n=n)
        return state, residuals_at(y, origins, forecasts)

    def _update_state(
        self, state: Any, y: FloatArray, ds: pd.DatetimeIndex, last_ds: pd.Timestamp
    ) -> Any:
        """Continue the adjusted series' recursion over the newer observations."""
        if not isinstance(state, MSTLState):
            raise UpdateError(f"expected an MSTLState, got {type(state).__name__}")
        values = newer_values(y, ds, last_ds)
        seasons = seasonal_ahead(state.cycles, state.n - state.prefix, len(values))
        smoothing = advance(state.smoothing, values - seasons)
        return replace(state, smoothing=smoothing, n=state.n + len(values))

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        if not isinstance(state, MSTLState):
            raise TypeError(f"expected an MSTLState, got {type(state).__name__}")
        base = smoothing_forecast(state.smoothing, h)
        return base + seasonal_ahead(state.cycles, state.n - state.prefix, h)
