"""Baselines that always run: persistence and seasonal naive."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from forecaster.models.base import FloatArray, Forecaster
from forecaster.models.residuals import Calibration, LaggedResiduals
from forecaster.types import PERSISTENCE


class Persistence(Forecaster):
    """Repeat the last observed value; intervals from recent h-step changes.

    Args:
        horizon: steps ahead the intervals are calibrated for.
        window: how many recent origins the interval residuals come from.
    """

    name = PERSISTENCE
    update_refits = True

    def __init__(self, horizon: int = 36, window: int = 2016, alias: str | None = None):
        super().__init__(horizon=horizon, alias=alias)
        self.window = window

    def _fit_series(self, y: FloatArray, ds: pd.DatetimeIndex) -> Any:
        return float(y[-1])

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        return np.full(h, float(state))

    def _calibration_residuals(self, y: FloatArray, ds: pd.DatetimeIndex) -> Calibration:
        return LaggedResiduals.of(y, self.horizon, period=1, window=self.window)


class SeasonalNaive(Forecaster):
    """Repeat the value one season back; intervals from recent seasonal errors.

    Args:
        season_length: steps in one season (144 for a day at 10 min).
        horizon: steps ahead the intervals are calibrated for.
        window: how many recent origins the interval residuals come from.
    """

    name = "seasonal_naive"
    update_refits = True

    def __init__(
        self,
        season_length: int = 288,
        horizon: int = 36,
        window: int = 2016,
        alias: str | None = None,
    ):
        super().__init__(horizon=horizon, alias=alias)
        self.season_length = season_length
        self.window = window

    def min_history(self) -> int:
        """Return one season plus a step: the least that gives a seasonal forecast."""
        return self.season_length + 1

    def _fit_series(self, y: FloatArray, ds: pd.DatetimeIndex) -> Any:
        return y[-self.season_length :].copy()

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        season = np.asarray(state, dtype=np.float64)
        return np.resize(season, h)

    def _calibration_residuals(self, y: FloatArray, ds: pd.DatetimeIndex) -> Calibration:
        return LaggedResiduals.of(y, self.horizon, period=self.season_length, window=self.window)
