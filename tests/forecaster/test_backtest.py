"""Rolling-origin backtest: hand-checked windows, failures, executor equivalence."""

from __future__ import annotations

import itertools
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecaster.backtest import backtest
from forecaster.cutoffs import rolling_origin_cutoffs
from forecaster.exceptions import InsufficientHistoryError, ModelError
from forecaster.models.base import FloatArray, Forecaster
from forecaster.models.naive import Persistence, SeasonalNaive


class TrainLength(Forecaster):
    """Forecasts the number of training observations it saw, so tests can read it."""

    name = "train_length"

    def _fit_series(self, y: FloatArray, ds: pd.DatetimeIndex) -> Any:
        return float(len(y))

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        return np.full(h, float(state))

    def _calibration_residuals(self, y: FloatArray, ds: pd.DatetimeIndex) -> FloatArray:
        return np.zeros((1, self.horizon))


class FailsAfter(Forecaster):
    """Raises when trained on more than ``limit`` observations."""

    name = "fails_after"

    def __init__(self, limit: int = 10, horizon: int = 3, alias: str | None = None) -> None:
        super().__init__(horizon=horizon, alias=alias)
        self.limit = limit

    def _fit_series(self, y: FloatArray, ds: pd.DatetimeIndex) -> Any:
        if len(y) > self.limit:
            raise ModelError(f"refusing {len(y)} observations")
        return float(y[-1])

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        return np.full(h, float(state))

    def _calibration_residuals(self, y: FloatArray, ds: pd.DatetimeIndex) -> FloatArray:
        return np.zeros((1, self.horizon))


