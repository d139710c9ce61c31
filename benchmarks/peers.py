"""statsforecast peers wrapped in Foresight's estimator contract, for benchmarks only.

statsforecast is a dev dependency: the peers are what the champion is measured
against, not part of the product. Their quantiles come from statsforecast's own
prediction intervals (``level=[80, 90]`` gives the 0.9 and 0.95 upper bounds), as in
``../shared/ANCHORS.md``, so their calibration is theirs, not our conformal one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from statsforecast.models import MSTL, AutoETS

from forecaster.models.base import FloatArray, Forecaster, SeriesFit
from forecaster.types import DS, MEAN, MODEL, STEP, UID, Levels, quantile_column

_UPPER_LEVEL = {0.9: 80, 0.95: 90}


class StatsforecastPeer(Forecaster):
    """A statsforecast model fitted per series with native intervals."""

    def _make(self, n_obs: int) -> Any:
        raise NotImplementedError

    def _fit_series(self, y: FloatArray, ds: pd.DatetimeIndex) -> Any:
        return self._make(len(y)).fit(y)

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        return np.asarray(state.predict(h)["mean"], dtype=np.float64)

    def _calibration_residuals(self, y: FloatArray, ds: pd.DatetimeIndex) -> FloatArray:
        return np.empty((0, 0))

    def _predict_one(self, uid: str, fit: SeriesFit, h: int, levels: Levels) -> pd.DataFrame:
        native = fit.state.predict(h, level=sorted(set(_UPPER_LEVEL.values())))
        steps = np.arange(1, h + 1)
        frame = pd.DataFrame(
            {
                UID: uid,
                DS: fit.last_ds + fit.step * steps,
                STEP: steps,
                MODEL: self.model_name,
                MEAN: np.asarray(native["mean"], dtype=np.float64),
            }
        )
        for level in levels:
            if level == 0.5:
                values = native["mean"]
            elif level in _UPPER_LEVEL:
                values = native[f"hi-{_UPPER_LEVEL[level]}"]
            else:
                raise ValueError(f"peer intervals exist for 0.5, 0.9 and 0.95 only, not {level}")
            frame[quantile_column(level)] = np.asarray(values, dtype=np.float64)
        return frame


class PeerAutoETS(StatsforecastPeer):
    """statsforecast AutoETS with a daily season (dropped when history is short)."""

    name = "sf_autoets"

    def __init__(self, season_length: int = 144, horizon: int = 36, alias: str | None = None):
        super().__init__(horizon=horizon, alias=alias)
        self.season_length = season_length

    def _make(self, n_obs: int) -> Any:
        season = self.season_length if n_obs >= 2 * self.season_length else 1
        return AutoETS(season_length=season)


class PeerMSTL(StatsforecastPeer):
    """statsforecast MSTL (daily + weekly) with AutoETS on the trend."""

    name = "sf_mstl"

    def __init__(
        self,
        season_lengths: tuple[int, ...] = (144, 1008),
        horizon: int = 36,
        alias: str | None = None,
    ):
        super().__init__(horizon=horizon, alias=alias)
        self.season_lengths = season_lengths

    def min_history(self) -> int:
        """MSTL needs two full cycles of its longest season."""
        return 2 * max(self.season_lengths)

    def _make(self, n_obs: int) -> Any:
        return MSTL(season_length=list(self.season_lengths), trend_forecaster=AutoETS(model="ZZN"))
