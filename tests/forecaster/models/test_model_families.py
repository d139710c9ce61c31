"""Behaviour specific to each model family and the catalog."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import ConfigError, ModelError
from forecaster.models.catalog import MODELS, default_models, make_model
from forecaster.models.ets import ExponentialSmoothing, estimate_params
from forecaster.models.gbm import GBMState, GradientBoosting
from forecaster.models.mstl import MSTL, MSTLState

DAY = 48  # steps per day at the 30-min step of the conftest frames
H = 6


def _seasonal(n: int, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return 100.0 + 30.0 * np.sin(2 * np.pi * t / DAY) + rng.normal(0.0, noise, n)


def _truth(n: int, h: int) -> np.ndarray:
    t = np.arange(n, n + h)
    return 100.0 + 30.0 * np.sin(2 * np.pi * t / DAY)


@pytest.mark.parametrize(
    "model",
    [
        ExponentialSmoothing(season_length=DAY, horizon=H, calibration_window=48),
        MSTL(periods=(DAY,), horizon=H, calibration_window=48),
    ],
    ids=["ets", "mstl"],
)
def test_seasonal_pattern_recovered(
    model: ExponentialSmoothing | MSTL, make_frame: Callable[..., pd.DataFrame]
) -> None:
    n = 8 * DAY
    frame = make_frame({"s": _seasonal(n, noise=1.0, seed=1)})
    out = model.fit(frame).predict(DAY // 2, levels=(0.1, 0.9))
    truth = _truth(n, DAY // 2)
    # Persistence would miss by up to the 60-unit peak-to-trough swing.
    assert np.max(np.abs(out["mean"].to_numpy() - truth)) < 5.0
    # Intervals from out-of-sample residuals cover the noise-free path.
    assert (out["q0.1"] <= truth + 1e-9).mean() >= 0.8
    assert (out["q0.9"] >= truth - 1e-9).mean() >= 0.8


def test_mstl_drops_periods_without_two_cycles(make_frame: Callable[..., pd.DataFrame]) -> None:
    n = 5 * DAY  # two weekly cycles would need 14 days
    model = MSTL(periods=(DAY, 7 * DAY), horizon=H, calibration_window=48, select=False)
    model.fit(make_frame({"s": _seasonal(n, noise=1.0, seed=2)}))
    state = model.fits_["s"].state
    assert isinstance(state, MSTLState)
    assert [len(c) for c in state.cycles] == [DAY]


def test_ets_constant_series_forecasts_the_constant(
    make_frame: Callable[..., pd.DataFrame],
) -> None:
    frame = make_frame({"flat": np.full(4 * DAY, 8.0)})
    out = ExponentialSmoothing(season_length=DAY, horizon=H).fit(frame).predict(H)
    np.testing.assert_allclose(out["mean"], 8.0)
    np.testing.assert_allclose(out["q0.95"], 8.0)


def test_ets_zero_heavy_series_fits(make_frame: Callable[..., pd.DataFrame]) -> None:
    rng = np.random.default_rng(5)
    y = np.where(rng.random(6 * DAY) < 0.05, rng.integers(1, 40, 6 * DAY), 0).astype(float)
    out = ExponentialSmoothing(season_length=DAY, horizon=H).fit(make_frame({"q": y})).predict(H)
    assert np.isfinite(out["mean"]).all()
    assert (out["mean"] >= 0).all()


def test_estimate_params_rejects_non_finite_values() -> None:
    with pytest.raises(ModelError, match="finite"):
        estimate_params(
            np.array([1.0, np.nan, 3.0, 2.0]), trend=False, damped=False, season_length=0
        )


def test_gbm_falls_back_to_persistence_on_random_walk(
    make_frame: Callable[..., pd.DataFrame],
) -> None:
    rng = np.random.default_rng(11)
    # 40 days, so the held-out tail (20 %) is long enough to judge against persistence.
    y = 500.0 + np.cumsum(rng.normal(0.0, 1.0, 40 * DAY))
    model = GradientBoosting(season_length=DAY, week_length=7 * DAY, horizon=H, max_iter=30)
    out = model.fit(make_frame({"rw": y})).predict(H)
    state = model.fits_["rw"].state
    assert isinstance(state, GBMState)
    assert state.weights.mean() <= 0.25
    # Within a fraction of one step's noise of the last value, at every step.
    assert np.max(np.abs(out["mean"].to_numpy() - y[-1])) < 0.25


def test_gbm_learns_a_strong_daily_cycle(make_frame: Callable[..., pd.DataFrame]) -> None:
    n = 12 * DAY
    model = GradientBoosting(season_length=DAY, week_length=7 * DAY, horizon=H, max_iter=40)
    out = model.fit(make_frame({"s": _seasonal(n, noise=1.0, seed=3)})).predict(H)
    state = model.fits_["s"].state
    assert isinstance(state, GBMState)
    assert state.weights.min() > 0.0
    truth = _truth(n, H)
    persistence_error = np.abs(truth - _seasonal(n, 1.0, 3)[-1]).mean()
    assert np.abs(out["mean"].to_numpy() - truth).mean() < 0.5 * persistence_error


def test_default_models_derive_seasons_from_step() -> None:
    models = default_models(pd.Timedelta(minutes=10), horizon=18)
    by_name = {m.name: m.get_params() for m in models}
    assert set(by_name) == set(MODELS)
    assert by_name["seasonal_naive"]["season_length"] == 144
    assert by_name["ets"]["season_length"] == 144
    assert by_name["mstl"]["periods"] == (144, 1008)
    assert by_name["gbm"]["week_length"] == 1008
    assert all(params["horizon"] == 18 for params in by_name.values())
    fast = {m.name for m in default_models(pd.Timedelta(minutes=5), horizon=12, fast=True)}
    assert fast == {"persistence", "seasonal_naive", "ets"}


def test_make_model_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match="persistence") as info:
        make_model("prophet")
    assert "gbm" in str(info.value)
    assert "'prophet'" in str(info.value)


def test_make_model_rejects_unknown_hyperparameter() -> None:
    with pytest.raises(ConfigError, match="ets"):
        make_model("ets", seasonality=12)


def test_make_model_passes_hyperparameters() -> None:
    model = make_model("gbm", horizon=12, max_iter=7, alias="gbm-small")
    assert model.get_params()["max_iter"] == 7
    assert model.model_name == "gbm-small"


def test_model_error_names_the_series(make_frame: Callable[..., pd.DataFrame]) -> None:
    y = np.linspace(1.0, 50.0, 4 * DAY)
    y[10] = np.nan  # frames are validated upstream; a slip must still fail clearly
    with pytest.raises(ModelError, match=r"'pool-x/queue_gpus'.*finite"):
        ExponentialSmoothing(season_length=DAY, horizon=H).fit(make_frame({"pool-x/queue_gpus": y}))
