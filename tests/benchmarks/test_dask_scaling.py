"""The Dask scaling benchmark's arguments and summary (the trainings run in `make bench`)."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.dask_scaling import Run, main, parse_order, summary


def _run(workers: int, seconds: float, worker_cpu: float, driver_cpu: float) -> Run:
    return Run(workers, 100, seconds, worker_cpu, driver_cpu, 1.0, 1.0, 0)


def test_the_summary_takes_medians_and_compares_with_the_fewest_workers() -> None:
    runs = [
        _run(1, 100.0, 80.0, 20.0),
        _run(2, 60.0, 84.0, 21.0),
        _run(2, 50.0, 82.0, 19.0),
        _run(1, 110.0, 82.0, 20.0),
    ]
    one, two = summary(runs)
    assert (one["median_s"], one["speedup"], one["efficiency"]) == (105.0, 1.0, 1.0)
    assert two["median_s"] == 55.0
    assert two["speedup"] == pytest.approx(105 / 55, abs=1e-3)
    assert two["efficiency"] == pytest.approx(105 / 55 / 2, abs=1e-3)
    assert two["series_per_worker_cpu_s"] == pytest.approx(100 / 83, abs=1e-3)
    assert two["driver_share"] == pytest.approx(20 / 103, abs=1e-3)


def test_the_order_is_worker_counts_separated_by_commas() -> None:
    assert parse_order("1,2,2,1") == [1, 2, 2, 1]
    for bad in ("", "0,1", "one"):
        with pytest.raises(argparse.ArgumentTypeError, match="--order"):
            parse_order(bad)


def test_no_series_is_refused_before_any_cluster_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--series", "0"])
    assert "--series needs at least 1" in capsys.readouterr().err
