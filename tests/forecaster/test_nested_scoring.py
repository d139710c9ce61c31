"""Selection never sees the windows the champion is scored and gated on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.backtest import backtest, split_heldout
from forecaster.cutoffs import nested_cutoffs
from forecaster.exceptions import InsufficientHistoryError
from forecaster.models.naive import Persistence, SeasonalNaive
from forecaster.plan import TrainingPlan
from forecaster.procedure import TrainedChampion, champion_backtest
from forecaster.tracking import TrackingConfig
from forecaster.training import train
from forecaster.types import CUTOFF, DS, UID, Y

DAY = 24
PLAN = TrainingPlan(
    horizon=6,
    horizons={"1h": 1, "6h": 6},
    selection_horizon="6h",
    n_windows=4,
    heldout_windows=3,
    levels=(0.5, 0.9),
    max_train=8 * DAY,
)


def frame(days: int = 14, seed: int = 5) -> pd.DataFrame:
    """Three series: daily cycle, random walk, and a mix (families differ between them)."""
    rng = np.random.default_rng(seed)
    n = days * DAY
    t = np.arange(n)
    ds = pd.date_range("2025-03-01", periods=n, freq="1h", tz="UTC")
    cycle = 30 + 20 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 1, n)
    walk = 50 + np.cumsum(rng.normal(0, 2, n))
    mixed = 0.5 * cycle + 0.5 * walk
    parts = [
        pd.DataFrame({UID: uid, DS: ds, Y: np.clip(y, 0, None)})
        for uid, y in (("p/cycle", cycle), ("p/walk", walk), ("p/mixed", mixed))
    ]
    return pd.concat(parts, ignore_index=True)


def perturb_heldout(df: pd.DataFrame, plan: TrainingPlan, seed: int = 11) -> pd.DataFrame:
    """Replace every value after each series' first held-out cutoff by noise."""
    rng = np.random.default_rng(seed)
    out = []
    for _, rows in df.groupby(UID, sort=True):
        group = rows.reset_index(drop=True).copy()
        _, heldout = nested_cutoffs(
            len(group),
            horizon=plan.horizon,
            n_selection=plan.n_windows,
            n_heldout=plan.heldout_windows,
        )
        later = group.index > heldout[0]
        group.loc[later, Y] = rng.uniform(0, 500, int(later.sum()))
        out.append(group)
    return pd.concat(out, ignore_index=True)


def models() -> list[Persistence | SeasonalNaive]:
    return [Persistence(horizon=6), SeasonalNaive(season_length=DAY, horizon=6)]


def test_selection_windows_end_before_the_first_heldout_cutoff() -> None:
    for n_obs, horizon in ((336, 6), (200, 12), (1000, 36)):
        selection, heldout = nested_cutoffs(n_obs, horizon=horizon, n_selection=5, n_heldout=3)
        assert len(selection) == 5
        assert len(heldout) == 3
        assert selection == sorted(set(selection))
        assert selection[-1] + horizon <= heldout[0]
        assert heldout[-1] == n_obs - 1 - horizon


def test_nested_cutoffs_say_when_the_windows_do_not_fit() -> None:
    with pytest.raises(InsufficientHistoryError, match="selection cutoffs"):
        nested_cutoffs(60, horizon=6, n_selection=2, n_heldout=2)


def test_split_heldout_separates_the_windows_at_the_first_heldout_cutoff() -> None:
    df = frame()
    result = backtest(models(), df, horizon=6, n_windows=4, heldout_windows=3)
    chosen, heldout = split_heldout(result)
    for uid, first in result.heldout_from.items():
        assert (chosen.frame.loc[chosen.frame[UID] == uid, CUTOFF] < first).all()
        assert (heldout.frame.loc[heldout.frame[UID] == uid, CUTOFF] >= first).all()
        assert chosen.frame.loc[chosen.frame[UID] == uid, CUTOFF].nunique() == 4
        assert heldout.frame.loc[heldout.frame[UID] == uid, CUTOFF].nunique() == 3
        # no selection window's actuals reach past the first held-out cutoff
        assert (chosen.frame.loc[chosen.frame[UID] == uid, DS] <= first).all()


def tracking(tmp_path: Path, name: str) -> TrackingConfig:
    return TrackingConfig(
        tracking_uri=f"sqlite:///{tmp_path}/{name}.db",
        experiment_name="nested",
        artifact_location=(tmp_path / f"{name}-artifacts").as_uri(),
    )


def test_changing_only_heldout_data_leaves_every_selection_identical(tmp_path: Path) -> None:
    df = frame()
    changed = perturb_heldout(df, PLAN)
    assert not np.allclose(df[Y], changed[Y])  # the held-out data did change
    outcomes = [
        train(
            data,
            models(),
            PLAN,
            tracking=tracking(tmp_path, name),
            model_name="demand",
            models_dir=tmp_path / name,
        )
        for name, data in (("original", df), ("changed", changed))
    ]
    original, perturbed = outcomes
    assert original.selection == perturbed.selection
    pd.testing.assert_frame_equal(original.selection_scores, perturbed.selection_scores)
    # ...while the scores reported and gated on did see the change
    assert not np.allclose(
        original.scores["mase"].to_numpy(), perturbed.scores["mase"].to_numpy(), equal_nan=True
    )
    # the same selection as the public procedure, with no MLflow at all
    replayed = TrainedChampion(models(), PLAN).fit(changed)
    assert replayed.selection_ == perturbed.selection


def test_the_walk_forward_procedure_never_reads_past_its_cutoff() -> None:
    df = frame()
    cutoff = pd.Timestamp(df[DS].iloc[10 * DAY])
    later = df[DS] > cutoff
    changed = df.copy()
    changed.loc[later, Y] = changed.loc[later, Y] * 7 + 100
    runs = [
        champion_backtest(data, models(), PLAN, cutoffs=[cutoff], horizon=6)
        for data in (df, changed)
    ]
    pd.testing.assert_frame_equal(runs[0].selections, runs[1].selections)
    means = [r.result.frame["mean"].to_numpy() for r in runs]
    np.testing.assert_allclose(means[0], means[1])
    actuals = [r.result.frame[Y].to_numpy() for r in runs]
    assert not np.allclose(actuals[0], actuals[1])  # scored against the changed future
    assert set(runs[0].selections[UID]) == {"p/cycle", "p/walk", "p/mixed"}
