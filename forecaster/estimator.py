"""The estimator contract as the backtest sees it, cloning, and comparing prototypes.

Details: docs/forecasting.md, "Notes from the code", `forecaster/estimator.py`."""

from __future__ import annotations

from typing import Any, Protocol, Self

import pandas as pd

from forecaster.exceptions import UpdateError
from forecaster.types import Levels, SeriesFrame


class Estimator(Protocol):
    """What the backtest needs of a model: the estimator contract, nothing more."""

    @property
    def model_name(self) -> str:
        """The name written to the ``model`` column."""
        ...

    def get_params(self) -> dict[str, Any]:
        """Return the ``__init__`` arguments that rebuild an unfitted copy."""
        ...

    def min_history(self) -> int:
        """Return the fewest observations a series needs for ``fit``."""
        ...

    def fit(self, df: SeriesFrame) -> Self:
        """Fit every series of a long frame."""
        ...

    def predict(self, h: int, levels: Levels = ...) -> pd.DataFrame:
        """Forecast ``h`` steps: ``unique_id, ds, step, model, mean, q<level>...``."""
        ...


def clone(model: Estimator) -> Estimator:
    """Return an unfitted copy of ``model`` with the same hyperparameters."""
    return type(model)(**model.get_params())


def updated(model: Estimator, df: SeriesFrame) -> Estimator:
    """Return a fitted copy of ``model`` advanced over the series of ``df``, not refitted.

    A model updates when it has an ``update(df)`` method (the families, the
    combinations); what it learnt at ``fit`` is kept.

    Raises:
        UpdateError: when the model has no update, or it cannot advance a series.
    """
    update = getattr(model, "update", None)
    if not callable(update):
        raise UpdateError(f"{type(model).__name__} has no update; refit it")
    result: Estimator = update(df)
    return result


def same_estimator(first: object, second: object) -> bool:
    """True when two prototypes are of one type with equal hyperparameters.

    Nested estimators (a combination's members) and sequences of them are compared the
    same way, so two prototypes that are equal here fit and forecast alike.
    """
    if isinstance(first, list | tuple) and isinstance(second, list | tuple):
        return len(first) == len(second) and all(
            same_estimator(a, b) for a, b in zip(first, second, strict=True)
        )
    get_first, get_second = getattr(first, "get_params", None), getattr(second, "get_params", None)
    if callable(get_first) and callable(get_second):
        mine, theirs = get_first(), get_second()
        return (
            type(first) is type(second)
            and mine.keys() == theirs.keys()
            and all(same_estimator(mine[k], theirs[k]) for k in mine)
        )
    try:
        return bool(first == second)
    except ValueError:  # arrays: equality is elementwise, ambiguous as one bool
        return False
