"""Gradient boosting: direct multi-horizon forecasts of the change from the last value.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/gbm.py`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.exceptions import UpdateError
from forecaster.models.base import FloatArray
from forecaster.models.boosting import (
    SHRINK_GRID,
    AnchoredBoosting,
    PathResiduals,
    interpolate_changes,
    openmp_threads,
    shift,
    shrink_weight,
)
from forecaster.models.residuals import Calibration

DEFAULT_ANCHORS: tuple[int, ...] = (1, 3, 12, 36, 72, 144, 288)


@dataclass(frozen=True)
class GBMState:
    """Last value plus the (shrunk) predicted change at each anchor step."""

    last: float
    anchors: tuple[int, ...]
    changes: FloatArray
    weights: FloatArray
    """Shrinkage toward persistence chosen per anchor on the held-out tail."""
    models: tuple[Any, ...] = ()
    """Each anchor's fitted regressor (None where its weight is 0), kept so an update
    forecasts from a newer origin without refitting; empty in states of older versions."""
    columns: tuple[npt.NDArray[np.bool_], ...] = ()
    """Per anchor, the feature columns its regressor was fitted on."""


class GradientBoosting(AnchoredBoosting):
    """Direct multi-horizon gradient boosting on changes, shrunk toward persistence.

    Args:
        season_length: steps in a day (288 at 5 min); seasonal features use it.
        week_length: steps in a week (2016 at 5 min).
        n_lags: how many recent values (relative to the last) are features.
        windows: rolling mean / standard deviation windows in steps.
        anchors: candidate anchor steps; those up to ``horizon`` (plus ``horizon``)
            get a model.
        max_bins: histogram bins per feature (at most 255); fewer bins make each split
            search cheaper.
        min_samples_leaf: least training rows per leaf (guards bursty series).
        validation_fraction: share of the history held out to choose the shrinkage
            and to compute the calibration residuals.
        min_improvement: relative held-out MAE gain over persistence an anchor model
            needs to be used at all (otherwise that step falls back to persistence).
        max_history: only the last this many observations are used (4 weeks of 5 min).
        n_threads: OpenMP threads per fit. 1 by default: series are fitted in parallel
            by the caller, and on small frames (~8000 rows) more threads are slower
            (measured 30x slower with the default thread count on 2 cores).
        horizon: steps ahead the intervals are calibrated for.
    """

    name = "gbm"

    def __init__(
        self,
        *,
        season_length: int = 288,
        week_length: int = 2016,
        n_lags: int = 12,
        windows: tuple[int, ...] = (6, 36),
        anchors: tuple[int, ...] = DEFAULT_ANCHORS,
        max_iter: int = 20,
        learning_rate: float = 0.3,
        max_leaf_nodes: int = 7,
        max_bins: int = 32,
        min_samples_leaf: int = 40,
        validation_fraction: float = 0.2,
        min_improvement: float = 0.02,
        max_history: int = 8064,
        random_state: int | None = 0,
        n_threads: int = 1,
        horizon: int = 36,
        alias: str | None = None,
    ) -> None:
        super().__init__(horizon=horizon, alias=alias)
        self.season_length = season_length
        self.week_length = week_length
        self.n_lags = n_lags
        self.windows = windows
        self.anchors = anchors
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.max_bins = max_bins
        self.min_samples_leaf = min_samples_leaf
        self.validation_fraction = validation_fraction
        self.min_improvement = min_improvement
        self.max_history = max_history
        self.random_state = random_state
        self.n_threads = n_threads

    # -- features ---------------------------------------------------------------

    def _base_features(self, y: FloatArray, ds: pd.DatetimeIndex) -> list[FloatArray]:
        """Features of an origin that do not depend on the step ahead."""
        feats: list[FloatArray] = [y.copy()]
        feats += [shift(y, i) - y for i in range(1, self.n_lags + 1)]
        series = pd.Series(y)
        for w in self.windows:
            roll = series.rolling(w, min_periods=max(2, w // 2))
            feats.append(roll.mean().to_numpy(dtype=np.float64) - y)
            feats.append(roll.std().to_numpy(dtype=np.float64))
        return feats

    def _step_features(
        self, y: FloatArray, ds: pd.DatetimeIndex, step: pd.Timedelta, k: int
    ) -> list[FloatArray]:
        """Features of the target time ``t + k``: seasonal lags and calendar."""
        feats: list[FloatArray] = []
        for period in (self.season_length, self.week_length):
            if period < 1:
                continue
            back = period * int(np.ceil(k / period))
            same_time = shift(y, back - k)  # y[t + k - back]
            feats.append(same_time - y)
            # What the series did over the same k steps one period earlier.
            feats.append(same_time - shift(y, back))
        target = ds + step * k
        feats.append(np.asarray(target.hour + target.minute / 60.0, dtype=np.float64))
        feats.append(np.asarray(target.dayofweek, dtype=np.float64))
        return feats

    # -- fit ----------------------------------------------------------------------

    def _fit_and_calibrate(self, y: FloatArray, ds: pd.DatetimeIndex) -> tuple[Any, Calibration]:
        y = y[-self.max_history :]
        ds = ds[-self.max_history :]
        with openmp_threads(self.n_threads):
            return self._fit_anchors(y, ds)

    def _fit_anchors(self, y: FloatArray, ds: pd.DatetimeIndex) -> tuple[Any, Calibration]:
        n = len(y)
        step = ds[1] - ds[0]
        anchors = self.anchor_steps()
        base = self._base_features(y, ds)
        fold_start = self._fold_start(n)
        fold_origins = np.arange(fold_start, n - 1)
        origins = np.arange(n)
        fold_changes = np.zeros((len(fold_origins), len(anchors)))
        final_changes = np.zeros(len(anchors))
        weights = np.zeros(len(anchors))
        models: list[Any] = [None] * len(anchors)
        columns: list[npt.NDArray[np.bool_]] = [np.zeros(0, dtype=bool)] * len(anchors)
        for j, k in enumerate(anchors):
            x = np.column_stack([*base, *self._step_features(y, ds, step, k)])
            target = shift(y, -k) - y  # y[t + k] - y[t]
            train = origins[origins + k < fold_start]
            scored = fold_origins[fold_origins + k < n]
            if len(train) < 2 * self.min_samples_leaf or len(scored) == 0:
                continue  # too little to learn or judge: weight 0 = persistence
            # A feature with no value in the training rows (the week lags of a history
            # shorter than a week) is left out: scikit-learn cannot bin it.
            columns[j] = np.asarray(np.isfinite(x[train]).any(axis=0), dtype=bool)
            x = x[:, columns[j]]
            fold_model = self._regressor().fit(x[train], target[train])
            pred = np.asarray(fold_model.predict(x[fold_origins]), dtype=np.float64)
            weights[j] = best_weight(pred[: len(scored)], target[scored], self.min_improvement)
            fold_changes[:, j] = weights[j] * pred
            if weights[j] > 0.0:
                final_changes[j] = weights[j] * float(fold_model.predict(x[-1:])[0])
                models[j] = fold_model

        state = GBMState(
            last=float(y[-1]),
            anchors=anchors,
            changes=final_changes,
            weights=weights,
            models=tuple(models),
            columns=tuple(columns),
        )
        return state, PathResiduals.of(y[fold_start:], anchors, fold_changes, self.horizon)

    def _update_state(
        self, state: Any, y: FloatArray, ds: pd.DatetimeIndex, last_ds: pd.Timestamp
    ) -> Any:
        """Forecast the changes from the newest origin with the anchors' kept regressors."""
        if not isinstance(state, GBMState) or len(state.models) != len(state.anchors):
            raise UpdateError(
                "gbm state without its anchors' regressors (saved by an older version)"
            )
        # The last origin's features reach back one period before the target at most
        # (and a few lags and windows): the tail that holds them gives the same row.
        reach = max(
            self.n_lags,
            *self.windows,
            *(p * -(-max(state.anchors) // p) for p in (self.season_length, self.week_length)),
        )
        y = y[-min(self.max_history, reach + 1) :]
        ds = ds[-len(y) :]
        base = self._base_features(y, ds)
        step = ds[1] - ds[0]
        changes = np.zeros(len(state.anchors))
        with openmp_threads(self.n_threads):
            for j, k in enumerate(state.anchors):
                model = state.models[j]
                if model is None or state.weights[j] <= 0.0:
                    continue
                last = [f[-1:] for f in (*base, *self._step_features(y, ds, step, k))]
                x = np.column_stack(last)[:, state.columns[j]]
                changes[j] = state.weights[j] * float(model.predict(x)[0])
        return replace(state, last=float(y[-1]), changes=changes)

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        if not isinstance(state, GBMState):
            raise TypeError(f"expected a GBMState, got {type(state).__name__}")
        return state.last + interpolate_changes(state.anchors, state.changes, h)


def best_weight(pred: FloatArray, actual: FloatArray, min_improvement: float) -> float:
    """Shrinkage weight with the least held-out MAE of the change forecast.

    Weight 0 is persistence; see :func:`~forecaster.models.boosting.shrink_weight`.
    """
    maes = np.array([np.mean(np.abs(actual - w * pred)) for w in SHRINK_GRID])
    return shrink_weight(maes, min_improvement)
