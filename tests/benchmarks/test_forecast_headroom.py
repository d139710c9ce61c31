"""The headroom benchmark: fair choices, result files, and its windows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.forecast_accuracy import load_series
from benchmarks.forecast_headroom import (
    fair_choices,
    half_choices,
    persistence_gap,
    read_families,
    score_pool,
    windows,
    worst_share,
)
from forecaster.contract import validate_series
from forecaster.types import UID

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"


def window_frame(scores: dict[str, list[float]]) -> pd.DataFrame:
    rows = [
        ("s", "1h", member, number, value)
        for member, values in scores.items()
        for number, value in enumerate(values)
    ]
    return pd.DataFrame(rows, columns=[UID, "horizon", "member", "window", "mase"])


def test_half_choice_scores_each_window_with_the_other_halfs_pick() -> None:
    # "a" wins on even windows, "b" on odd ones: each half's pick is the other's loser.
    frame = window_frame(
        {
            "persistence": [1.0, 1.0, 1.0, 1.0],
            "a": [0.1, 3.0, 0.1, 3.0],
            "b": [3.0, 0.2, 3.0, 0.2],
        }
    )
    got = half_choices(frame)
    # Odd windows get "a" (chosen on even): 3.0; even windows get "b": 3.0.
    assert got[("s", "1h")] == pytest.approx(3.0)


def test_half_choice_keeps_a_member_that_wins_on_both_halves() -> None:
    frame = window_frame({"persistence": [1.0, 1.0, 1.0, 1.0], "a": [0.5, 0.4, 0.5, 0.4]})
    assert half_choices(frame)[("s", "1h")] == pytest.approx(0.45)


def test_fair_choices_pick_on_tune_and_score_on_test() -> None:
    index = pd.MultiIndex.from_tuples(
        [("earth_x/y", "1h"), ("earth_x/y", "3h"), ("nab/z", "1h")], names=[UID, "horizon"]
    )
    tune = pd.DataFrame(
        {"persistence": [1.0, 1.0, 1.0], "a": [0.5, 2.0, 0.9], "b": [0.8, 0.7, 1.2]}, index=index
    )
    test = pd.DataFrame(
        {"persistence": [1.0, 1.0, 1.0], "a": [1.5, 0.1, 0.6], "b": [0.2, 0.9, 0.3]}, index=index
    )
    fair = fair_choices(tune, test)
    assert fair["fair_cell_member"].tolist() == ["a", "b", "a"]
    assert fair["fair_cell"].tolist() == [1.5, 0.9, 0.6]
    # One member per series: "b" has the better mean ratio over earth_x/y's horizons.
    assert fair["fair_series_member"].tolist() == ["b", "b", "a"]
    assert fair["fair_series"].tolist() == [0.2, 0.9, 0.6]


def test_a_result_file_of_another_region_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tune.json"
    path.write_text(json.dumps({"protocol": {"region": "tune", "test_windows": 12}, "cells": []}))
    with pytest.raises(ValueError, match=r"region 'tune'.*needs 'test'"):
        read_families([path], "test")
    with pytest.raises(ValueError, match="does not exist"):
        read_families([tmp_path / "missing.json"], "test")


def test_result_files_give_their_window_count_and_must_agree(tmp_path: Path) -> None:
    def write(name: str, windows: int, model: str) -> Path:
        cell = {UID: "s", "model": model, "horizon": "1h", "mase": 1.0}
        protocol = {"region": "tune", "test_windows": windows}
        path = tmp_path / name
        path.write_text(json.dumps({"protocol": protocol, "cells": [cell]}))
        return path

    wide, n_windows = read_families([write("a.json", 36, "gbm")], "tune")
    assert n_windows == 36
    assert list(wide.columns) == ["gbm"]
    both, _ = read_families([write("a.json", 36, "gbm"), write("b.json", 36, "gbm")], "tune")
    assert list(both.columns) == ["gbm", "gbm@b"]
    with pytest.raises(ValueError, match="12 windows per series, an earlier file 36"):
        read_families([write("a.json", 36, "gbm"), write("c.json", 12, "ets")], "tune")


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"needs the shared traces in {SHARED}")
def test_the_pools_persistence_is_forecast_accuracys() -> None:
    # Same windows and scales as the committed forecast_accuracy result, or the
    # hindsight comparison would be meaningless.
    raw = load_series(SHARED)
    keep = raw[raw[UID].isin(["earth_total/demand_gpus", "nab/rds_cpu_utilization_e47b3b"])]
    df, _ = validate_series(keep.reset_index(drop=True))
    table, per_window = score_pool(windows(df, "test"))
    files = [ROOT / "benchmarks" / "results" / "forecast_accuracy.json"]
    measured, n_windows = read_families(files, "test")
    assert n_windows == 12
    assert set(table.index) <= set(measured.index)
    assert persistence_gap(table, measured) < 1e-9
    assert per_window.groupby(UID)["window"].nunique().tolist() == [12, 12]
    assert np.isfinite(table["persistence"]).all()


def test_the_figure_is_drawn(tmp_path: Path) -> None:
    from benchmarks.headroom_plot import draw

    group = {
        "cells": 3,
        "over_persistence": {"champion": 0.98, "best_pool": 0.93, "fair_half": 1.2},
    }
    out = tmp_path / "fig" / "headroom.png"
    draw({"groups": {"helios": group, "all": group}, "target": 0.95}, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_worst_tenth_share_counts_persistences_scores_only() -> None:
    scores = {"persistence": [10.0] + [1.0] * 9, "a": [100.0] * 10}
    # One score in ten is the worst tenth: 10 of persistence's 19.
    assert worst_share(window_frame(scores)) == pytest.approx(10.0 / 19.0)


def test_fair_choices_fall_back_to_persistence_where_no_member_is_eligible() -> None:
    index = pd.MultiIndex.from_tuples([("nab/z", "1h")], names=[UID, "horizon"])
    tune = pd.DataFrame({"persistence": [1.0], "a": [np.nan]}, index=index)
    test = pd.DataFrame({"persistence": [0.9], "a": [0.1]}, index=index)
    fair = fair_choices(tune, test)
    assert fair["fair_cell_member"].tolist() == ["persistence"]
    assert fair["fair_cell"].tolist() == [0.9]
