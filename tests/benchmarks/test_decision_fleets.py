"""The decision benchmark's fleets: the replayed series in the case's units and step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.decision_fleets import default_fleets, file_fleets, on_step
from benchmarks.decision_quality import LORA_PEAK_GPUS, VCS, default_cases
from benchmarks.decision_quality import on_step as case_on_step
from forecaster.types import DS, UID, Y

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def frame() -> pd.DataFrame:
    ds = pd.date_range("2024-05-01", periods=6, freq="10min", tz="UTC")
    return pd.concat(
        [
            pd.DataFrame({UID: "a/demand_gpus", DS: ds, Y: [3.0, -1.0, 5.0, 7.0, 2.0, 4.0]}),
            pd.DataFrame({UID: "a/pending_gpus", DS: ds, Y: np.arange(6.0)}),
        ],
        ignore_index=True,
    )


def test_a_finer_step_holds_each_value_and_a_coarser_one_changes_nothing() -> None:
    fine = on_step(frame(), pd.Timedelta(minutes=5))
    demand = fine[fine[UID] == "a/demand_gpus"].set_index(DS)[Y]
    assert len(demand) == 11
    assert demand.iloc[:4].tolist() == [3.0, 3.0, -1.0, -1.0]
    assert len(on_step(frame(), pd.Timedelta(minutes=10))) == 12


def test_file_fleets_clip_demand_like_the_cases_and_keep_the_covariates() -> None:
    fleets = file_fleets(frame(), ["a/demand_gpus"])
    fleet = fleets["a_demand_gpus"]
    assert fleet.target == "a/demand_gpus"
    demand = fleet.frame[fleet.frame[UID] == "a/demand_gpus"][Y]
    assert (demand >= 0.0).all()  # never below zero, as the replayed case
    assert set(fleet.frame[UID]) == {"a/demand_gpus", "a/pending_gpus"}


def test_every_default_case_is_its_fleets_target_value_for_value() -> None:
    if not SHARED.is_dir():
        pytest.skip(f"shared traces not found at {SHARED.resolve()}")
    cases = default_cases(SHARED)
    fleets = default_fleets(SHARED, VCS, LORA_PEAK_GPUS)
    assert set(fleets) == set(cases)
    for name, series in cases.items():
        fleet = fleets[name]
        step = pd.Timedelta(minutes=5)
        fine = case_on_step(series, step)
        rows = on_step(fleet.frame, step)
        target = rows[rows[UID] == fleet.target].set_index(DS)[Y]
        np.testing.assert_allclose(target.reindex(fine.index).to_numpy(), fine.to_numpy())
