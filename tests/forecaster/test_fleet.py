"""Fleet backtests: training's nested windows with a joint family, and the tune region."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.forecast_accuracy import default_cutoffs
from forecaster.backtest import backtest, split_heldout
from forecaster.estimator import updated
from forecaster.fleet import nested_fleet_backtest, with_fleet
from forecaster.models.global_gbm import GlobalGradientBoosting
from forecaster.models.naive import Persistence
from forecaster.types import CUTOFF, DS, MODEL, UID

H = 6
LEVELS = (0.5, 0.9)


def _frame(n: int = 700, n_series: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    parts = []
    for i in range(n_series):
        y = np.maximum(0.0, np.cumsum(rng.normal(size=n)))
        ds = pd.date_range("2024-03-01", periods=n, freq="30min", tz="UTC")
        parts.append(pd.DataFrame({UID: f"s{i}", DS: ds, "y": y}))
    return pd.concat(parts, ignore_index=True)


def _nested(roles: str) -> dict[str, object]:
    return {
        "horizon": H,
        "n_windows": 2,
        "heldout_windows": 2,
        "roles": roles,
        "levels": LEVELS,
        "max_train": 400,
    }


@pytest.mark.parametrize("roles", ["heldout", "all"])
def test_nested_windows_match_the_plain_backtest(roles: str) -> None:
    """With a joint family the windows, and the held-out split, are the plain backtest's."""
    df = _frame()
    joint = GlobalGradientBoosting(season_length=48, horizon=H, anchors=(1, 3, 6), max_iter=5)
    plain = backtest([Persistence(horizon=H)], df, **_nested(roles))  # type: ignore[arg-type]
    pooled = nested_fleet_backtest([Persistence(horizon=H), joint], df, **_nested(roles))  # type: ignore[arg-type]
    assert pooled.heldout_from == plain.heldout_from
    persistence = pooled.frame[pooled.frame[MODEL] == "persistence"].reset_index(drop=True)
    pd.testing.assert_frame_equal(persistence[plain.frame.columns], plain.frame)
    _, heldout = split_heldout(pooled)
    assert set(heldout.frame[MODEL]) == {"persistence", "global_gbm"}
    assert heldout.frame[CUTOFF].nunique() == 2


def test_tune_region_ends_before_the_test_region() -> None:
    df = _frame(n=1000, n_series=1)
    tune = default_cutoffs(df, horizon=H, n_windows=5, start_frac=0.5, end_frac=0.75)["s0"]
    test = default_cutoffs(df, horizon=H, n_windows=5)["s0"]
    ds = df[DS]
    # Every tune window, its actuals included, lies within the first 75 %.
    assert max(tune) + pd.Timedelta(minutes=30) * H < ds.iloc[750]
    assert min(tune) >= ds.iloc[499]
    assert min(test) >= ds.iloc[749]
    with pytest.raises(ValueError, match="end_frac"):
        default_cutoffs(df, horizon=H, n_windows=5, start_frac=0.8, end_frac=0.75)


def test_refits_first_learns_the_fleet_once_and_updates_each_series_to_later_windows() -> None:
    """Held-out windows after the first are the first window's fits, updated."""
    df = _frame()
    joint = GlobalGradientBoosting(season_length=48, horizon=H, anchors=(1, 3, 6), max_iter=5)
    first = nested_fleet_backtest([joint], df, refits="first", **_nested("heldout"))  # type: ignore[arg-type]
    each = nested_fleet_backtest([joint], df, **_nested("heldout"))  # type: ignore[arg-type]
    cutoffs = sorted(first.frame[CUTOFF].unique())
    assert cutoffs == sorted(each.frame[CUTOFF].unique())
    assert len(cutoffs) == 2
    early, late = (first.frame[first.frame[CUTOFF] == c] for c in cutoffs)
    pd.testing.assert_frame_equal(
        early.reset_index(drop=True),
        each.frame[each.frame[CUTOFF] == cutoffs[0]].reset_index(drop=True),
    )
    # The later window: the fit at the first cutoff (fleet learnt then), advanced.
    seen = df[df[DS] <= cutoffs[0]].groupby(UID).tail(400)
    fitted = with_fleet(joint, seen).fit(seen)
    upto = df[df[DS] <= cutoffs[1]].groupby(UID).tail(400)
    expected = updated(fitted, upto).predict(H, LEVELS)
    got = late.sort_values([UID, "step"]).reset_index(drop=True)
    np.testing.assert_allclose(got["mean"], expected.sort_values([UID, "step"])["mean"])
    assert not np.allclose(got["mean"], each.frame[each.frame[CUTOFF] == cutoffs[1]]["mean"])
