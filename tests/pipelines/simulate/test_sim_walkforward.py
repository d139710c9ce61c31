"""Walk-forward forecasts: fitted on a schedule from the past only, cached across replays."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError
from forecaster.types import DS, MEAN, UID, Y
from pipelines.simulate.engine import simulate
from pipelines.simulate.types import History
from pipelines.simulate.walkforward import WalkForwardForecaster


class TrendModel:
    """A fake forecaster: the mean path rises by ``slope`` a step; records what it was fitted on."""

    fitted_on: ClassVar[list[pd.DataFrame]] = []

    def __init__(self, slope: float = 1.0) -> None:
        self.slope = slope

    model_name = "trend"

    def get_params(self) -> dict[str, Any]:
        return {"slope": self.slope}

    def min_history(self) -> int:
        return 2

    def fit(self, df: pd.DataFrame) -> Self:
        TrendModel.fitted_on.append(df.copy())
        self.last_ = float(df[Y].iloc[-1])
        self.end_ = df[DS].iloc[-1]
        return self

    def predict(self, h: int, levels: Any = (0.5,)) -> pd.DataFrame:
        steps = np.arange(1, h + 1)
        return pd.DataFrame(
            {UID: "x", DS: self.end_ + pd.Timedelta(minutes=5) * steps, MEAN: self.last_ + steps}
        )


class Recorder:
    """A policy that asks the forecaster at every step and keeps the answers."""

    def __init__(self, forecaster: WalkForwardForecaster, horizon: int = 3) -> None:
        self.forecaster, self.horizon = forecaster, horizon
        self.answers: list[dict[float, np.ndarray]] = []

    def reset(self) -> None:
        self.answers = []

    def decide(self, history: History) -> int:
        made = self.forecaster.forecast(history, self.horizon, (0.5, 0.9))
        self.answers.append(made.quantiles)
        return 1


@pytest.fixture(autouse=True)
def _clear_fits() -> None:
    TrendModel.fitted_on = []


def test_before_any_fit_the_forecast_is_persistence_and_quantiles_come_from_past_errors(
    series, pool
):
    values = [10.0, 12.0, 11.0, 15.0, 14.0, 20.0]
    forecaster = WalkForwardForecaster(TrendModel, min_history=100, max_history=None)
    recorder = Recorder(forecaster, horizon=1)
    simulate(series(values), pool(), recorder)
    # No fit (min_history 100): the point is the last value.
    assert recorder.answers[0][0.5].tolist() == [10.0]
    # At step 3 the 1-step errors known are 12-10, 11-12, 15-11 = 2, -1, 4; the 0.5
    # quantile ("higher" method) of them is 2, so 15 + 2.
    assert recorder.answers[3][0.5].tolist() == [17.0]
    assert recorder.answers[3][0.9].tolist() == [19.0]
    assert TrendModel.fitted_on == []


def test_retrains_on_the_schedule_with_only_the_past(series, pool):
    rng = np.random.default_rng(3)
    values = rng.gamma(3.0, 10.0, 60)
    forecaster = WalkForwardForecaster(
        TrendModel, retrain_every=timedelta(minutes=50), min_history=12, max_history=20
    )
    demand = series(values)
    simulate(demand, pool(), Recorder(forecaster))
    # First fit when 12 values are seen (step 11), then every 10 steps (50 min / 5 min).
    fit_steps = [11, 21, 31, 41, 51]
    assert forecaster.fit_log == [demand.index[t] for t in fit_steps]
    for t, frame in zip(fit_steps, TrendModel.fitted_on, strict=True):
        assert frame[DS].iloc[-1] == demand.index[t]  # nothing after the fit's step
        assert len(frame) == min(t + 1, 20)  # max_history bounds the window
        assert frame[Y].tolist() == pytest.approx(values[max(0, t + 1 - 20) : t + 1])


def test_the_fitted_shape_moves_the_latest_value(series, pool):
    values = np.full(30, 50.0)
    values[20:] = 70.0
    forecaster = WalkForwardForecaster(
        TrendModel, retrain_every=timedelta(days=1), min_history=10, calibration=1
    )
    recorder = Recorder(forecaster, horizon=2)
    simulate(series(values), pool(), recorder)
    # Fitted at step 9 with slope 1: the point is 70 + 1, 70 + 2; the newest known
    # residual at each horizon (calibration=1) is 70 - 71 = -1 and 70 - 72 = -2.
    assert recorder.answers[29][0.5].tolist() == pytest.approx([71.0 - 1.0, 72.0 - 2.0])


@pytest.mark.parametrize("cut", [15, 30, 44])
def test_a_different_future_leaves_every_earlier_forecast_unchanged(series, pool, cut):
    rng = np.random.default_rng(cut)
    values = rng.gamma(2.0, 20.0, 60)
    changed = values.copy()
    changed[cut + 1 :] = rng.gamma(2.0, 60.0, 60 - cut - 1)

    def answers(v: np.ndarray) -> list[dict[float, np.ndarray]]:
        forecaster = WalkForwardForecaster(
            TrendModel, retrain_every=timedelta(minutes=30), min_history=8
        )
        recorder = Recorder(forecaster)
        simulate(series(v), pool(), recorder)
        return recorder.answers

    before, after = answers(values), answers(changed)
    for t in range(cut + 1):
        for level in (0.5, 0.9):
            np.testing.assert_array_equal(before[t][level], after[t][level])
    assert any(not np.array_equal(before[t][0.9], after[t][0.9]) for t in range(cut + 1, 60))


def test_one_forecaster_serves_several_replays_and_notices_a_different_series(series, pool):
    rng = np.random.default_rng(1)
    values = rng.gamma(2.0, 20.0, 50)
    forecaster = WalkForwardForecaster(TrendModel, retrain_every=timedelta(hours=1), min_history=8)
    first, second = Recorder(forecaster), Recorder(forecaster)
    simulate(series(values), pool(), first)
    fits = len(TrendModel.fitted_on)
    simulate(series(values), pool(), second)
    assert len(TrendModel.fitted_on) == fits  # the cache served the second replay
    for a, b in zip(first.answers, second.answers, strict=True):
        np.testing.assert_array_equal(a[0.9], b[0.9])

    other = values.copy()
    other[30:] += 100.0
    third = Recorder(forecaster)
    simulate(series(other), pool(), third)
    fresh = Recorder(
        WalkForwardForecaster(TrendModel, retrain_every=timedelta(hours=1), min_history=8)
    )
    simulate(series(other), pool(), fresh)
    for a, b in zip(third.answers, fresh.answers, strict=True):
        np.testing.assert_array_equal(a[0.9], b[0.9])


def test_prehistory_must_end_just_before_the_replay(series, pool):
    demand = series([5.0] * 10)
    early = pd.Series([1.0, 2.0], index=demand.index[:2] - pd.Timedelta(hours=1))
    forecaster = WalkForwardForecaster(TrendModel, prehistory=early)
    with pytest.raises(DataValidationError, match="one step"):
        simulate(demand, pool(), Recorder(forecaster))


def test_prehistory_seeds_the_fit(series, pool):
    demand = series([5.0] * 10)
    pre = pd.Series(
        np.arange(20.0), index=demand.index[0] - pd.Timedelta(minutes=5) * np.arange(20, 0, -1)
    )
    forecaster = WalkForwardForecaster(TrendModel, prehistory=pre, min_history=12)
    simulate(demand, pool(), Recorder(forecaster))
    # The first fit came inside the prehistory, as soon as 12 values were known.
    assert forecaster.fit_log[0] == pre.index[11]
    assert TrendModel.fitted_on[0][Y].tolist() == list(np.arange(12.0))
