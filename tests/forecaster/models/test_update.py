"""Updating a fitted family with newer observations instead of refitting it.

An update keeps what the fit learnt (parameters, trees, the fleet's regressors,
calibration residuals) and moves the state the forecast starts from to the newest
observation. On the fit's own history it is the fit; for the baselines it is the
refit; for the smoothing families it is the fit's recursion run on over the new values.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from forecaster.champion import ChampionForecaster
from forecaster.estimator import Estimator, clone, updated
from forecaster.exceptions import UpdateError
from forecaster.fleet import with_fleet
from forecaster.models.base import Forecaster
from forecaster.models.ets import ExponentialSmoothing, smoothing_filter
from forecaster.models.gbm import GBMState, GradientBoosting
from forecaster.models.global_features import base_features, last_base_features
from forecaster.models.global_gbm import GlobalGradientBoosting
from forecaster.models.guarded import GuardedChoice
from forecaster.models.mstl import MSTL
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.types import DS, MEAN, UID, Y
from tests.forecaster.models.conftest import DAY

HORIZON = 6
LEVELS = (0.1, 0.9)
NEW = 5
"""Observations that arrive after the fit."""


def families() -> list[Forecaster]:
    return [
        Persistence(horizon=HORIZON, window=2 * DAY),
        SeasonalNaive(season_length=DAY, horizon=HORIZON, window=2 * DAY),
        ExponentialSmoothing(
            season_length=DAY, horizon=HORIZON, max_history=8 * DAY, calibration_window=DAY
        ),
        MSTL(periods=(DAY,), horizon=HORIZON, max_history=8 * DAY, calibration_window=DAY),
        GradientBoosting(season_length=DAY, week_length=7 * DAY, horizon=HORIZON),
        GlobalGradientBoosting(season_length=DAY, horizon=HORIZON, min_samples_leaf=20),
    ]


def earlier(frame: pd.DataFrame, drop: int = NEW) -> pd.DataFrame:
    """Every series without its last ``drop`` observations."""
    return frame[frame.groupby(UID).cumcount(ascending=False) >= drop]


def ids(model: Forecaster) -> str:
    return model.name


@pytest.mark.parametrize("family", families(), ids=ids)
def test_an_update_on_the_fits_own_history_is_the_fit(
    family: Forecaster, two_series: pd.DataFrame
) -> None:
    fitted = with_fleet(family, two_series).fit(two_series)
    before = fitted.predict(HORIZON, LEVELS)
    after = fitted.update(two_series).predict(HORIZON, LEVELS)
    pd.testing.assert_frame_equal(before, after)


@pytest.mark.parametrize("family", families(), ids=ids)
def test_an_update_forecasts_from_the_newest_observation(
    family: Forecaster, two_series: pd.DataFrame
) -> None:
    old = earlier(two_series)
    fitted = with_fleet(family, old).fit(old)
    stale = fitted.predict(HORIZON, LEVELS)
    fresh = fitted.update(two_series).predict(HORIZON, LEVELS)
    newest = two_series.groupby(UID)[DS].max()
    first = fresh.groupby(UID)[DS].min()
    step = two_series[DS].iloc[1] - two_series[DS].iloc[0]
    assert (first == newest + step).all()
    assert not np.allclose(stale[MEAN], fresh[MEAN])
    # The fit itself is left as it was.
    pd.testing.assert_frame_equal(stale, fitted.predict(HORIZON, LEVELS))


@pytest.mark.parametrize("family", [Persistence(horizon=HORIZON), SeasonalNaive(DAY, HORIZON)])
def test_the_baselines_update_is_their_refit(family: Forecaster, two_series: pd.DataFrame) -> None:
    fitted = clone(family).fit(earlier(two_series))
    refit = clone(family).fit(two_series).predict(HORIZON, LEVELS)
    pd.testing.assert_frame_equal(fitted.update(two_series).predict(HORIZON, LEVELS), refit)


@pytest.mark.parametrize("family", families()[2:4], ids=ids)
def test_smoothing_runs_the_fits_recursion_on_over_the_new_values(
    family: Forecaster, two_series: pd.DataFrame
) -> None:
    old = earlier(two_series)
    fitted = family.fit(old)
    moved = fitted.update(two_series)
    for uid, fit in fitted.fits_.items():
        state = fit.state if isinstance(family, ExponentialSmoothing) else fit.state.smoothing
        y = two_series.loc[two_series[UID] == uid, Y].to_numpy()
        if isinstance(family, ExponentialSmoothing):
            window = y[-(len(old[old[UID] == uid]) + NEW) :][-(family.max_history + NEW) :]
            whole, _ = smoothing_filter(window, state.params, range(0), 1)
            got = moved.fits_[uid].state
            assert got.n == state.n + NEW
            np.testing.assert_allclose([got.level, got.trend], [whole.level, whole.trend])
            np.testing.assert_allclose(got.season, whole.season)
        else:
            assert moved.fits_[uid].state.n == fit.state.n + NEW


def test_an_update_keeps_the_calibration_residuals(two_series: pd.DataFrame) -> None:
    fitted = GradientBoosting(season_length=DAY, week_length=7 * DAY, horizon=HORIZON).fit(
        earlier(two_series)
    )
    moved = fitted.update(two_series)
    for uid, fit in fitted.fits_.items():
        assert moved.fits_[uid].calibration is fit.calibration


def test_a_series_the_fit_never_saw_cannot_be_updated(two_series: pd.DataFrame) -> None:
    fitted = Persistence(horizon=HORIZON).fit(
        two_series[two_series[UID] == "pool-a/allocated_gpus"]
    )
    with pytest.raises(UpdateError, match="not fitted"):
        fitted.update(two_series)


def test_a_history_that_skips_the_fits_last_value_cannot_continue_smoothing(
    two_series: pd.DataFrame,
) -> None:
    model = ExponentialSmoothing(
        season_length=DAY, horizon=HORIZON, max_history=8 * DAY, calibration_window=DAY
    ).fit(earlier(two_series, 3 * DAY))
    # The last two days only: the fit ended three days before the end.
    later = two_series[two_series.groupby(UID).cumcount(ascending=False) < 2 * DAY]
    with pytest.raises(UpdateError, match="does not hold"):
        model.update(later)


def test_a_state_saved_without_its_regressors_is_not_updated(two_series: pd.DataFrame) -> None:
    model = GradientBoosting(season_length=DAY, week_length=7 * DAY, horizon=HORIZON)
    fitted = model.fit(two_series)
    old = copy.copy(fitted)
    # As an older version pickled it: the state's fields before the regressors were kept.
    old.fits_ = {
        uid: fit.__class__(
            GBMState(fit.state.last, fit.state.anchors, fit.state.changes, fit.state.weights),
            fit.residuals,
            fit.last_ds,
            fit.step,
            fit.nonnegative,
        )
        for uid, fit in fitted.fits_.items()
    }
    with pytest.raises(UpdateError, match="older version"):
        old.update(two_series)


def test_the_last_origins_global_features_are_those_of_the_whole_window() -> None:
    rng = np.random.default_rng(3)
    y = np.where(rng.random(3000) < 0.4, 0.0, rng.gamma(2.0, 4.0, 3000))
    y[-400:-300] = 0.0
    for season in (48, 144):
        np.testing.assert_allclose(
            last_base_features(y, 2.5, season), base_features(y, 2.5, season)[-1:]
        )


class Broken(Persistence):
    """Persistence whose update fails, as a model whose state cannot be advanced."""

    update_refits = False


def test_the_champion_refits_a_series_whose_update_fails_and_says_why(
    two_series: pd.DataFrame,
) -> None:
    members: list[Estimator] = [Broken(horizon=HORIZON), Persistence(horizon=HORIZON)]
    champion = ChampionForecaster(
        {"pool-a/allocated_gpus": "broken", "pool-b/queue_gpus": "persistence"},
        {"broken": GuardedChoice(members), "persistence": Persistence(horizon=HORIZON)},
    ).fit(earlier(two_series))
    moved = champion.update(two_series)
    assert set(moved.refits_) == {"pool-a/allocated_gpus"}
    assert "refit" in moved.refits_["pool-a/allocated_gpus"]
    refit = clone(champion).fit(two_series).predict(HORIZON, LEVELS)
    pd.testing.assert_frame_equal(moved.predict(HORIZON, LEVELS), refit)


def test_a_model_without_an_update_is_not_updated(two_series: pd.DataFrame) -> None:
    class Plain:
        pass

    with pytest.raises(UpdateError, match="no update"):
        updated(Plain(), two_series)  # type: ignore[arg-type]
