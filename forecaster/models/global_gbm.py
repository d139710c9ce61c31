"""Global gradient boosting: one model per fleet, learnt on all its series at once.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/global_gbm.py`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Final, Self

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from forecaster.exceptions import InsufficientHistoryError, UpdateError
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
from forecaster.models.global_features import (
    Prepared,
    base_features,
    last_base_features,
    rows,
    sample,
    series_scale,
    stack,
    step_features,
)
from forecaster.models.residuals import Calibration
from forecaster.types import DS, UID, SeriesFrame, Y

DEFAULT_ANCHORS: Final[tuple[int, ...]] = (1, 3, 6, 12, 24, 36, 72, 144, 288)


@dataclass(frozen=True, eq=False)  # regressors have no useful ``==``; identity is enough
class FleetModel:
    """The pooled part of a global model: regressors learnt on a fleet's series.

    Attributes:
        anchors: the anchor steps, one regressor each (``None`` where too few rows).
        fold_models: regressors learnt on the rows before each series' held-out tail.
        final_models: regressors learnt on all the rows.
        fleet_errors: mean absolute scaled error of each shrink weight (rows, in the
            order of ``SHRINK_GRID``) at each anchor (columns) on the held-out tails of
            the whole fleet; NaN where nothing was scored.
        series: the series it was learnt on.
        last_ds: the newest observation it saw.
        key: names this learning of it: copies made by pickling (a per-series fit
            sent back from a worker) keep it, so :func:`forecaster.fleet.share_fleets`
            can make them one object again.
    """

    anchors: tuple[int, ...]
    fold_models: tuple[Any, ...]
    final_models: tuple[Any, ...]
    fleet_errors: FloatArray
    series: tuple[str, ...] = field(repr=False)
    last_ds: pd.Timestamp
    key: str = field(default_factory=lambda: uuid.uuid4().hex, repr=False)

    def __repr__(self) -> str:
        return f"FleetModel({len(self.series)} series to {self.last_ds}, anchors {self.anchors})"


@dataclass(frozen=True)
class GlobalState:
    """Last value plus the (shrunk, unscaled) predicted change at each anchor step."""

    last: float
    scale: float
    anchors: tuple[int, ...]
    changes: FloatArray
    weights: FloatArray


class GlobalGradientBoosting(AnchoredBoosting):
    """Direct multi-horizon gradient boosting learnt on all series of a fleet.

    Args:
        season_length: steps in a day; the day-window features and the same-time-a-day
            -earlier features use it.
        anchors: candidate anchor steps; those up to ``horizon`` (plus ``horizon``) get
            a regressor.
        validation_fraction: share of every series held out for the shrinkage and the
            calibration residuals.
        min_improvement: relative held-out gain over persistence a weight needs.
        max_history: only each series' last this many observations are used.
        max_rows: most training rows per regressor; larger fleets are subsampled with
            an even stride over every series' origins, so the cost stays bounded.
        n_threads: OpenMP threads per regressor fit.
        fleet: a fleet model learnt beforehand (:meth:`learn_fleet`); ``None`` learns
            it from the frame given to ``fit``.
        horizon: steps ahead the intervals are calibrated for.
    """

    name = "global_gbm"
    joint = True
    """Marks a family whose fit learns from every series of the frame together."""

    def __init__(
        self,
        *,
        season_length: int = 144,
        anchors: tuple[int, ...] = DEFAULT_ANCHORS,
        max_iter: int = 30,
        learning_rate: float = 0.2,
        max_leaf_nodes: int = 15,
        max_bins: int = 64,
        min_samples_leaf: int = 200,
        validation_fraction: float = 0.2,
        min_improvement: float = 0.02,
        max_history: int = 4032,
        max_rows: int = 60_000,
        random_state: int | None = 0,
        n_threads: int = 1,
        fleet: FleetModel | None = None,
        horizon: int = 36,
        alias: str | None = None,
    ) -> None:
        super().__init__(horizon=horizon, alias=alias)
        self.season_length = season_length
        self.anchors = anchors
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.max_bins = max_bins
        self.min_samples_leaf = min_samples_leaf
        self.validation_fraction = validation_fraction
        self.min_improvement = min_improvement
        self.max_history = max_history
        self.max_rows = max_rows
        self.random_state = random_state
        self.n_threads = n_threads
        self.fleet = fleet

    def with_fleet(self, fleet: FleetModel) -> GlobalGradientBoosting:
        """Return an unfitted copy that uses ``fleet`` instead of learning one."""
        return type(self)(**{**self.get_params(), "fleet": fleet})

    # -- fit --------------------------------------------------------------------

    def fit(self, df: SeriesFrame) -> Self:
        """Fit every series of ``df``, learning the fleet model from all of them first.

        With ``fleet`` given, that fleet model is used and only the per-series part
        runs. A series too short for ``min_history`` raises, as in every family.
        """
        self.fleet_ = self.fleet if self.fleet is not None else self.learn_fleet(df)
        return super().fit(df)

    def learn_fleet(self, df: SeriesFrame) -> FleetModel:
        """Learn the pooled regressors from every long-enough series of ``df``.

        Raises:
            InsufficientHistoryError: when no series has ``min_history`` observations.
        """
        every = [(str(uid), g) for uid, g in df.groupby(UID, sort=True, observed=True)]
        groups = [(uid, g) for uid, g in every if len(g) >= self.min_history()]
        if not groups:
            short = ", ".join(f"{uid!r} ({len(g)})" for uid, g in every[:5])
            raise InsufficientHistoryError(
                f"no series has the {self.min_history()} observations {self.model_name} "
                f"needs to learn a fleet model (series and lengths: {short}"
                f"{', ...' if len(every) > 5 else ''}); provide more history."
            )
        total = sum(min(len(g), self.max_history) for _, g in groups)
        stride = max(1, int(np.ceil(total / self.max_rows)))
        # Each series is sampled as soon as it is prepared: memory follows max_rows.
        sampled = [
            sample(self._prepare(g[Y].to_numpy(dtype=np.float64), pd.DatetimeIndex(g[DS])), stride)
            for _, g in groups
        ]
        names = [uid for uid, _ in groups]
        anchors = self.anchor_steps()
        fold_models: list[Any] = []
        final_models: list[Any] = []
        errors = np.full((len(SHRINK_GRID), len(anchors)), np.nan)
        grid = np.asarray(SHRINK_GRID)[:, None]
        with threadpool_limits(limits=self.n_threads, user_api="openmp"):
            for j, k in enumerate(anchors):
                parts = [rows(p, k, self.season_length) for p in sampled]
                fold_model = self._train(*stack(parts, "fold"))
                if fold_model is not None:
                    scored_x, scored_t = stack(parts, "scored")
                    if len(scored_t):
                        pred = np.asarray(fold_model.predict(scored_x), dtype=np.float64)
                        errors[:, j] = np.mean(
                            np.abs(scored_t[None, :] - grid * pred[None, :]), axis=1
                        )
                fold_models.append(fold_model)
                final_models.append(self._train(*stack(parts, "all")))
        return FleetModel(
            anchors=anchors,
            fold_models=tuple(fold_models),
            final_models=tuple(final_models),
            fleet_errors=errors,
            series=tuple(names),
            last_ds=max(p.ds[-1] for p in sampled),
        )

    def _fit_and_calibrate(self, y: FloatArray, ds: pd.DatetimeIndex) -> tuple[Any, Calibration]:
        fleet = getattr(self, "fleet_", None) or self.fleet
        if fleet is None:  # a direct per-series call: the series is its own fleet
            frame = pd.DataFrame({UID: "series", DS: ds, Y: y})
            fleet = self.learn_fleet(frame)
        p = self._prepare(y, ds)
        n = len(p.y)
        anchors = fleet.anchors
        fold_origins = np.arange(p.fold_start, n - 1)
        fold_changes = np.zeros((len(fold_origins), len(anchors)))
        final_changes = np.zeros(len(anchors))
        weights = np.zeros(len(anchors))
        grid = np.asarray(SHRINK_GRID)
        with openmp_threads(self.n_threads):
            for j, k in enumerate(anchors):
                fold_model, final_model = fleet.fold_models[j], fleet.final_models[j]
                if fold_model is None or final_model is None:
                    continue  # too little to learn: weight 0 = persistence
                x = np.column_stack([p.base, step_features(p, k, p.origins, self.season_length)])
                target = (shift(p.y, -k) - p.y) / p.scale
                pred = np.asarray(fold_model.predict(x[fold_origins]), dtype=np.float64)
                scored = fold_origins + k < n
                own = np.zeros(len(grid))
                if scored.any():
                    actual_change = target[fold_origins[scored]]
                    own = np.mean(
                        np.abs(actual_change[None, :] - grid[:, None] * pred[scored][None, :]),
                        axis=1,
                    )
                weights[j] = _best_weight(own, fleet.fleet_errors[:, j], self.min_improvement)
                fold_changes[:, j] = weights[j] * pred * p.scale
                if weights[j] > 0.0:
                    change = float(final_model.predict(x[-1:])[0])
                    final_changes[j] = weights[j] * change * p.scale
        state = GlobalState(
            last=float(p.y[-1]),
            scale=p.scale,
            anchors=anchors,
            changes=final_changes,
            weights=weights,
        )
        return state, PathResiduals.of(p.y[p.fold_start :], anchors, fold_changes, self.horizon)

    def _update_state(
        self, state: Any, y: FloatArray, ds: pd.DatetimeIndex, last_ds: pd.Timestamp
    ) -> Any:
        """Forecast the changes from the newest origin with the fleet's kept regressors."""
        fleet = getattr(self, "fleet_", None) or self.fleet
        if not isinstance(state, GlobalState) or fleet is None:
            raise UpdateError("global_gbm state without its fleet model")
        if fleet.anchors != state.anchors:
            raise UpdateError("global_gbm state and fleet model disagree on the anchors")
        y = y[-self.max_history :]
        ds = ds[-self.max_history :]
        p = Prepared(
            y=y,
            ds=ds,
            scale=state.scale,
            origins=np.arange(len(y)),
            base=last_base_features(y, state.scale, self.season_length),
            fold_start=self._fold_start(len(y)),
        )
        last = p.origins[-1:]
        changes = np.zeros(len(state.anchors))
        with openmp_threads(self.n_threads):
            for j, k in enumerate(state.anchors):
                final_model = fleet.final_models[j]
                if final_model is None or state.weights[j] <= 0.0:
                    continue
                x = np.column_stack([p.base, step_features(p, k, last, self.season_length)])
                change = float(final_model.predict(x)[0])
                changes[j] = state.weights[j] * change * state.scale
        return replace(state, last=float(y[-1]), changes=changes)

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        if not isinstance(state, GlobalState):
            raise TypeError(f"expected a GlobalState, got {type(state).__name__}")
        return state.last + interpolate_changes(state.anchors, state.changes, h)

    # -- series and regressors ----------------------------------------------------

    def _prepare(self, y: FloatArray, ds: pd.DatetimeIndex) -> Prepared:
        y = y[-self.max_history :]
        ds = ds[-self.max_history :]
        scale = series_scale(y)
        return Prepared(
            y=y,
            ds=ds,
            scale=scale,
            origins=np.arange(len(y)),
            base=base_features(y, scale, self.season_length),
            fold_start=self._fold_start(len(y)),
        )

    def _train(self, x: FloatArray, target: FloatArray) -> Any:
        if len(target) < 2 * self.min_samples_leaf:
            return None
        return self._regressor().fit(x, target)


def _best_weight(own: FloatArray, fleet: FloatArray, min_improvement: float) -> float:
    """Shrink weight with the least own plus fleet held-out error (weight 0: persistence).

    A weight other than 0 must beat persistence's combined error by the relative margin
    ``min_improvement``. Where the fleet scored nothing, the series' own error decides.
    """
    score = own + np.where(np.isfinite(fleet), fleet, 0.0)
    if not np.all(np.isfinite(score)):
        return 0.0
    return shrink_weight(score, min_improvement)
