"""The model a replay refits: the champion as ``foresight train`` builds it, or one family.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/champion.py`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Self

import pandas as pd

from forecaster.estimator import Estimator, clone
from forecaster.exceptions import ConfigError
from forecaster.models.catalog import steps_in
from forecaster.procedure import TrainedChampion
from forecaster.types import DS, Levels, SeriesFrame, Y
from pipelines.config.settings import Settings
from pipelines.jobs.history import candidate_models, training_plan
from pipelines.simulate.walkforward import WalkForwardForecaster

CHAMPION = "champion"
"""The name of the default replayed model: the trained champion."""


def replay_model(settings: Settings, step: timedelta, family: str = CHAMPION) -> Estimator:
    """The unfitted model a replay refits: the train-time champion, or one family.

    Raises:
        ConfigError: ``family`` is neither ``champion`` nor a candidate of the model set.
    """
    plan = training_plan(settings, pd.Timedelta(step))
    candidates = candidate_models(settings, pd.Timedelta(step), plan.horizon)
    if family == CHAMPION:
        return TrainedChampion(candidates, plan)
    by_name = {c.model_name: c for c in candidates}
    if family not in by_name:
        raise ConfigError(
            f"unknown forecaster {family!r} (--model); use {CHAMPION} (what `foresight "
            f"train` builds) or pin one family of the model set: {', '.join(by_name)}"
        )
    return by_name[family]


class _Memoised:
    """One fit of a prototype, reused when the very same data is seen again."""

    def __init__(self, prototype: Estimator, cache: dict[tuple[Any, ...], Estimator]) -> None:
        self.prototype = prototype
        self.cache = cache
        self.fitted: Estimator | None = None

    @property
    def model_name(self) -> str:
        return self.prototype.model_name

    def get_params(self) -> dict[str, Any]:
        return self.prototype.get_params()

    def min_history(self) -> int:
        return self.prototype.min_history()

    def fit(self, df: SeriesFrame) -> Self:
        values = df[Y].to_numpy(dtype=float)
        key: tuple[Any, ...] = (
            len(df),
            pd.Timestamp(df[DS].iloc[0]),
            pd.Timestamp(df[DS].iloc[-1]),
            float(values.sum()),
            float((values * values).sum()),
        )
        if key not in self.cache:
            self.cache[key] = clone(self.prototype).fit(df)
        self.fitted = self.cache[key]
        return self

    def predict(self, h: int, levels: Levels = (0.5,)) -> pd.DataFrame:
        if self.fitted is None:
            raise RuntimeError("fit before predict")
        return self.fitted.predict(h, levels)


def champion_forecaster(
    settings: Settings,
    step: timedelta,
    *,
    family: str = CHAMPION,
    retrain_every: timedelta = timedelta(days=1),
    prehistory: pd.Series | None = None,
    min_history: int | None = None,
    cache: dict[tuple[Any, ...], Estimator] | None = None,
) -> WalkForwardForecaster:
    """The walk-forward forecaster of Foresight's replay policy.

    Args:
        settings: the deployment's settings (model set, horizons, windows, max_train_days).
        step: the replayed series' step.
        family: ``champion`` (default) or one family of the model set, pinned.
        retrain_every: how often the model is refitted (training runs daily by default).
        prehistory: demand before the replay, learnt from.
        min_history: observations before the first fit; default a day.
        cache: share one between forecasters of the same series to fit once.
    """
    prototype = replay_model(settings, step, family)
    memo: dict[tuple[Any, ...], Estimator] = {} if cache is None else cache
    day = steps_in(pd.Timedelta(days=1), pd.Timedelta(step))
    return WalkForwardForecaster(
        lambda: _Memoised(prototype, memo),
        retrain_every=retrain_every,
        min_history=min_history if min_history is not None else day,
        max_history=None,
        prehistory=prehistory,
    )
