"""The forecast-cycle benchmark's fleet and arguments (the cycle itself runs in `make bench`)."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks.forecast_cycle import POINTS, STEP, fleet, main, next_samples


def test_the_fleet_has_the_sample_signals_of_each_pool_and_is_seeded() -> None:
    frame = fleet(2)
    ids = sorted(frame["unique_id"].unique())
    assert ids == [
        f"pool-{i:04d}/{signal}"
        for i in range(2)
        for signal in sorted(("allocated_gpus", "gpu_util", "nodes", "queue_gpus"))
    ]
    assert (frame.groupby("unique_id").size() == POINTS).all()
    assert (frame["y"] >= 0).all()
    assert frame.equals(fleet(2))


def test_a_size_below_one_pool_is_refused_with_the_rule(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--sizes", "3"])
    assert "--sizes must be at least 5" in capsys.readouterr().err


def test_a_later_cycles_new_samples_are_each_signals_value_a_day_before() -> None:
    frame = fleet(1)
    at = frame["ds"].max() + STEP
    new = next_samples(frame, at)
    assert sorted(new["unique_id"]) == sorted(frame["unique_id"].unique())
    assert (new["ds"] == at).all()
    day_before = frame[frame["ds"] == at - pd.Timedelta(days=1)].set_index("unique_id")["y"]
    assert new.set_index("unique_id")["y"].equals(day_before)
