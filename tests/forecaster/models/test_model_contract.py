"""One contract test, run against every model family of the catalog."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import InsufficientHistoryError, NotFittedError
from forecaster.models.base import Forecaster
from forecaster.models.catalog import make_model
from forecaster.types import DS, MEAN, MODEL, STEP, UID, quantile_column

DAY = 48  # steps per day at the 30-min step of the conftest frames
H = 6
LEVELS = (0.1, 0.5, 0.9)

FAMILIES: dict[str, Callable[[], Forecaster]] = {
    "persistence": lambda: make_model("persistence", horizon=H),
    "seasonal_naive": lambda: make_model("seasonal_naive", season_length=DAY, horizon=H),
    "ets": lambda: make_model("ets", season_length=DAY, horizon=H, calibration_window=48),
    "mstl": lambda: make_model("mstl", periods=(DAY, 7 * DAY), horizon=H, calibration_window=48),
    "gbm": lambda: make_model(
        "gbm",
        season_length=DAY,
        week_length=7 * DAY,
        horizon=H,
        max_iter=15,
        min_samples_leaf=10,
        random_state=3,
    ),
    "global_gbm": lambda: make_model(
        "global_gbm",
        season_length=DAY,
        horizon=H,
        anchors=(1, 3, 6),
        max_iter=15,
        min_samples_leaf=10,
        random_state=3,
    ),
}


@pytest.fixture(params=sorted(FAMILIES))
def model(request: pytest.FixtureRequest) -> Forecaster:
    return FAMILIES[request.param]()


@pytest.fixture(scope="module")
def fitted() -> dict[str, Forecaster]:
    """Each family fitted once on the shared frame (fitting dominates test time)."""
    return {}


def _fit(name: str, frame: pd.DataFrame, cache: dict[str, Forecaster]) -> Forecaster:
    if name not in cache:
        cache[name] = FAMILIES[name]().fit(frame)
    return cache[name]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_fit_returns_self(name: str, two_series: pd.DataFrame) -> None:
    model = FAMILIES[name]()
    assert model.fit(two_series) is model
    assert set(model.fits_) == set(two_series[UID])


def test_predict_before_fit_raises(model: Forecaster) -> None:
    with pytest.raises(NotFittedError, match="fit"):
        model.predict(H)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_forecast_frame_shape_and_timestamps(
    name: str, two_series: pd.DataFrame, fitted: dict[str, Forecaster]
) -> None:
    model = _fit(name, two_series, fitted)
    h = H + 3  # beyond the calibrated horizon too
    out = model.predict(h, levels=LEVELS)
    qcols = [quantile_column(level) for level in LEVELS]
    assert list(out.columns) == [UID, DS, STEP, MODEL, MEAN, *qcols]
    assert len(out) == h * two_series[UID].nunique()
    assert (out[MODEL] == name).all()
    for col in [MEAN, *qcols]:
        assert out[col].dtype == np.float64
        assert np.isfinite(out[col]).all()
    for uid, group in out.groupby(UID):
        last = two_series.loc[two_series[UID] == uid, DS].max()
        expected = pd.date_range(last + pd.Timedelta(minutes=30), periods=h, freq="30min")
        assert list(group[DS]) == list(expected)
        assert list(group[STEP]) == list(range(1, h + 1))


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_quantiles_non_decreasing_and_nonnegative(
    name: str, two_series: pd.DataFrame, fitted: dict[str, Forecaster]
) -> None:
    out = _fit(name, two_series, fitted).predict(H, levels=LEVELS)
    values = out[[quantile_column(level) for level in LEVELS]].to_numpy()
    assert (np.diff(values, axis=1) >= -1e-9).all()
    # Both training series are >= 0, so every forecast value must be too.
    assert (out[[MEAN, *(quantile_column(level) for level in LEVELS)]] >= 0.0).all().all()


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_get_params_round_trips(name: str) -> None:
    model = FAMILIES[name]()
    params = model.get_params()
    clone = type(model)(**params)
    assert clone.get_params() == params
    assert "horizon" in params
    assert params["horizon"] == H


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_deterministic(name: str, two_series: pd.DataFrame, fitted: dict[str, Forecaster]) -> None:
    first = _fit(name, two_series, fitted).predict(H, levels=LEVELS)
    second = FAMILIES[name]().fit(two_series).predict(H, levels=LEVELS)
    pd.testing.assert_frame_equal(first, second)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_too_short_series_raises(name: str, make_frame: Callable[..., pd.DataFrame]) -> None:
    model = FAMILIES[name]()
    n = max(1, model.min_history() - 1)
    frame = make_frame({"pool-a/queue_gpus": np.arange(n, dtype=np.float64)})
    with pytest.raises(InsufficientHistoryError, match="pool-a/queue_gpus"):
        model.fit(frame)
