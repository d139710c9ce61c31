"""The estimator contract every estimator follows, the composite ones and the peak model too.

scikit-learn's: ``__init__`` stores its arguments only (read back by ``get_params``,
so a clone is equal), ``fit`` returns ``self`` and adds only attributes ending in
``_``, predicting before ``fit`` raises ``NotFittedError``, and a refit on the same
data forecasts the same. The families' forecast frames have their own contract test
(``models/test_model_contract.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from forecaster.champion import ChampionForecaster
from forecaster.estimator import clone, same_estimator
from forecaster.exceptions import NotFittedError
from forecaster.models.combination import MedianCombination
from forecaster.models.guarded import Calibrated, GuardedChoice
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.plan import TrainingPlan
from forecaster.procedure import TrainedChampion
from tests.forecaster.peak.fleet import make_fleet

DAY = 144
H = 6
FLEET = make_fleet({"big": 400.0, "small": 8.0}, days=6.0)
DEMAND = FLEET[FLEET["unique_id"].str.endswith("/demand_gpus")].reset_index(drop=True)
PLAN = TrainingPlan(
    horizon=H,
    horizons={"1h": H},
    selection_horizon="1h",
    n_windows=3,
    heldout_windows=2,
    levels=(0.5, 0.9),
    max_train=4 * DAY,
)


def families() -> list[Persistence | SeasonalNaive]:
    return [Persistence(horizon=H), SeasonalNaive(season_length=DAY, horizon=H)]


def predict(model: Any) -> pd.DataFrame:
    return model.predict(H, (0.5, 0.9))


def predict_peak(model: Any) -> pd.DataFrame:
    return model.predict_peak(FLEET)


# name -> (unfitted estimator, its training frame, its forecast)
ESTIMATORS: dict[str, tuple[Callable[[], Any], pd.DataFrame, Callable[[Any], pd.DataFrame]]] = {
    "median": (lambda: MedianCombination(families()), DEMAND, predict),
    "guarded": (lambda: GuardedChoice(families(), margin=0.2), DEMAND, predict),
    "calibrated": (lambda: Calibrated(Persistence(horizon=H)), DEMAND, predict),
    "champion": (
        lambda: ChampionForecaster(
            {"big/demand_gpus": "seasonal_naive"},
            {m.model_name: m for m in families()},
            default="persistence",
            alias="champion",
        ),
        DEMAND,
        predict,
    ),
    "trained_champion": (lambda: TrainedChampion(families(), PLAN), DEMAND, predict),
    "peak": (
        lambda: PeakQuantileForecaster(
            lead_steps=(1, 2), quantiles=(0.5, 0.9), max_iter=10, min_samples_leaf=20
        ),
        FLEET,
        predict_peak,
    ),
}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_init_stores_its_arguments_only_and_clones_equal(name: str) -> None:
    model = ESTIMATORS[name][0]()
    params = model.get_params()
    assert set(vars(model)) == set(params)
    assert same_estimator(clone(model), model)
    assert isinstance(model.model_name, str)
    assert model.model_name


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_predict_before_fit_raises(name: str) -> None:
    make, _, forecast = ESTIMATORS[name]
    with pytest.raises(NotFittedError):
        forecast(make())


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_fit_returns_self_adds_only_learned_state_and_repeats(name: str) -> None:
    make, frame, forecast = ESTIMATORS[name]
    model = make()
    before = set(vars(model))
    assert model.fit(frame) is model
    assert all(k.endswith("_") for k in set(vars(model)) - before)
    pd.testing.assert_frame_equal(forecast(model), forecast(clone(model).fit(frame)))
