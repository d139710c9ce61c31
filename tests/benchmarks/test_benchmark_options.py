"""The decision and peak benchmarks on outside data: any series id, and a mistake said at once.

Every run here stops before any replay or fit (tiny files), except one fit of the peak
model on a few days of a request rate.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks import decision_quality, peak_quantile
from benchmarks.decision_fleets import file_fleets as case_fleets
from benchmarks.decision_quality import default_case_names, read_cases
from forecaster.exceptions import DataValidationError
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.types import DS, UID, Y

Main = Callable[[Sequence[str] | None], int]
MAINS = {"decision_quality": decision_quality.main, "peak_quantile": peak_quantile.main}


def series(uid: str, days: float, step: str = "10min") -> pd.DataFrame:
    """A daily cycle with noise: ``days`` of ``uid`` on ``step`` (seeded)."""
    ds = pd.date_range(
        "2024-03-01", periods=int(pd.Timedelta(days=days) / pd.Timedelta(step)), freq=step
    )
    phase = np.arange(len(ds)) * 2 * np.pi * pd.Timedelta(step) / pd.Timedelta(days=1)
    noise = np.random.default_rng(7).random(len(ds))
    return pd.DataFrame({UID: uid, DS: ds, Y: 20 + 10 * np.sin(phase) + 3 * noise})


def csv(path: Path, *frames: pd.DataFrame) -> Path:
    pd.concat(frames, ignore_index=True).to_csv(path, index=False)
    return path


def run(main: Main, tmp_path: Path, *options: str) -> int:
    """Run a benchmark's main with its outputs in ``tmp_path``."""
    out = ["--output", str(tmp_path / "out.json")]
    if main is decision_quality.main:
        out += ["--figures", str(tmp_path / "figures")]
    return main([*options, *out])


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err  # no traceback, no usage block
    return lines[0]


@pytest.fixture(params=sorted(MAINS))
def main(request: pytest.FixtureRequest) -> Main:
    return MAINS[str(request.param)]


