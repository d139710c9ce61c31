"""The model catalog: candidate sets per series step and construction by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from forecaster.exceptions import ConfigError
from forecaster.models.base import Forecaster
from forecaster.models.ets import ExponentialSmoothing
from forecaster.models.gbm import GradientBoosting
from forecaster.models.global_gbm import GlobalGradientBoosting
from forecaster.models.mstl import MSTL
from forecaster.models.naive import Persistence, SeasonalNaive

DAY = pd.Timedelta(days=1)
WEEK = pd.Timedelta(weeks=1)

MODELS: dict[str, Callable[..., Forecaster]] = {
    Persistence.name: Persistence,
    "seasonal_naive": SeasonalNaive,
    "ets": ExponentialSmoothing,
    "mstl": MSTL,
    "gbm": GradientBoosting,
    "global_gbm": GlobalGradientBoosting,
}
"""Constructors by model name (the ``name`` attribute of each family)."""


def steps_in(period: pd.Timedelta, step: pd.Timedelta) -> int:
    """Return how many steps make up ``period`` (at least 1).

    Raises:
        ConfigError: when the step is not positive.
    """
    if step <= pd.Timedelta(0):
        raise ConfigError(f"series step must be positive, got {step}")
    return max(1, round(period / step))


def default_models(step: pd.Timedelta, horizon: int, fast: bool = False) -> list[Forecaster]:
    """Return the candidate models for series with this step.

    Season lengths are a day and a week expressed in steps; about four weeks of
    history are used by the fitted families. ``fast`` drops MSTL and the gradient
    boosting families (the slowest fits) and shortens the history, for smoke runs and
    tests.

    Args:
        step: the series' regular sampling step.
        horizon: steps ahead the intervals are calibrated for.
        fast: a quick candidate set.
    """
    day = steps_in(DAY, step)
    week = steps_in(WEEK, step)
    history = 4 * week if not fast else 2 * week
    calibration = 2 * day if not fast else day // 2 or 1
    models: list[Forecaster] = [
        Persistence(horizon=horizon, window=week),
        SeasonalNaive(season_length=day, horizon=horizon, window=week),
        ExponentialSmoothing(
            season_length=day,
            horizon=horizon,
            max_history=history,
            calibration_window=calibration,
            select=not fast,
        ),
    ]
    if not fast:
        models += [
            MSTL(
                periods=(day, week),
                horizon=horizon,
                max_history=history,
                calibration_window=calibration,
            ),
            GradientBoosting(
                season_length=day, week_length=week, horizon=horizon, max_history=history
            ),
            # Learnt across the series of the frame it is fitted on (forecaster.fleet).
            GlobalGradientBoosting(season_length=day, horizon=horizon, max_history=history),
        ]
    return models


def make_model(name: str, **params: Any) -> Forecaster:
    """Build a model from its catalog name and hyperparameters.

    Raises:
        ConfigError: for an unknown name or a hyperparameter the family does not take.
    """
    try:
        factory = MODELS[name]
    except KeyError:
        valid = ", ".join(sorted(MODELS))
        raise ConfigError(
            f"unknown model {name!r}; valid names are: {valid}. Fix the model name in the "
            "configuration."
        ) from None
    try:
        return factory(**params)
    except TypeError as exc:
        raise ConfigError(f"invalid hyperparameters for model {name!r}: {exc}") from exc
