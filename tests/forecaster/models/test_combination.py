"""The median of the families: the rule, the estimator, and its rows in a backtest."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.backtest import backtest
from forecaster.exceptions import InsufficientHistoryError, NotFittedError
from forecaster.models.catalog import default_models
from forecaster.models.combination import (
    MEDIAN,
    MedianCombination,
    median_members,
    median_of,
    with_median,
    with_median_rows,
)
from forecaster.models.ets import ExponentialSmoothing
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.selection import choose_families, default_family
from forecaster.types import MEAN, MODEL, STEP, UID

DAY = 24


def level_shift(days: int = 10) -> pd.DataFrame:
    """A daily cycle that stops: yesterday's shape is now far from today's level.

    Seasonal naive repeats yesterday's peak of ~100 GPUs; the level is ~5 now.
    """
    n = days * DAY
    t = np.arange(n)
    y = 50 + 50 * np.sin(2 * np.pi * t / DAY)
    y[-DAY // 2 :] = 5.0
    ds = pd.date_range("2025-01-01", periods=n, freq="1h", tz="UTC")
    return pd.DataFrame({UID: "pool/demand_gpus", "ds": ds, "y": y})


def members() -> list[Persistence | SeasonalNaive | ExponentialSmoothing]:
    return [
        Persistence(horizon=6, window=7 * DAY),
        SeasonalNaive(season_length=DAY, horizon=6, window=7 * DAY),
        ExponentialSmoothing(season_length=DAY, horizon=6, select=False),
    ]


def test_median_of_takes_the_middle_value_of_every_column_row_by_row() -> None:
    keys = {UID: ["a", "a"], STEP: [1, 2], "ds": [1, 2], MODEL: ["x", "x"]}
    frames = [
        pd.DataFrame({**keys, MEAN: [1.0, 10.0], "q0.9": [2.0, 20.0]}),
        pd.DataFrame({**keys, MEAN: [5.0, 0.0], "q0.9": [9.0, 1.0]}),
        pd.DataFrame({**keys, MEAN: [3.0, 1000.0], "q0.9": [4.0, 2000.0]}),
    ]
    out = median_of(frames, [UID, STEP])
    assert out[MEAN].tolist() == [3.0, 10.0]
    assert out["q0.9"].tolist() == [4.0, 20.0]
    assert set(out[MODEL]) == {MEDIAN}
    assert out["ds"].tolist() == [1, 2]


def test_a_family_far_off_cannot_drag_the_median_away() -> None:
    df = level_shift()
    model = MedianCombination(members()).fit(df)
    combined = model.predict(6, (0.5, 0.9))
    forecasts = {m.model_name: type(m)(**m.get_params()).fit(df).predict(6) for m in members()}
    snaive = forecasts["seasonal_naive"][MEAN].to_numpy()
    low = np.minimum(forecasts["persistence"][MEAN], forecasts["ets"][MEAN]).to_numpy()
    high = np.maximum(forecasts["persistence"][MEAN], forecasts["ets"][MEAN]).to_numpy()
    mean = combined[MEAN].to_numpy()
    assert (np.abs(snaive - 5.0) > 40).any(), "the fixture must put seasonal naive far off"
    assert ((mean >= low - 1e-9) & (mean <= high + 1e-9)).all()
    assert (combined["q0.5"] <= combined["q0.9"]).all()
    assert set(combined[MODEL]) == {MEDIAN}
    assert [m.model_name for m in model.fitted_["pool/demand_gpus"]] == [
        "persistence",
        "seasonal_naive",
        "ets",
    ]


def test_a_member_that_cannot_fit_is_left_out_and_none_fitting_is_an_error() -> None:
    short = level_shift().tail(DAY // 2)  # shorter than a season: seasonal naive cannot fit
    model = MedianCombination(members()[:2]).fit(short)
    assert [m.model_name for m in model.fitted_["pool/demand_gpus"]] == ["persistence"]
    only = model.predict(3)
    alone = Persistence(horizon=6, window=7 * DAY).fit(short).predict(3)
    np.testing.assert_allclose(only[MEAN], alone[MEAN])
    with pytest.raises(InsufficientHistoryError, match="no member can fit"):
        MedianCombination([SeasonalNaive(season_length=DAY, horizon=6)]).fit(short)
    with pytest.raises(NotFittedError):
        MedianCombination(members()).predict(3)


def test_median_rows_of_a_backtest_are_what_the_estimator_forecasts() -> None:
    df = level_shift(days=12)
    family = members()[:2]
    kwargs = {"horizon": 6, "n_windows": 3, "levels": (0.5, 0.9)}
    rows = with_median_rows(backtest(family, df, **kwargs).frame, ["persistence", "seasonal_naive"])
    direct = backtest([MedianCombination(family)], df, **kwargs).frame
    derived = rows[rows[MODEL] == MEDIAN].reset_index(drop=True)
    assert len(derived) == len(direct) == 18
    for column in (MEAN, "q0.5", "q0.9", "y"):
        np.testing.assert_allclose(derived[column], direct[column])
    assert with_median_rows(rows, ["persistence"]) is rows  # already there: unchanged


def test_choose_families_gives_every_series_the_median_by_default() -> None:
    scores = pd.DataFrame(
        {UID: ["a", "a"], MODEL: ["persistence", "seasonal_naive"], "mase": [1.0, 0.5]}
    )
    assert choose_families("median", scores, ["a", "b"], None) == {"a": MEDIAN, "b": MEDIAN}
    assert choose_families("select", scores, ["a", "b"], None) == {"a": "seasonal_naive"}
    assert default_family("median") == MEDIAN
    assert default_family("select") == "persistence"
    assert set(with_median(members())) == {"persistence", "seasonal_naive", "ets", MEDIAN}


def test_the_full_set_median_leaves_seasonal_naive_out() -> None:
    step = pd.Timedelta(minutes=10)
    full = default_models(step, 18)
    median = with_median(full)["median"]
    assert isinstance(median, MedianCombination)
    names = [m.model_name for m in median.members]
    assert names == ["persistence", "ets", "mstl", "gbm", "global_gbm"]
    # The fast set would keep only two without it: all three stay.
    fast = [m.model_name for m in default_models(step, 18, fast=True)]
    assert median_members(fast) == fast


def test_median_rows_use_the_same_members() -> None:
    rows = []
    for name, value in (("persistence", 1.0), ("seasonal_naive", 100.0), ("ets", 2.0)):
        rows.append({"unique_id": "a", "cutoff": 0, "step": 1, "model": name, "mean": value})
    for name, value in (("mstl", 3.0), ("gbm", 4.0)):
        rows.append({"unique_id": "a", "cutoff": 0, "step": 1, "model": name, "mean": value})
    frame = pd.DataFrame(rows)
    names = ["persistence", "seasonal_naive", "ets", "mstl", "gbm"]
    out = with_median_rows(frame, names)
    # Median of 1, 2, 3, 4 (seasonal naive's 100 left out) is 2.5; with it, 3.
    assert out.loc[out["model"] == "median", "mean"].item() == 2.5
