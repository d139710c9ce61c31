"""Walk-forward demand forecasts for replay: fit on a schedule, predict cheaply every step.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/walkforward.py`."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pandas as pd

from forecaster.estimator import Estimator
from forecaster.exceptions import DataValidationError, ForesightError
from forecaster.types import DS, MEAN, UID, Y
from pipelines.simulate.replay_forecast import PointForecast
from pipelines.simulate.types import FloatArray, History

__all__ = ["ModelFactory", "PointForecast", "WalkForwardForecaster", "higher_quantiles"]

logger = logging.getLogger(__name__)

ModelFactory = Callable[[], Estimator]
"""Builds a fresh, unfitted forecaster (the estimator contract)."""

_SERIES_ID = "replay/demand_gpus"


@dataclass(frozen=True)
class _Fit:
    at: int  # global step of the fit's last observation
    path: FloatArray  # path[j] = predicted mean at at + j (path[0] = y[at])


class WalkForwardForecaster:
    """Forecasts of a replayed demand series, made at each step from the past only.

    Args:
        factory: builds the model fitted at each retrain (the estimator contract).
        retrain_every: time between fits (rounded to whole steps, at least one).
        calibration: residuals per step-ahead used for the quantiles (most recent).
        min_history: observations needed before the first fit.
        max_history: the most recent observations a fit sees; None: all.
        prehistory: demand observed before the replay (indexed by UTC timestamps on
            the replay's step, ending one step before its first timestamp); it seeds
            the fits and the calibration so the replay does not start cold.
    """

    def __init__(
        self,
        factory: ModelFactory,
        *,
        retrain_every: timedelta = timedelta(days=1),
        calibration: int = 1008,
        min_history: int = 144,
        max_history: int | None = 4032,
        prehistory: pd.Series | None = None,
    ) -> None:
        if retrain_every <= timedelta(0):
            raise ValueError(f"retrain_every must be positive, got {retrain_every}")
        if calibration < 1 or min_history < 2:
            raise ValueError("calibration must be >= 1 and min_history >= 2")
        if max_history is not None and max_history < min_history:
            raise ValueError(f"max_history {max_history} is below min_history {min_history}")
        self.factory = factory
        self.retrain_every = retrain_every
        self.calibration = calibration
        self.min_history = min_history
        self.max_history = max_history
        self.prehistory = prehistory
        self.fit_log: list[pd.Timestamp] = []
        """Timestamps of the last observation of every fit made (for audits and tests)."""
        self._checked: int = -1  # the last step observed or checked in this replay
        self._clear(horizon=0)

    # -- public ------------------------------------------------------------------

    def forecast(self, history: History, horizon: int, levels: Sequence[float]) -> PointForecast:
        """Return the forecast made at ``history``'s step for ``horizon`` steps.

        Args:
            history: what the policy observed (steps ``0..t`` of the replay).
            horizon: steps ahead, >= 1.
            levels: quantile levels in (0, 1).

        Raises:
            DataValidationError: the prehistory does not end one step before the replay.
        """
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        if horizon != self._horizon or history.t == 0:
            self._start(history, horizon)
        g = self._offset + history.t
        # Steps between refreshes were not asked about: observe (or check) them too.
        for t in range(max(0, self._checked + 1 - self._offset), history.t):
            self._observe(self._offset + t, float(history.demand[t]), history.timestamps[t])
        now = history.now
        self._observe(g, float(history.demand[-1]), now)
        self._checked = g
        offsets = self._offsets(g, tuple(float(q) for q in levels))
        point = self._point[g]
        quantiles = {
            float(level): np.maximum(point + offsets[i], 0.0) for i, level in enumerate(levels)
        }
        origin = now.to_pydatetime()
        step = history.pool.step
        return PointForecast(
            origin=origin,
            timestamps=tuple(origin + step * k for k in range(1, horizon + 1)),
            quantiles=quantiles,
        )

    # -- state -------------------------------------------------------------------

    def _clear(self, horizon: int) -> None:
        self._horizon = horizon
        self._values: list[float] = []
        self._stamps: list[pd.Timestamp] = []
        self._point: list[FloatArray] = []
        self._resid = np.full((0, max(horizon, 1)), np.nan)
        self._fits: list[_Fit] = []
        self._offset_cache: dict[tuple[int, tuple[float, ...]], FloatArray] = {}
        self._offset = 0
        self._checked = -1
        self.fit_log = []

    def _start(self, history: History, horizon: int) -> None:
        """Begin (or resume) a replay: keep the cache only if it is for this series."""
        if horizon != self._horizon:
            self._clear(horizon)
        if self._values:
            self._checked = self._offset - 1
            return  # values are checked one by one in _observe
        pre = self._prehistory(history)
        for ts, value in zip(pre.index, pre.to_numpy(dtype=np.float64), strict=True):
            self._observe(len(self._values), float(value), ts)
        self._offset = len(pre)
        self._checked = self._offset - 1

    def _prehistory(self, history: History) -> pd.Series:
        pre = self.prehistory
        if pre is None or len(pre) == 0:
            return pd.Series(dtype=np.float64)
        index = pd.DatetimeIndex(pre.index)
        step = history.pool.step
        if index.tz is None or index[-1] + step != history.timestamps[0]:
            raise DataValidationError(
                f"prehistory must be UTC-indexed and end one step ({step}) before the replay "
                f"starts at {history.timestamps[0]}; it ends at {index[-1]}"
            )
        values = pre.to_numpy(dtype=np.float64)
        if not np.isfinite(values).all() or (values < 0).any():
            raise DataValidationError("prehistory holds NaN, infinite or negative demand")
        return pre

    def _observe(self, g: int, value: float, stamp: pd.Timestamp) -> None:
        """Record observation ``g`` (or check it against the cache) and forecast from it."""
        if g < len(self._values):
            if self._values[g] == value and self._stamps[g] == stamp:
                return
            self._truncate(g)
        if g != len(self._values):
            raise RuntimeError(f"observations must arrive in order: got step {g}")
        self._values.append(value)
        self._stamps.append(stamp)
        self._score(g)
        if self._due(g):
            self._refit(g)
        self._point.append(self._anchor(g))

    def _truncate(self, g: int) -> None:
        """Forget everything observed from step ``g`` on (a different series is replayed)."""
        del self._values[g:], self._stamps[g:], self._point[g:]
        self._resid = self._resid[:g]
        # Residuals whose target is at or after g were scored against the old values.
        for k in range(1, self._horizon + 1):
            self._resid[max(0, g - k) :, k - 1] = np.nan
        self._fits = [fit for fit in self._fits if fit.at < g]
        self._offset_cache = {key: v for key, v in self._offset_cache.items() if key[0] < g}
        self.fit_log = [self._stamps[fit.at] for fit in self._fits]

    def _score(self, g: int) -> None:
        """Score the forecasts whose ``k``-step target is the new observation ``g``."""
        if len(self._resid) <= g:
            grown = np.full((max(2 * len(self._resid), g + 1), self._horizon), np.nan)
            grown[: len(self._resid)] = self._resid
            self._resid = grown
        y = self._values[g]
        for k in range(1, self._horizon + 1):
            origin = g - k
            if origin >= 0:
                self._resid[origin, k - 1] = y - self._point[origin][k - 1]

    # -- fitting -----------------------------------------------------------------

    def _retrain_steps(self) -> int:
        if len(self._stamps) < 2:
            return 1
        step = self._stamps[1] - self._stamps[0]
        return max(1, math.ceil(self.retrain_every / step))

    def _due(self, g: int) -> bool:
        if g + 1 < self.min_history:
            return False
        if not self._fits:
            return True
        return g - self._fits[-1].at >= self._retrain_steps()

    def _refit(self, g: int) -> None:
        start = 0 if self.max_history is None else max(0, g + 1 - self.max_history)
        frame = pd.DataFrame(
            {
                UID: _SERIES_ID,
                DS: pd.DatetimeIndex(self._stamps[start : g + 1]),
                Y: np.asarray(self._values[start : g + 1], dtype=np.float64),
            }
        )
        ahead = self._retrain_steps() + self._horizon
        try:
            model = self.factory().fit(frame)
            mean = model.predict(ahead, (0.5,))[MEAN].to_numpy(dtype=np.float64)
        except ForesightError as exc:
            # A failed fit keeps the previous shape: the replay goes on, as a live
            # deployment keeps its last-known-good model.
            logger.warning("walk-forward fit at %s failed, shape kept: %s", self._stamps[g], exc)
            return
        if len(mean) != ahead or not np.isfinite(mean).all():
            logger.warning("walk-forward fit at %s gave an unusable path, kept", self._stamps[g])
            return
        path = np.concatenate([[self._values[g]], mean])
        self._fits.append(_Fit(at=g, path=path))
        self.fit_log.append(self._stamps[g])

    def _fit_for(self, g: int) -> _Fit | None:
        return self._fits[-1] if self._fits and self._fits[-1].at <= g else None

    def _anchor(self, g: int) -> FloatArray:
        """Point forecast from origin ``g``: the latest value moved by the fitted shape."""
        y = self._values[g]
        fit = self._fit_for(g)
        if fit is None:
            return np.full(self._horizon, y)
        j = g - fit.at
        ks = np.arange(1, self._horizon + 1)
        # Past the end of the path (a late refit), the last movement is held.
        ahead = fit.path[np.minimum(j + ks, len(fit.path) - 1)]
        return np.asarray(y + ahead - fit.path[min(j, len(fit.path) - 1)], dtype=np.float64)

    def _offsets(self, g: int, levels: tuple[float, ...]) -> FloatArray:
        """Return the residual quantiles at ``g``, cached: a sweep asks for each many times."""
        key = (g, levels)
        cached = self._offset_cache.get(key)
        if cached is None:
            cached = self._offset_cache[key] = self._residual_quantiles(g, levels)
        return cached

    def _residual_quantiles(self, g: int, levels: Sequence[float]) -> FloatArray:
        """Return ``(len(levels), horizon)`` offsets from the residuals known at ``g``."""
        offsets = np.zeros((len(levels), self._horizon))
        low = max(0, g - self.calibration - self._horizon)
        for k in range(1, self._horizon + 1):
            # Origins whose k-step target has been observed by g: origin <= g - k.
            known = self._resid[low : max(low, g - k + 1), k - 1]
            known = known[np.isfinite(known)][-self.calibration :]
            if known.size:
                offsets[:, k - 1] = higher_quantiles(known, levels)
        return offsets


def higher_quantiles(values: FloatArray, levels: Sequence[float]) -> FloatArray:
    """Return ``np.quantile(values, levels, method="higher")`` at a fraction of the cost.

    The conservative ("higher") empirical quantile: the order statistic at
    ``ceil(q (n - 1))``, found by a partial sort.
    """
    n = len(values)
    ranks = [min(n - 1, math.ceil(q * (n - 1) - 1e-12)) for q in levels]
    part = np.partition(values, ranks)
    return np.asarray(part[ranks], dtype=np.float64)