def test_a_file_without_demand_stops_at_once_naming_the_ids_to_pass(
    main: Main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = csv(tmp_path / "rates.csv", series("x/rate_rps", 2), series("x/errors", 2))
    assert run(main, tmp_path, "--data", str(data)) == 2
    line = one_line(capsys.readouterr().err)
    assert "demand_gpus" in line
    assert "--series" in line
    assert "x/errors, x/rate_rps" in line
    assert not (tmp_path / "out.json").exists()  # nothing replayed or fitted


@pytest.mark.parametrize(
    ("named", "said"),
    [
        ("s1_demand_gpus", "did you mean 's1/demand_gpus'?"),
        ("s1/", "is not a series id '<pool>/<signal>'"),
        ("s2/demand_gpus", "'s2/demand_gpus' is not a series of the data"),
    ],
)
def test_a_series_id_the_files_do_not_hold_is_one_line_saying_what_they_do(
    main: Main, tmp_path: Path, capsys: pytest.CaptureFixture[str], named: str, said: str
) -> None:
    data = csv(tmp_path / "d.csv", series("s1/demand_gpus", 2))
    assert run(main, tmp_path, "--data", str(data), "--series", named) == 2
    line = one_line(capsys.readouterr().err)
    assert said in line
    assert line.endswith("The data holds: s1/demand_gpus")


@pytest.mark.parametrize("name", ["missing.csv", "empty.csv"])
def test_a_missing_or_empty_file_is_one_line_naming_it(
    main: Main, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    (tmp_path / "empty.csv").write_text("")
    assert run(main, tmp_path, "--data", str(tmp_path / name)) == 2
    assert str(tmp_path / name) in one_line(capsys.readouterr().err)


def test_an_id_without_a_pool_is_refused_for_the_peak_model_with_what_to_do(
    main: Main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = csv(tmp_path / "d.csv", series("series-7", 2))
    assert run(main, tmp_path, "--data", str(data), "--series", "series-7") == 2
    line = one_line(capsys.readouterr().err)
    assert "'series-7' is not '<pool>/<signal>'" in line
    assert "name it so in the file" in line


def test_the_replay_says_when_a_series_is_shorter_than_its_prehistory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = csv(tmp_path / "d.csv", series("x/rate_rps", 3))
    status = run(decision_quality.main, tmp_path, "--data", str(data), "--series", "x/rate_rps")
    assert status == 2
    line = one_line(capsys.readouterr().err)
    assert "x_rate_rps spans 3.0 days" in line
    assert "--prehistory-days" in line


def test_the_peak_benchmark_says_when_files_are_too_short_to_fit_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = csv(tmp_path / "d.csv", series("x/rate_rps", 2))
    assert run(peak_quantile.main, tmp_path, "--data", str(data), "--series", "x/rate_rps") == 2
    assert "too little history" in one_line(capsys.readouterr().err)


def test_lead_times_that_are_not_minutes_are_an_option_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        decision_quality.main(["--leads", "10,x"])
    assert exit_.value.code == 2
    assert "--leads: '10,x' is not comma-separated whole minutes" in capsys.readouterr().err


def test_the_default_cases_are_named_by_name_or_series_id_and_nothing_else() -> None:
    assert default_case_names(["earth_total/demand_gpus", "alibaba_lora_x"]) == [
        "earth_total",
        "alibaba_lora_x",
    ]
    with pytest.raises(DataValidationError, match="pass --data FILE"):
        default_case_names(["x/rate_rps"])


def test_any_signal_is_a_case_and_the_peak_model_forecasts_that_signal(tmp_path: Path) -> None:
    raw = pd.concat([series("x/rate_rps", 8), series("s1/demand_gpus", 8)], ignore_index=True)
    args = argparse.Namespace(
        data=[csv(tmp_path / "d.csv", raw)], series=["x/rate_rps"], quick=False
    )
    cases, fleets = read_cases(args, peak=True, prehistory=timedelta(days=7))
    assert list(cases) == ["x_rate_rps"]
    fleet = fleets["x_rate_rps"]
    assert fleet.target == "x/rate_rps"
    model = PeakQuantileForecaster(lead_steps=(1,), quantiles=(0.9,), max_iter=5, **fleet.params)
    pred = model.fit(fleet.frame).predict_peak(fleet.frame, since=fleet.frame[DS].max())
    assert set(pred[UID]) == {"x/rate_rps"}


def test_cases_of_different_signals_do_not_share_daily_fits() -> None:
    raw = pd.concat([series("x/rate_rps", 1), series("s1/demand_gpus", 1)], ignore_index=True)
    fleets = case_fleets(raw, ["x/rate_rps", "s1/demand_gpus"])
    # The replay caches the daily fits by fleet name.
    assert fleets["x_rate_rps"].name != fleets["s1_demand_gpus"].name
    assert fleets["s1_demand_gpus"].params == {"targets": ("demand_gpus",)}


def test_peak_fleets_of_files_are_one_per_step_with_leads_of_10_and_20_minutes() -> None:
    raw = pd.concat(
        [
            series("x/rate_rps", 1),
            series("x/pending_jobs", 1),
            series("nab/cpu", 1, step="5min"),
        ],
        ignore_index=True,
    )
    fleets = peak_quantile.file_fleets(raw, ["x/rate_rps", "nab/cpu"])
    by_leads = {f.leads: (f.targets, f.scored, set(f.frame[UID])) for f in fleets}
    assert by_leads == {
        (1, 2): (("rate_rps",), ("x/rate_rps",), {"x/rate_rps", "x/pending_jobs"}),
        (2, 4): (("cpu",), ("nab/cpu",), {"nab/cpu"}),
    }


def test_an_unknown_forecaster_is_said_before_any_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = csv(tmp_path / "d.csv", series("s1/demand_gpus", 8))
    assert run(decision_quality.main, tmp_path, "--data", str(data), "--model", "foo") == 2
    line = one_line(capsys.readouterr().err)
    assert "unknown forecaster 'foo' (--model)" in line
    assert not (tmp_path / "out.json").exists()