def series(n: int, uids: tuple[str, ...] = ("a/queue_gpus",), seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ds = pd.date_range("2024-03-01", periods=n, freq="10min", tz="UTC")
    frames = [
        pd.DataFrame({"unique_id": uid, "ds": ds, "y": rng.poisson(5.0, n).astype(float)})
        for uid in uids
    ]
    return pd.concat(frames, ignore_index=True)


def test_cutoffs_are_hand_checked_on_twenty_points() -> None:
    # Latest cutoff 20-1-3 = 16; earliest ceil(0.5*20)-1 = 9; the middle one is
    # 16 - round(3.5) = 12 (Python rounds half to even).
    assert rolling_origin_cutoffs(20, horizon=3, n_windows=3, start_frac=0.5) == [9, 12, 16]
    assert rolling_origin_cutoffs(20, horizon=3, n_windows=3) == [14, 15, 16]
    assert rolling_origin_cutoffs(20, horizon=3, n_windows=1) == [16]


def test_cutoffs_leave_min_train_observations() -> None:
    assert rolling_origin_cutoffs(20, horizon=3, n_windows=2, start_frac=0.0, min_train=12) == [
        11,
        16,
    ]


def test_cutoffs_error_names_the_fix_when_series_is_too_short() -> None:
    with pytest.raises(
        InsufficientHistoryError, match=r"the 5 backtest windows.*FORESIGHT_BACKTEST_WINDOWS"
    ) as raised:
        rolling_origin_cutoffs(10, horizon=3, n_windows=5)
    assert "start_frac" not in str(raised.value)


@given(
    n_obs=st.integers(10, 500),
    horizon=st.integers(1, 40),
    n_windows=st.integers(1, 12),
    start_frac=st.floats(0.0, 0.9),
)
def test_cutoffs_are_distinct_and_keep_every_horizon_inside(
    n_obs: int, horizon: int, n_windows: int, start_frac: float
) -> None:
    try:
        cuts = rolling_origin_cutoffs(
            n_obs, horizon=horizon, n_windows=n_windows, start_frac=start_frac
        )
    except InsufficientHistoryError:
        return
    assert len(cuts) == n_windows
    assert all(b > a for a, b in itertools.pairwise(cuts))
    assert cuts[-1] + horizon == n_obs - 1
    assert cuts[0] >= max(start_frac * n_obs - 1, 1)


def test_backtest_rows_cutoffs_actuals_and_capped_training_length() -> None:
    df = series(20)
    result = backtest(
        [Persistence(horizon=3), TrainLength(horizon=3)],
        df,
        horizon=3,
        n_windows=3,
        levels=[0.5, 0.9],
        max_train=11,
        start_frac=0.5,
    )
    frame = result.frame
    assert list(frame.columns) == [
        "unique_id",
        "ds",
        "cutoff",
        "step",
        "model",
        "mean",
        "q0.5",
        "q0.9",
        "y",
    ]
    assert len(frame) == 3 * 3 * 2
    ds, y = df["ds"], df["y"].to_numpy()
    expected_cutoffs = [ds[9], ds[12], ds[16]]
    assert sorted(frame["cutoff"].unique()) == expected_cutoffs
    for pos, cutoff in zip([9, 12, 16], expected_cutoffs, strict=True):
        rows = frame[(frame["cutoff"] == cutoff) & (frame["model"] == "persistence")]
        assert rows["step"].tolist() == [1, 2, 3]
        assert rows["ds"].tolist() == list(ds[pos + 1 : pos + 4])
        assert rows["y"].tolist() == list(y[pos + 1 : pos + 4])
        assert (rows["mean"] == y[pos]).all()
        seen = frame[(frame["cutoff"] == cutoff) & (frame["model"] == "train_length")]
        # Positions 0..9 give 10 points; later windows are capped at max_train=11.
        assert (seen["mean"] == min(pos + 1, 11)).all()
    assert result.scales["cutoff"].tolist() == expected_cutoffs
    start = [0, 2, 6]
    for (pos, s), scale in zip(
        zip([9, 12, 16], start, strict=True), result.scales["scale"], strict=True
    ):
        assert scale == pytest.approx(np.mean(np.abs(np.diff(y[s : pos + 1]))))
    assert set(result.fit_seconds) == {"persistence", "train_length"}
    assert result.failures.empty


def test_backtest_records_failing_windows_and_continues() -> None:
    result = backtest(
        [Persistence(horizon=3), FailsAfter(limit=12)],
        series(20),
        horizon=3,
        n_windows=3,
        levels=[0.9],
        start_frac=0.5,
    )
    failures = result.failures
    # Windows train on 10, 13 and 17 points: the last two exceed the limit.
    assert len(failures) == 2
    assert set(failures["model"]) == {"fails_after"}
    assert failures["error"].str.contains("ModelError: .*refusing 1[37]").all()
    counts = result.frame.groupby("model")["cutoff"].nunique()
    assert counts.to_dict() == {"fails_after": 1, "persistence": 3}


def test_backtest_never_fits_the_given_models() -> None:
    model = Persistence(horizon=3)
    backtest([model], series(30), horizon=3, n_windows=2, levels=[0.9])
    assert not hasattr(model, "fits_")


def test_backtest_rejects_repeated_model_names() -> None:
    with pytest.raises(ValueError, match="alias"):
        backtest([Persistence(), Persistence()], series(30), horizon=3, n_windows=2)


def test_backtest_names_a_too_short_series() -> None:
    df = pd.concat([series(40, ("long/y",)), series(8, ("short/y",))], ignore_index=True)
    with pytest.raises(InsufficientHistoryError, match="short/y"):
        backtest([Persistence(horizon=3)], df, horizon=3, n_windows=3)


def test_progress_reports_each_series() -> None:
    calls: list[tuple[int, int]] = []
    backtest(
        [Persistence(horizon=2)],
        series(30, ("a/y", "b/y", "c/y")),
        horizon=2,
        n_windows=2,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_process_pool_gives_the_same_result_as_sequential() -> None:
    df = series(60, ("a/y", "b/y", "c/y"), seed=3)
    models = [
        Persistence(horizon=4),
        SeasonalNaive(season_length=6, horizon=4),
        FailsAfter(limit=46, horizon=4),
    ]
    kwargs: dict[str, Any] = {"horizon": 4, "n_windows": 3, "levels": [0.1, 0.9], "max_train": 48}
    sequential = backtest(models, df, **kwargs)
    with ProcessPoolExecutor(2) as pool:
        parallel = backtest(models, df, executor=pool, **kwargs)
    pd.testing.assert_frame_equal(sequential.frame, parallel.frame)
    pd.testing.assert_frame_equal(sequential.scales, parallel.scales)
    pd.testing.assert_frame_equal(sequential.failures, parallel.failures)
    # Cutoffs 44, 49, 55 train on 45, 48, 48 points: fails_after fits only the first.
    assert len(sequential.frame) == 3 * 3 * 4 * 2 + 3 * 4
    assert len(parallel.failures) == 3 * 2
    assert set(parallel.fit_seconds) == {"persistence", "seasonal_naive", "fails_after"}


class KeepsLength(TrainLength):
    """TrainLength whose update keeps what it learnt: forecasts show where it was fitted."""

    name = "keeps_length"

    def _update_state(
        self, state: Any, y: FloatArray, ds: pd.DatetimeIndex, last_ds: pd.Timestamp
    ) -> Any:
        return state


def test_refits_first_fits_at_the_first_cutoff_and_updates_to_the_later_ones() -> None:
    df = series(20, uids=("a/queue_gpus", "b/queue_gpus"))
    kw: dict[str, Any] = {"horizon": 3, "n_windows": 3, "max_train": 11, "start_frac": 0.5}
    models = [Persistence(horizon=3), KeepsLength(horizon=3), TrainLength(horizon=3)]
    each = backtest(models, df, **kw).frame
    first = backtest(models, df, refits="first", **kw).frame

    def means(frame: pd.DataFrame, model: str) -> list[float]:
        rows = frame[(frame["model"] == model) & (frame["unique_id"] == "b/queue_gpus")]
        return rows.groupby("cutoff")["mean"].first().tolist()

    # Cutoffs at positions 9, 12, 16 (hand-checked above): 10, 11, 11 points seen.
    assert means(each, "keeps_length") == [10.0, 11.0, 11.0]
    assert means(first, "keeps_length") == [10.0, 10.0, 10.0]  # fitted once, at position 9
    # A family that cannot update is refitted at every window, as before.
    assert means(first, "train_length") == means(each, "train_length")
    # Persistence updates to the newest value: its rows are the refitted ones.
    columns = list(each.columns)
    for model in ("persistence", "train_length"):
        pd.testing.assert_frame_equal(
            first[first["model"] == model][columns].reset_index(drop=True),
            each[each["model"] == model].reset_index(drop=True),
        )
