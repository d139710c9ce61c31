"""The champion: one model that routes every series to the family selected for it.

Details: docs/forecasting.md, "Notes from the code", `forecaster/champion.py`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Executor
from typing import Any, Final, Self

import pandas as pd

from forecaster.estimator import Estimator, clone, updated
from forecaster.exceptions import ForesightError, ModelError, NotFittedError, UpdateError
from forecaster.fanout import fan_out
from forecaster.fleet import share_fleets, with_fleet
from forecaster.models.base import Hyperparameters
from forecaster.types import DEFAULT_LEVELS, MODEL, PERSISTENCE, UID, Levels, SeriesFrame

FAMILY: Final = "family"
"""Column of the champion's forecast frames: the family that produced each row."""


class ChampionForecaster(Hyperparameters):
    """Per-series routing model over fitted candidate families.

    Args:
        selection: ``{unique_id: family}``, e.g. from ``select_per_series``.
        candidates: ``{family: unfitted prototype}``; each series is fitted on a fresh
            copy of its family's prototype (rebuilt from ``get_params``).
        default: family for series absent from ``selection``; ``None`` makes such a
            series an error at ``fit``.
        alias: the name written to the ``model`` column.
    """

    name = "champion"
    refits_: dict[str, str]
    """After :meth:`update`: each series refitted rather than updated, and why."""

    def __init__(
        self,
        selection: Mapping[str, str],
        candidates: Mapping[str, Estimator],
        default: str | None = None,
        alias: str | None = None,
    ) -> None:
        self.selection = selection
        self.candidates = candidates
        self.default = default
        self.alias = alias

    def min_history(self) -> int:
        """Return the fewest observations any selected family needs."""
        families = set(self.selection.values()) | ({self.default} if self.default else set())
        needs = [self.candidates[f].min_history() for f in families if f in self.candidates]
        return min(needs, default=2)

    def unfitted(self) -> ChampionForecaster:
        """Return an unfitted champion with the same choices, to refit on newer data.

        The registered state is as old as the training; the families, their
        hyperparameters and each series' choice are what it chose. A series it never
        saw gets its default (persistence for a champion saved without one).
        """
        return ChampionForecaster(
            self.selection, self.candidates, default=self.default or PERSISTENCE, alias="champion"
        )

    def family_of(self, uid: str) -> str:
        """Return the family that serves ``uid``.

        Raises:
            ModelError: when the series has no selected family, or the family is not
                among the candidates.
        """
        family = self.selection.get(uid, self.default)
        if family is None:
            raise ModelError(
                f"series {uid!r} has no selected model and no default; add it to the "
                "selection or pass default= (e.g. 'persistence')."
            )
        if family not in self.candidates:
            raise ModelError(
                f"series {uid!r} selects {family!r}, which is not a candidate "
                f"({sorted(self.candidates)})."
            )
        return family

    def fit(self, df: SeriesFrame, executor: Executor | None = None) -> Self:
        """Fit every series of ``df`` with a fresh copy of its selected family.

        Args:
            df: long frame of the series to fit.
            executor: fits the series on a process pool or Dask (a few per task,
                :func:`forecaster.fanout.fan_out`) instead of one after another in this
                process; the fitted models are the same.
        """
        groups = {str(uid): g for uid, g in df.groupby(UID, sort=True, observed=True)}
        families = {uid: self.family_of(uid) for uid in groups}
        # A joint family (e.g. global_gbm, alone or in the median) learns its fleet model
        # here, once, from every series of df; the per-series fits below reuse it.
        memo: dict[int, Any] = {}
        prototypes = {
            f: with_fleet(self.candidates[f], df, memo) for f in sorted(set(families.values()))
        }
        tasks = [(prototypes[families[uid]], g) for uid, g in groups.items()]
        if executor is None:
            fitted = [_fit_series(*task) for task in tasks]
        else:
            fitted = fan_out(executor, _fit_series, tasks)
            # Each task's results came back with their own copy of the fleet models.
            share_fleets(fitted)
        self.models_ = dict(zip(groups, fitted, strict=True))
        self.families_ = families
        return self

    def predict(self, h: int, levels: Levels = DEFAULT_LEVELS) -> pd.DataFrame:
        """Forecast ``h`` steps of every fitted series.

        Returns:
            ``unique_id, ds, step, model, mean, q<level>..., family``; ``model`` is
            the champion's name, ``family`` the family that forecast the series.
        """
        models = self._check_fitted()
        frames = []
        for uid, model in models.items():
            frame = model.predict(h, levels)
            frame[MODEL] = self.model_name
            frame[FAMILY] = self.families_[uid]
            frames.append(frame)
        return pd.concat(frames, ignore_index=True)

    def update(self, df: SeriesFrame) -> ChampionForecaster:
        """Return a fitted copy whose series of ``df`` are advanced to their newest values.

        Each series' fitted model is updated with its recent history (what it learnt
        at the training is kept: parameters, trees, the fleet's pooled regressors, the
        calibration residuals; see :meth:`forecaster.models.base.Forecaster.update`).
        A series whose model cannot be updated is refitted from its own model's
        hyperparameters, which hold the fleet model learnt at the training, and
        ``refits_`` of the copy names it and says why.

        Raises:
            UpdateError: when a series of ``df`` was not fitted by this champion.
            ForesightError: when a series could be neither updated nor refitted.
        """
        models = self._check_fitted()
        copy = ChampionForecaster(
            self.selection, self.candidates, default=self.default, alias=self.alias
        )
        fresh: dict[str, Estimator] = {}
        refits: dict[str, str] = {}
        for uid, group in df.groupby(UID, sort=True, observed=True):
            model = models.get(str(uid))
            if model is None:
                raise UpdateError(f"series {uid!r} was not fitted by this champion")
            try:
                fresh[str(uid)] = updated(model, group)
            except ForesightError as exc:
                fresh[str(uid)] = _fit_series(model, group)
                refits[str(uid)] = str(exc)
        copy.models_ = fresh
        copy.families_ = {uid: self.families_[uid] for uid in fresh}
        copy.refits_ = refits
        return copy

    def restricted_to(self, series: Iterable[str]) -> ChampionForecaster:
        """Return a fitted copy that forecasts only ``series`` (those it knows).

        The copy shares this champion's fitted models, in the same order: a request
        for a few series of a large champion costs those series' forecasts only.
        """
        models = self._check_fitted()
        wanted = set(series)
        copy = ChampionForecaster(
            self.selection, self.candidates, default=self.default, alias=self.alias
        )
        copy.models_ = {uid: model for uid, model in models.items() if uid in wanted}
        copy.families_ = {uid: self.families_[uid] for uid in copy.models_}
        return copy

    def fitted_series(self) -> frozenset[str]:
        """Return the series this champion holds fitted models of (none when unfitted)."""
        models: dict[str, Estimator] | None = getattr(self, "models_", None)
        return frozenset(models or ())

    def describe(self) -> dict[str, str]:
        """Return ``{unique_id: family}`` of the fitted series."""
        self._check_fitted()
        return dict(self.families_)

    def _check_fitted(self) -> dict[str, Estimator]:
        models: dict[str, Estimator] | None = getattr(self, "models_", None)
        if models is None:
            raise NotFittedError("ChampionForecaster is not fitted yet: call fit(df) first.")
        return models


def _fit_series(prototype: Estimator, group: pd.DataFrame) -> Estimator:
    """Fit a fresh copy of ``prototype`` on one series (module level: executors pickle it)."""
    return clone(prototype).fit(group)
