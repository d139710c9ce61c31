"""Metrics against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from forecaster.backtest import backtest
from forecaster.metrics import (
    horizon_steps,
    naive_scale,
    relative_mase,
    score_backtest,
)
from forecaster.models.naive import Persistence

# Ten points, 10-min steps; with horizon 2, two windows and start_frac 0.5 the cutoffs
# are positions 4 (y=8) and 7 (y=9), so every figure below is checked by hand.
Y_HAND = [2.0, 4.0, 3.0, 5.0, 8.0, 6.0, 7.0, 9.0, 6.0, 10.0]


def hand_frame() -> pd.DataFrame:
    ds = pd.date_range("2024-01-01", periods=len(Y_HAND), freq="10min", tz="UTC")
    return pd.DataFrame({"unique_id": "pool/queue_gpus", "ds": ds, "y": Y_HAND})


def test_naive_scale_is_mean_absolute_first_difference() -> None:
    assert naive_scale([2, 4, 3, 5, 8]) == pytest.approx(2.0)
    assert naive_scale([1, 2, 4, 7], period=2) == pytest.approx((3 + 5) / 2)


@pytest.mark.parametrize("window", [[5.0, 5.0, 5.0], [0.0, 0.0], [3.0]])
def test_naive_scale_of_constant_or_too_short_window_is_nan(window: list[float]) -> None:
    assert math.isnan(naive_scale(window))


def test_horizon_steps_maps_labels_to_step_counts() -> None:
    step = pd.Timedelta("10min")
    assert horizon_steps(["10min", "1h", "3h"], step) == {"10min": 1, "1h": 6, "3h": 18}
    with pytest.raises(ValueError, match="multiple of the step"):
        horizon_steps(["15min"], step)


def test_persistence_mase_equals_hand_value() -> None:
    result = backtest(
        [Persistence(horizon=2)], hand_frame(), horizon=2, n_windows=2, levels=[0.9], start_frac=0.5
    )
    scores = score_backtest(result.frame, result.scales, [0.9], {"10min": 1, "20min": 2})
    by_h = scores.set_index("horizon")
    # Cutoff y=8: scale (2+1+2+3)/4 = 2, errors |6-8|, |7-8|.
    # Cutoff y=9: scale 13/7, errors |6-9|, |10-9|.
    assert by_h.loc["20min", "mase"] == pytest.approx((1.5 / 2.0 + 2.0 / (13 / 7)) / 2)
    assert by_h.loc["10min", "mase"] == pytest.approx((2.0 / 2.0 + 3.0 / (13 / 7)) / 2)
    assert by_h.loc["20min", "mae"] == pytest.approx((2 + 1 + 3 + 1) / 4)
    expected_smape = 200 * (2 / 14 + 1 / 15 + 3 / 15 + 1 / 19) / 4
    assert by_h.loc["20min", "smape"] == pytest.approx(expected_smape)
    assert (by_h["n_windows"] == 2).all()


def test_score_backtest_pinball_and_coverage_per_level() -> None:
    ts = pd.Timestamp("2024-01-01", tz="UTC")
    frame = pd.DataFrame(
        {
            "unique_id": "a",
            "ds": [ts, ts + pd.Timedelta("10min")],
            "cutoff": ts - pd.Timedelta("10min"),
            "step": [1, 2],
            "model": "m",
            "mean": [5.0, 5.0],
            "q0.5": [5.0, 5.0],
            "q0.9": [8.0, 6.0],
            "y": [4.0, 7.0],
        }
    )
    scales = pd.DataFrame({"unique_id": ["a"], "cutoff": [frame["cutoff"].iloc[0]], "scale": [2.0]})
    row = score_backtest(frame, scales).iloc[0]
    assert row["horizon"] == "h2"
    assert row["mase"] == pytest.approx(((1 + 2) / 2) / 2.0)
    assert row["pinball_q0.5"] == pytest.approx((0.5 * 1 + 0.5 * 2) / 2)
    assert row["pinball_q0.9"] == pytest.approx((0.1 * 4 + 0.9 * 1) / 2)
    assert row["pinball"] == pytest.approx((0.75 + 0.65) / 2)
    assert row["coverage_q0.9"] == pytest.approx(0.5)
    assert row["coverage_q0.5"] == pytest.approx(0.5)


def test_score_backtest_leaves_constant_windows_out_of_mase_only() -> None:
    ts = pd.Timestamp("2024-01-01", tz="UTC")
    cut = [ts, ts + pd.Timedelta("1h")]
    frame = pd.DataFrame(
        {
            "unique_id": "a",
            "ds": [c + pd.Timedelta("10min") for c in cut],
            "cutoff": cut,
            "step": 1,
            "model": "m",
            "mean": [1.0, 1.0],
            "q0.9": [1.0, 1.0],
            "y": [3.0, 2.0],
        }
    )
    scales = pd.DataFrame({"unique_id": "a", "cutoff": cut, "scale": [np.nan, 4.0]})
    row = score_backtest(frame, scales, [0.9]).iloc[0]
    assert row["mase"] == pytest.approx(1.0 / 4.0)
    assert row["mae"] == pytest.approx(1.5)
    assert row["n_windows"] == 2


def test_score_backtest_names_missing_columns() -> None:
    with pytest.raises(ValueError, match=r"q0\.9"):
        score_backtest(
            pd.DataFrame(columns=["unique_id", "cutoff", "step", "model", "mean", "y"]),
            pd.DataFrame(columns=["unique_id", "cutoff", "scale"]),
            [0.9],
        )


def _cells(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["unique_id", "model", "horizon", "mase"])


def test_relative_mase_is_the_geometric_mean_of_per_cell_ratios_beside_the_ratio_of_means() -> None:
    scores = _cells(
        [
            ("a", "persistence", "1h", 1.0),
            ("a", "gbm", "1h", 0.5),
            ("a", "persistence", "3h", 2.0),
            ("a", "gbm", "3h", 4.0),
            ("b", "persistence", "1h", 0.0),  # flat: left out, counted
            ("b", "ets", "1h", 0.3),
            ("b", "persistence", "3h", 3.0),
            ("b", "ets", "3h", 3.3),
        ]
    )

    relative = relative_mase(scores, {"a": "gbm", "b": "ets"})

    assert relative is not None
    assert relative.cells == 3
    assert relative.left_out == 1
    assert relative.geomean == pytest.approx((0.5 * 2.0 * 1.1) ** (1 / 3))
    assert relative.ratio_of_means == pytest.approx((0.5 + 4.0 + 3.3) / (1.0 + 2.0 + 3.0))
    assert relative.worst == pytest.approx(2.0)
    assert relative.worst_cell == ("a", "3h")


def test_relative_mase_needs_persistence_scores() -> None:
    scores = _cells([("a", "gbm", "1h", 0.5)])
    assert relative_mase(scores, {"a": "gbm"}) is None
