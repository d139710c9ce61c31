"""The guarded choice: persistence unless a family's own out-of-sample errors beat it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.backtest import backtest
from forecaster.exceptions import NotFittedError
from forecaster.models.catalog import default_models
from forecaster.models.guarded import (
    ERROR,
    GUARDED,
    GuardedChoice,
    calibrated,
    guarded_of,
    step_errors,
    with_combinations,
    with_guarded_rows,
)
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.selection import choose_families, default_family
from forecaster.types import CUTOFF, MEAN, MODEL, STEP, UID, Y

DAY = 24


def series(y: np.ndarray, uid: str = "pool/demand_gpus") -> pd.DataFrame:
    ds = pd.date_range("2025-01-01", periods=len(y), freq="1h", tz="UTC")
    return pd.DataFrame({UID: uid, "ds": ds, Y: y})


def level_shift(days: int = 10) -> pd.DataFrame:
    """A daily cycle that stops: seasonal naive repeats yesterday's peak of ~100, now ~5."""
    t = np.arange(days * DAY)
    y = 50 + 50 * np.sin(2 * np.pi * t / DAY)
    y[-DAY // 2 :] = 5.0
    return series(y)


def daily_cycle(days: int = 10) -> pd.DataFrame:
    """A clean daily cycle: a day back is exact, the last value is not."""
    t = np.arange(days * DAY)
    return series(50 + 40 * np.sin(2 * np.pi * t / DAY))


def members() -> list[Persistence | SeasonalNaive]:
    return [
        Persistence(horizon=6, window=7 * DAY),
        SeasonalNaive(season_length=DAY, horizon=6, window=7 * DAY),
    ]


def path(model: str, means: list[float], errors: list[float]) -> pd.DataFrame:
    """One member's forecast rows with calibration errors ``errors``."""
    n = len(means)
    steps = np.arange(1, n + 1)
    return pd.DataFrame({UID: "a", STEP: steps, MODEL: model, MEAN: means, ERROR: errors})


def test_a_family_must_beat_persistence_by_the_margin_on_steps_one_to_k() -> None:
    persistence = path("persistence", [10.0, 10.0, 10.0], [1.0, 1.0, 1.0])
    # 5 % better at step 1 (not enough), then far better: the mean over 1..k decides.
    gbm = path("gbm", [12.0, 14.0, 16.0], [0.95, 0.3, 0.3])
    out = guarded_of([persistence, gbm], [UID], margin=0.1)
    assert out[MEAN].tolist() == [10.0, 14.0, 16.0]
    assert set(out[MODEL]) == {GUARDED}
    # Among several that beat it, the lowest error forecasts.
    ets = path("ets", [11.0, 11.0, 11.0], [0.5, 0.5, 0.9])
    out = guarded_of([persistence, gbm, ets], [UID], margin=0.1)
    assert out[MEAN].tolist() == [11.0, 11.0, 16.0]


def random_walk(days: int = 10, seed: int = 0) -> pd.DataFrame:
    """A level that persists and moves at random: a day back is far off, the last value is not."""
    rng = np.random.default_rng(seed)
    return series(100.0 + np.cumsum(rng.normal(0.0, 3.0, days * DAY)))


def test_a_terrible_family_leaves_the_series_at_persistence() -> None:
    df = random_walk()
    out = GuardedChoice(members()).fit(df).predict(6, (0.5, 0.9))
    alone = Persistence(horizon=6, window=7 * DAY).fit(df).predict(6, (0.5, 0.9))
    snaive = SeasonalNaive(season_length=DAY, horizon=6, window=7 * DAY).fit(df).predict(6)
    assert (np.abs(snaive[MEAN] - alone[MEAN]) > 10).all(), "seasonal naive must be far off"
    np.testing.assert_allclose(out[MEAN], alone[MEAN])
    np.testing.assert_allclose(out["q0.9"], alone["q0.9"])
    assert list(out.columns) == list(alone.columns)  # the error levels are not served


def test_a_family_that_beats_persistence_out_of_sample_forecasts() -> None:
    df = daily_cycle()
    out = GuardedChoice(members()).fit(df).predict(6, (0.5, 0.9))
    snaive = SeasonalNaive(season_length=DAY, horizon=6, window=7 * DAY).fit(df).predict(6)
    np.testing.assert_allclose(out[MEAN], snaive[MEAN])


def test_guarded_rows_of_a_backtest_are_what_the_estimator_forecasts() -> None:
    df = level_shift(days=12)
    df.loc[df.index[-3 * DAY : -DAY], Y] = 50 + 40 * np.sin(np.arange(2 * DAY) * 2 * np.pi / DAY)
    kwargs = {"horizon": 6, "n_windows": 4}
    frame = backtest(calibrated(members()), df, levels=(0.5, 0.9), **kwargs).frame
    rows = with_guarded_rows(frame, ["persistence", "seasonal_naive"])
    direct = backtest([GuardedChoice(members())], df, levels=(0.5, 0.9), **kwargs).frame
    derived = rows[rows[MODEL] == GUARDED].reset_index(drop=True)
    assert len(derived) == len(direct) == 24
    for column in (MEAN, "q0.5", "q0.9", Y):
        np.testing.assert_allclose(derived[column], direct[column])
    assert with_guarded_rows(rows, ["persistence"]) is rows  # already there: unchanged


def test_the_choice_reads_nothing_at_or_after_the_cutoff() -> None:
    """Actuals after each cutoff (the ``y`` of a backtest) never move the guarded rows."""
    df = daily_cycle(days=12)
    frame = backtest(calibrated(members()), df, horizon=6, n_windows=3, levels=(0.5, 0.9)).frame
    names = ["persistence", "seasonal_naive"]
    before = with_guarded_rows(frame, names)
    scrambled = frame.assign(**{Y: frame[Y].to_numpy()[::-1] * 10.0})
    after = with_guarded_rows(scrambled, names)
    keep = before[MODEL] == GUARDED
    np.testing.assert_allclose(before.loc[keep, MEAN], after.loc[keep, MEAN])
    # Refitting on the same history with another future gives the same forecast.
    cut = df.iloc[: 10 * DAY]
    future = pd.concat([cut, df.iloc[10 * DAY :].assign(**{Y: 0.0})], ignore_index=True)
    one = GuardedChoice(members()).fit(cut).predict(6)
    two = GuardedChoice(members()).fit(future.iloc[: 10 * DAY]).predict(6)
    pd.testing.assert_frame_equal(one, two)


def test_rows_need_calibrated_members_and_the_estimator_its_fit() -> None:
    frame = backtest(members(), level_shift(), horizon=3, n_windows=2, levels=(0.5, 0.9)).frame
    assert with_guarded_rows(frame, ["persistence", "seasonal_naive"]) is frame
    with pytest.raises(ValueError, match="Calibrated"):
        guarded_of([frame], [UID, CUTOFF])
    with pytest.raises(NotFittedError):
        GuardedChoice(members()).predict(3)


def test_step_errors_are_the_mean_absolute_calibration_residuals() -> None:
    df = random_walk()
    model = Persistence(horizon=3, window=7 * DAY).fit(df)
    y = df[Y].to_numpy()
    errors = step_errors(model, "pool/demand_gpus", 5)
    assert errors is not None
    origins = np.arange(len(y) - 7 * DAY - 3, len(y) - 1)
    for k in (1, 2, 3):
        ok = origins + k < len(y)
        expected = np.abs(y[origins[ok] + k] - y[origins[ok]]).mean()
        assert errors[k - 1] == pytest.approx(expected)
    assert errors[3] == errors[4] == errors[2]  # past the calibrated horizon: the last step
    assert step_errors(object(), "pool/demand_gpus", 3) is None


def test_the_rule_gives_every_series_the_guarded_choice() -> None:
    scores = pd.DataFrame({UID: ["a"], MODEL: ["persistence"], "mase": [1.0]})
    assert choose_families("guarded", scores, ["a", "b"], None) == {"a": GUARDED, "b": GUARDED}
    assert default_family("guarded") == GUARDED
    full = with_combinations(default_models(pd.Timedelta(minutes=10), 18))
    guarded = full[GUARDED]
    assert isinstance(guarded, GuardedChoice)
    assert [m.model_name for m in guarded.members] == ["persistence", "gbm", "global_gbm"]
