"""Tests of the per-window steps of a training run's metrics."""

from __future__ import annotations

import pandas as pd

from forecaster.run_metrics import window_steps


def test_window_steps_put_held_out_windows_after_the_plans_selection_windows() -> None:
    day = pd.Timedelta(days=1)
    t0 = pd.Timestamp("2025-01-01", tz="UTC")
    rows = [("a/y", t0 + day * i) for i in range(5)]  # 3 selection, 2 held out
    rows += [("b/y", t0 + day * i) for i in (3, 4)]  # held out only (a shorter series)
    rows += [("c/y", t0 + day * i) for i in (2, 3)]  # selection only: no held-out cutoff
    frame = pd.DataFrame(rows * 2, columns=["unique_id", "cutoff"])  # two rows a window
    heldout_from = {"a/y": t0 + day * 3, "b/y": t0 + day * 3}
    steps = window_steps(frame, heldout_from, n_selection=3)
    keys = zip(frame["unique_id"], frame["cutoff"].dt.day, strict=True)
    got = dict(zip(keys, steps, strict=True))
    assert got == {
        ("a/y", 1): 0,
        ("a/y", 2): 1,
        ("a/y", 3): 2,
        ("a/y", 4): 3,
        ("a/y", 5): 4,
        ("b/y", 4): 3,
        ("b/y", 5): 4,
        ("c/y", 3): 1,
        ("c/y", 4): 2,
    }
    assert steps.index.equals(frame.index)
