"""Leave-one-family-out choice of the online constants: a fold never sees its own family."""

from __future__ import annotations

from dataclasses import astuple

import numpy as np
import pandas as pd
import pytest

from benchmarks.peak_lofo import (
    SERVED,
    Constants,
    Grid,
    Track,
    axis,
    choose,
    folds,
    grid_scores,
    objective,
)
from forecaster.peak.reference import trailing_reference
from forecaster.peak.target import lead_peak

OTHER = Constants(0.005, 30.0, 72.0, 0.0, 1.0)


def table(ratios: dict[tuple[str, Constants, str], list[float]]) -> pd.DataFrame:
    """A scores frame: (family, constants, window) -> the ratios of its cells."""
    rows = []
    for (family, constants, window), values in ratios.items():
        for i, ratio in enumerate(values):
            rows.append(
                {
                    **constants.as_dict(),
                    "uid": f"{family}/s{i}",
                    "family": family,
                    "lead": 1,
                    "q": 0.9,
                    "window": window,
                    "pinball": ratio,
                    "reference": 1.0,
                    "ratio": ratio,
                }
            )
    return pd.DataFrame(rows)


def synthetic() -> dict[tuple[str, Constants, str], list[float]]:
    # A prefers OTHER on its own tune cells; B and C prefer SERVED. Holdout cells
    # would prefer OTHER everywhere: they must never decide.
    return {
        ("a", SERVED, "tune"): [1.0, 1.0],
        ("a", OTHER, "tune"): [0.5, 0.5],
        ("b", SERVED, "tune"): [0.8],
        ("b", OTHER, "tune"): [0.9],
        ("c", SERVED, "tune"): [0.8, 0.8, 0.8],
        ("c", OTHER, "tune"): [0.85, 0.85, 0.85],
        ("a", SERVED, "holdout"): [2.0],
        ("a", OTHER, "holdout"): [0.1],
        ("b", SERVED, "holdout"): [2.0],
        ("b", OTHER, "holdout"): [0.1],
        ("c", SERVED, "holdout"): [2.0],
        ("c", OTHER, "holdout"): [0.1],
    }


def test_a_fold_chooses_on_the_other_families_tune_cells_only() -> None:
    scores = table(synthetic())
    chosen = folds(scores)
    assert chosen["a"] == SERVED  # its own cells prefer OTHER: not seen
    # Without b, a's two cells and c's three: SERVED 0.88, OTHER 0.71.
    assert chosen["b"] == OTHER
    assert chosen["c"] == OTHER  # without c: SERVED 0.933, OTHER 0.633
    assert choose(scores) == OTHER  # in-sample, every family's tune cells
    assert objective(scores, "a").loc[astuple(SERVED)] == pytest.approx(0.8)


def test_a_folds_choice_does_not_move_whatever_its_own_family_scores() -> None:
    base = folds(table(synthetic()))
    rng = np.random.default_rng(0)
    for _ in range(5):
        changed = synthetic()
        for key in changed:
            if key[0] == "a" or key[2] == "holdout":
                changed[key] = list(rng.uniform(0.0, 3.0, len(changed[key])))
        assert folds(table(changed))["a"] == base["a"]


def test_a_tie_keeps_the_served_constants() -> None:
    even = {("a", c, "tune"): [0.9] for c in (SERVED, OTHER)}
    even |= {("b", c, "tune"): [0.7] for c in (SERVED, OTHER)}
    assert folds(table(even)) == {"a": SERVED, "b": SERVED}


def track(family: str, seed: int, n: int = 600) -> Track:
    rng = np.random.default_rng(seed)
    y = 50.0 + np.cumsum(rng.normal(0.0, 1.0, n))
    levels = (0.9,)
    peak = lead_peak(y, 1)
    nothing = np.full((n, 1), np.nan)
    tune = np.zeros(n, dtype=bool)
    tune[100:350] = True
    return Track(
        uid=f"{family}/demand_gpus",
        family=family,
        lead=1,
        levels=levels,
        last=y,
        scale=np.ones(n),
        peak=peak,
        raw=(y + rng.uniform(0.5, 2.5))[:, None] + rng.normal(0.0, 0.5, (n, 1)),
        returning=np.full(n, np.nan),
        experts={
            "reference": trailing_reference(y, 1, 48, levels),
            "time_of_day": nothing,
            "yesterday": nothing,
            "last_week": nothing,
        },
        windows={"tune": tune, "holdout": np.arange(n) >= 350},
    )


def test_the_grid_scores_every_cell_and_a_fold_ignores_its_familys_series() -> None:
    grid = Grid(gamma=(0.002,), eta=(100.0, 1.0), halflife=(144.0,), snap=(1.0,), min_level=(0.5,))
    tracks = [track("a", 1), track("b", 2), track("c", 3)]
    scores = grid_scores(tracks, grid)
    assert len(scores) == len(grid) * len(tracks) * 2  # two windows, one level
    assert np.isfinite(scores["ratio"]).all()
    chosen = folds(scores)
    # Family a's series replaced by any other: its fold's choice stays.
    for seed in range(4, 8):
        other = grid_scores([track("a", seed), tracks[1], tracks[2]], grid)
        assert folds(other)["a"] == chosen["a"]


def test_each_axis_starts_with_the_served_value_once() -> None:
    assert axis(0.005, 0.002, 0.005) == (0.005, 0.002)
    grid = Grid()
    first = Constants(*(values[0] for values in grid.as_dict().values()))
    assert first == SERVED
    assert all(len(set(v)) == len(v) for v in grid.as_dict().values())
