"""The peak-quantile forecaster: global gradient-boosted quantiles of the lead-time peak.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/model.py`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

import numpy as np
import pandas as pd

# Imported at module level so threadpool_limits sees scikit-learn's OpenMP runtime.
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from forecaster.exceptions import InsufficientHistoryError, NotFittedError
from forecaster.models.base import Hyperparameters
from forecaster.peak.features import feature_names, series_features
from forecaster.peak.frames import SeriesInput, collect_inputs, common_step
from forecaster.peak.online import steps_per_day
from forecaster.peak.target import lead_headroom
from forecaster.peak.types import (
    DEFAULT_COVARIATES,
    DEFAULT_TARGETS,
    LAST,
    LEAD,
    SCALE,
    FloatArray,
    Role,
)
from forecaster.types import DS, UID, quantile_column


class PeakQuantileForecaster(Hyperparameters):
    """Quantiles of the demand peak over the next ``L`` steps, one model per fleet.

    Args:
        lead_steps: lead times in steps (one model per lead and quantile).
        quantiles: quantile levels in (0, 1).
        targets: signals forecast (series ``<pool>/<signal>``); default demand.
        covariates: ``(signal, role)`` pairs of the pools' other signals used as
            features; roles are ``queue`` (in target units), ``arrivals``, ``jobs``,
            ``util``.
        min_samples_leaf: least rows per leaf. Large on purpose: a leaf must pool many
            events, not the few rows of one fault seen on every series at once (on the
            Helios traces, with 40 and no clip two data stalls before an outage taught
            the model to forecast a drop to zero whenever a whole fleet went flat; 200
            and the clip below curbed it, though a few forecasts still reach the clip).
        max_bins: histogram bins per feature (at most 255).
        max_history_days: only origins this recent (per series) are trained on.
        max_rows: at most this many training rows per lead, sampled at random.
        clip_scaled: training targets are clipped to +-this many scale units, so an
            outage (a drop of the whole level) cannot dominate what a leaf learns.
        random_state: seed of the row sample and of the boosting.
        n_threads: OpenMP threads per fit.
    """

    def __init__(
        self,
        *,
        lead_steps: Sequence[int] = (1, 2),
        quantiles: Sequence[float] = (0.9, 0.95),
        targets: Sequence[str] = DEFAULT_TARGETS,
        covariates: Sequence[tuple[str, Role]] = DEFAULT_COVARIATES,
        max_iter: int = 150,
        learning_rate: float = 0.05,
        max_leaf_nodes: int = 15,
        min_samples_leaf: int = 200,
        max_bins: int = 64,
        max_history_days: float = 28.0,
        max_rows: int = 40_000,
        clip_scaled: float = 20.0,
        random_state: int | None = 0,
        n_threads: int = 1,
    ) -> None:
        self.lead_steps = lead_steps
        self.quantiles = quantiles
        self.targets = targets
        self.covariates = covariates
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.max_bins = max_bins
        self.max_history_days = max_history_days
        self.max_rows = max_rows
        self.clip_scaled = clip_scaled
        self.random_state = random_state
        self.n_threads = n_threads

    # -- fit ------------------------------------------------------------------------

    def fit(self, frame: pd.DataFrame) -> Self:
        """Fit one model per lead and quantile on every target series of ``frame``.

        Args:
            frame: long frame ``unique_id, ds, y`` holding the targets and covariates.

        Raises:
            ValueError: a lead or quantile is out of range.
            DataValidationError: no target series, or series differ in step.
            InsufficientHistoryError: too few realised peaks to train on.
        """
        leads, levels = self._checked_leads(), self._checked_levels()
        inputs = collect_inputs(frame, self.targets, self.covariates)
        step = common_step(inputs)
        day = steps_per_day(step)
        history = max(1, int(self.max_history_days * day))
        rng = np.random.default_rng(self.random_state)
        rows = [self._training_rows(item, leads, day, history) for item in inputs]
        models: dict[tuple[int, float], HistGradientBoostingRegressor] = {}
        n_rows: dict[int, int] = {}
        x_all = np.concatenate([r[0] for r in rows])
        # A role no pool of this fleet has is all missing, which the trees cannot bin.
        columns = np.flatnonzero(np.isfinite(x_all).any(axis=0))
        x = x_all[:, columns]
        for j, lead in enumerate(leads):
            z = np.concatenate([r[1][:, j] for r in rows])
            keep = np.flatnonzero(np.isfinite(z))
            if len(keep) < 2 * self.min_samples_leaf:
                raise InsufficientHistoryError(
                    f"only {len(keep)} realised lead-{lead} peaks across "
                    f"{len(inputs)} series; need at least {2 * self.min_samples_leaf}."
                )
            if len(keep) > self.max_rows:
                keep = np.sort(rng.choice(keep, size=self.max_rows, replace=False))
            n_rows[lead] = len(keep)
            with threadpool_limits(limits=self.n_threads, user_api="openmp"):
                for level in levels:
                    model = self._regressor(level)
                    models[(lead, level)] = model.fit(x[keep], z[keep])
        self.models_ = models
        self.step_ = step
        self.day_ = day
        self.columns_ = columns
        names = feature_names(leads)
        self.feature_names_ = [names[c] for c in columns]
        self.n_train_rows_ = n_rows
        self.series_ = [item.uid for item in inputs]
        return self

    def _training_rows(
        self, item: SeriesInput, leads: Sequence[int], day: int, history: int
    ) -> tuple[FloatArray, FloatArray]:
        x, s = series_features(item, leads, day)
        z = np.column_stack([lead_headroom(item.y, lead) / s for lead in leads])
        z = np.clip(z, -self.clip_scaled, self.clip_scaled)  # NaN (unrealised) stays NaN
        start = max(0, len(s) - history)
        return x[start:], z[start:]

    def _regressor(self, level: float) -> HistGradientBoostingRegressor:
        return HistGradientBoostingRegressor(
            loss="quantile",
            quantile=level,
            max_iter=self.max_iter,
            learning_rate=self.learning_rate,
            max_leaf_nodes=self.max_leaf_nodes,
            min_samples_leaf=self.min_samples_leaf,
            max_bins=self.max_bins,
            early_stopping=False,
            random_state=self.random_state,
        )

    # -- predict --------------------------------------------------------------------

    def predict_peak(self, frame: pd.DataFrame, since: pd.Timestamp | None = None) -> pd.DataFrame:
        """Forecast the lead-time peak quantiles from the data in ``frame``.

        Each origin's forecast uses only the rows of ``frame`` up to that origin.

        Args:
            frame: long frame ``unique_id, ds, y`` with the targets and covariates up
                to now (series unseen at fit time are welcome).
            since: forecast every origin at or after this time; default only each
                series' last timestamp (the forecast made now).

        Returns:
            Frame ``unique_id, ds, lead, last, scale, q<level>...``: ``ds`` is the
            origin, ``last`` the target's value there, ``q<level>`` the quantile of
            ``max(y[ds+1 .. ds+lead])`` (so ``q - last`` is the headroom).
        """
        models = self._check_fitted()
        leads, levels = self._checked_leads(), self._checked_levels()
        inputs = collect_inputs(frame, self.targets, self.covariates)
        parts = [self._predict_one(item, models, leads, levels, since) for item in inputs]
        return pd.concat(parts, ignore_index=True)  # an empty part still carries the columns

    def _predict_one(
        self,
        item: SeriesInput,
        models: dict[tuple[int, float], HistGradientBoostingRegressor],
        leads: Sequence[int],
        levels: Sequence[float],
        since: pd.Timestamp | None,
    ) -> pd.DataFrame:
        x, s = series_features(item, leads, self.day_)
        x = x[:, self.columns_]
        if since is None:
            rows = np.array([len(item.y) - 1])
        else:
            rows = np.flatnonzero(item.ds >= _as_utc(since, item.ds))
        last, scale = item.y[rows], s[rows]
        if len(rows) == 0:  # nothing at or after ``since`` in this series
            z = np.zeros((len(leads), 0, len(levels)))
        else:
            z = self._predict_scaled(x[rows], models, leads, levels)
        z = np.sort(z, axis=-1)  # quantiles never cross
        z = np.maximum.accumulate(z, axis=0)  # a longer lead's peak is never lower
        peak = last[None, :, None] + z * scale[None, :, None]
        if np.nanmin(item.y) >= 0.0:
            peak = np.maximum(peak, 0.0)
        out: dict[str, Any] = {
            UID: item.uid,
            DS: np.tile(item.ds[rows], len(leads)),
            LEAD: np.repeat(np.asarray(leads), len(rows)),
            LAST: np.tile(last, len(leads)),
            SCALE: np.tile(scale, len(leads)),
        }
        for k, q in enumerate(levels):
            out[quantile_column(q)] = peak[:, :, k].ravel()
        return pd.DataFrame(out)

    def _predict_scaled(
        self,
        x: FloatArray,
        models: dict[tuple[int, float], HistGradientBoostingRegressor],
        leads: Sequence[int],
        levels: Sequence[float],
    ) -> FloatArray:
        """Scaled headroom quantiles, shape ``(lead, row, quantile)``."""
        with threadpool_limits(limits=self.n_threads, user_api="openmp"):
            return np.stack(
                [
                    np.stack([models[(lead, q)].predict(x) for q in levels], axis=-1)
                    for lead in leads
                ]
            )

    # -- checks ---------------------------------------------------------------------

    def _check_fitted(self) -> dict[tuple[int, float], HistGradientBoostingRegressor]:
        models: dict[tuple[int, float], HistGradientBoostingRegressor] | None = getattr(
            self, "models_", None
        )
        if models is None:
            raise NotFittedError(
                "PeakQuantileForecaster is not fitted yet: call fit(frame) before predict_peak()."
            )
        return models

    def _checked_leads(self) -> list[int]:
        leads = sorted({int(lead) for lead in self.lead_steps})
        if not leads or leads[0] < 1:
            raise ValueError(f"lead_steps must be positive steps, got {self.lead_steps}")
        return leads

    def _checked_levels(self) -> list[float]:
        levels = sorted({float(q) for q in self.quantiles})
        if not levels or not all(0.0 < q < 1.0 for q in levels):
            raise ValueError(f"quantiles must be in (0, 1), got {self.quantiles}")
        return levels


def _as_utc(when: pd.Timestamp, ds: pd.DatetimeIndex) -> pd.Timestamp:
    """Align ``when`` with the frame's timezone (naive times are taken as UTC)."""
    stamp = pd.Timestamp(when)
    if ds.tz is not None and stamp.tz is None:
        return stamp.tz_localize("UTC")
    return stamp
