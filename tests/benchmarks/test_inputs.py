"""The benchmarks' shared inputs: which series run, and a user's mistake said in one line."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from benchmarks.inputs import input_error, load_files, pick_series
from forecaster.exceptions import DataValidationError, SourceError
from forecaster.types import DS, UID, Y

IDS = ["s1/demand_gpus", "s1/pending_gpus", "x/rate_rps"]


def test_by_default_every_series_of_the_signal_runs() -> None:
    assert pick_series(IDS, None, signal="demand_gpus") == ["s1/demand_gpus"]
    assert pick_series(IDS, None) == IDS


def test_any_series_id_of_the_data_may_be_named_whatever_its_signal() -> None:
    assert pick_series(IDS, ["x/rate_rps"], signal="demand_gpus") == ["x/rate_rps"]


def test_no_series_of_the_default_signal_says_which_ids_there_are_and_to_pass_series() -> None:
    with pytest.raises(DataValidationError) as error:
        pick_series(["x/rate_rps", "x/errors"], None, signal="demand_gpus")
    message = str(error.value)
    assert "demand_gpus" in message
    assert "--series" in message
    assert "x/rate_rps" in message
    assert "x/errors" in message


def test_a_case_name_given_for_an_id_is_told_the_id_it_stands_for() -> None:
    with pytest.raises(DataValidationError) as error:
        pick_series(IDS, ["s1_demand_gpus"])
    message = str(error.value)
    assert "'<pool>/<signal>'" in message  # what is wrong with it
    assert "did you mean 's1/demand_gpus'" in message


def test_an_unknown_id_lists_the_data_s_series() -> None:
    with pytest.raises(DataValidationError) as error:
        pick_series(IDS, ["s2/demand_gpus"])
    assert "'s2/demand_gpus' is not a series of the data" in str(error.value)
    assert "x/rate_rps" in str(error.value)


def test_a_long_listing_is_cut_and_counted() -> None:
    many = [f"p{i:02d}/rate_rps" for i in range(30)]
    with pytest.raises(DataValidationError) as error:
        pick_series(many, None, signal="demand_gpus")
    assert "p11/rate_rps" in str(error.value)
    assert "p12/rate_rps" not in str(error.value)
    assert "(and 18 more)" in str(error.value)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("missing.csv", None, "does not exist"),
        ("empty.csv", "", "is empty"),
        ("header.csv", "unique_id,ds,y\n", "holds no rows"),
    ],
)
def test_a_file_that_holds_no_series_is_a_source_error_naming_it(
    tmp_path: Path, name: str, text: str | None, said: str
) -> None:
    path = tmp_path / name
    if text is not None:
        write(path, text)
    with pytest.raises(SourceError) as error:
        load_files([path])
    assert str(path) in str(error.value)
    assert said in str(error.value)


def test_a_directory_is_not_taken_for_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="is a directory"):
        load_files([tmp_path])


def test_files_are_read_long_with_demand_derived(tmp_path: Path) -> None:
    path = write(
        tmp_path / "p.csv",
        "unique_id,ds,y\na/allocated_gpus,2024-01-01 00:00,3\na/pending_gpus,2024-01-01 00:00,2\n",
    )
    frame = load_files([path])
    demand = frame[frame[UID] == "a/demand_gpus"]
    assert demand[Y].tolist() == [5.0]
    assert pd.Timestamp(demand[DS].iloc[0]) == pd.Timestamp("2024-01-01 00:00")


def test_an_input_error_is_one_line_on_the_stream_and_exit_status_2() -> None:
    out = io.StringIO()
    status = input_error("bench.py", DataValidationError("no series;\nsay --series"), out)
    assert status == 2
    assert out.getvalue() == "bench.py: error: no series; say --series\n"
