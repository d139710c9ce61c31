"""Gradient boosting's model size: anchors, tree settings, and which models are fitted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from forecaster.models.boosting import shift
from forecaster.models.gbm import DEFAULT_ANCHORS, GBMState, GradientBoosting

DAY = 48  # steps per day at the 30-min step of the conftest frames


def _seasonal(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return 100.0 + 30.0 * np.sin(2 * np.pi * t / DAY) + rng.normal(0.0, 1.0, n)


def test_regressor_gets_the_tree_settings() -> None:
    model = GradientBoosting(max_iter=7, learning_rate=0.25, max_leaf_nodes=5, max_bins=16)
    params = model._regressor().get_params()
    assert (params["max_iter"], params["learning_rate"]) == (7, 0.25)
    assert (params["max_leaf_nodes"], params["max_bins"]) == (5, 16)
    assert model.get_params()["max_bins"] == 16


def test_defaults_are_the_small_models() -> None:
    params = GradientBoosting().get_params()
    assert (params["max_iter"], params["learning_rate"]) == (20, 0.3)
    assert (params["max_leaf_nodes"], params["max_bins"]) == (7, 32)
    assert params["anchors"] == DEFAULT_ANCHORS


@pytest.mark.parametrize(
    ("horizon", "expected"),
    [(36, (1, 3, 12, 36)), (18, (1, 3, 12, 18)), (2, (1, 2)), (1, (1,))],
)
def test_default_anchor_steps(horizon: int, expected: tuple[int, ...]) -> None:
    assert GradientBoosting(horizon=horizon).anchor_steps() == expected


def test_final_forecast_uses_the_fold_models(
    make_frame: Callable[..., pd.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    n, horizon = 12 * DAY, 36
    rows: list[int] = []
    fit = HistGradientBoostingRegressor.fit

    def recording_fit(self: Any, x: Any, y: Any, *args: Any, **kwargs: Any) -> Any:
        rows.append(len(x))
        return fit(self, x, y, *args, **kwargs)

    monkeypatch.setattr(HistGradientBoostingRegressor, "fit", recording_fit)
    model = GradientBoosting(season_length=DAY, week_length=7 * DAY, horizon=horizon)
    model.fit(make_frame({"s": _seasonal(n, seed=4)}))
    state = model.fits_["s"].state
    assert isinstance(state, GBMState)
    assert state.anchors == (1, 3, 12, 36)
    assert (state.weights > 0.0).all()  # a clean daily cycle: every anchor is used
    # Per anchor k: one fit, the fold model on origins before the held-out tail.
    fold_start = n - max(2 * horizon, int(0.2 * n))
    assert rows == [fold_start - k for k in state.anchors]


def test_a_history_shorter_than_a_week_still_fits() -> None:
    """Five days at 5 min: the week lags have no value, so they are left out of the fit."""
    n = 288 * 5
    t = np.arange(n)
    y = 50.0 + 10.0 * np.sin(2 * np.pi * t / 288) + np.random.default_rng(0).normal(0, 1, n)
    ds = pd.date_range("2024-01-01", periods=n, freq="5min", tz="UTC")
    frame = pd.DataFrame({"unique_id": "a", "ds": ds, "y": y})
    model = GradientBoosting(horizon=36).fit(frame)
    forecast = model.predict(36)
    assert np.isfinite(forecast["mean"]).all()
    # The day lags carry the cycle: some anchor beats persistence on the held-out tail.
    state = model.fits_["a"].state
    assert isinstance(state, GBMState)
    assert np.any(state.weights > 0)


def test_shift_by_more_than_the_series_is_all_missing() -> None:
    y = np.arange(5, dtype=np.float64)
    assert np.isnan(shift(y, 7)).all()
    assert np.isnan(shift(y, -5)).all()
    np.testing.assert_array_equal(shift(y, 2), [np.nan, np.nan, 0.0, 1.0, 2.0])
