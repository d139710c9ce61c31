"""FileSource: long and wide files, window filtering, series resolution."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import SourceError
from forecaster.types import DS, UID, Y
from pipelines.sources.files import FileSource

STEP = timedelta(minutes=10)
T0 = pd.Timestamp("2024-05-01T00:00:00Z")
SHARED = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"


@pytest.fixture
def long_csv(tmp_path: Path) -> Path:
    ds = pd.date_range(T0, periods=6, freq="10min")
    frame = pd.concat(
        pd.DataFrame({"unique_id": uid, "ds": ds.strftime("%Y-%m-%dT%H:%M:%SZ"), "y": values})
        for uid, values in (
            ("a100/queue_gpus", [0, 8, 16, 8, 0, 24]),
            ("a100/nodes", [2, 2, 3, 3, 3, 4]),
            ("h100/nodes", [1, 1, 1, 2, 2, 2]),
        )
    )
    path = tmp_path / "metrics.csv"
    # Shuffled rows with a repeated sample: the source must sort and dedupe.
    frame = pd.concat([frame, frame.iloc[[2]]]).sample(frac=1.0, random_state=3)
    frame.to_csv(path, index=False)
    return path


@pytest.fixture
def wide_parquet(tmp_path: Path) -> Path:
    ds = pd.date_range("2024-05-01", periods=4, freq="10min")  # naive: read as UTC
    frame = pd.DataFrame(
        {"timestamp": ds, "pending_gpus": [1.0, 2.0, np.nan, 4.0], "allocated_gpus": [5, 6, 7, 8]}
    )
    path = tmp_path / "cluster.parquet"
    frame.to_parquet(path)
    return path


def test_long_file_is_filtered_to_the_inclusive_window(long_csv: Path) -> None:
    source = FileSource(long_csv)
    frame = source.fetch({"pool-a/queue": "a100/queue_gpus"}, T0 + STEP, T0 + 3 * STEP, STEP)
    assert frame[UID].unique().tolist() == ["pool-a/queue"]
    assert frame[DS].tolist() == [T0 + STEP, T0 + 2 * STEP, T0 + 3 * STEP]
    assert frame[Y].tolist() == [8.0, 16.0, 8.0]
    assert str(frame[DS].dtype) == "datetime64[ns, UTC]"
    assert frame[Y].dtype == np.float64


def test_several_series_come_back_sorted_and_unique(long_csv: Path) -> None:
    queries = {"h100/nodes": "h100/nodes", "a100/nodes": "a100/nodes"}
    frame = FileSource(long_csv).fetch(queries, T0, T0 + 10 * STEP, STEP)
    assert frame[UID].tolist() == ["a100/nodes"] * 6 + ["h100/nodes"] * 6
    assert not frame.duplicated([UID, DS]).any()
    assert frame.groupby(UID)[DS].apply(lambda s: s.is_monotonic_increasing).all()


def test_wide_file_columns_are_found_by_name(wide_parquet: Path) -> None:
    source = FileSource(wide_parquet)
    frame = source.fetch({"a/queue_gpus": "pending_gpus"}, T0, T0 + 10 * STEP, STEP)
    assert frame[DS].iloc[0] == T0
    assert frame[Y].isna().tolist() == [False, False, True, False]
    full = source.fetch({"a/x": "cluster/allocated_gpus"}, T0, T0 + STEP, STEP)
    assert full[Y].tolist() == [5.0, 6.0]


def test_unknown_series_lists_what_the_file_has(long_csv: Path) -> None:
    with pytest.raises(SourceError) as caught:
        FileSource(long_csv).fetch({"a100/gpu_util": "gpu_util"}, T0, T0 + STEP, STEP)
    message = str(caught.value)
    assert "'gpu_util'" in message
    assert "a100/queue_gpus" in message
    assert "metrics.csv" in message


def test_ambiguous_suffix_asks_for_the_full_name(long_csv: Path) -> None:
    with pytest.raises(SourceError, match="matches several series"):
        FileSource(long_csv).fetch({"x": "nodes"}, T0, T0 + STEP, STEP)


def test_missing_file_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        FileSource(tmp_path / "absent.csv").fetch({"x": "y"}, T0, T0 + STEP, STEP)


def test_window_outside_the_data_is_empty(long_csv: Path) -> None:
    later = T0 + timedelta(days=30)
    frame = FileSource(long_csv).fetch({"x": "a100/nodes"}, later, later + STEP, STEP)
    assert frame.empty
    assert list(frame.columns) == [UID, DS, Y]


def test_real_trace_reads_like_the_csv() -> None:
    path = SHARED / "helios_earth_total_10min.csv"
    if not path.is_file():
        pytest.skip(f"shared data not found at {path.resolve()}; real-trace test skipped")
    raw = pd.read_csv(path, parse_dates=["timestamp"])
    start = pd.Timestamp("2020-05-03T00:00:00Z")
    end = start + timedelta(days=1)
    frame = FileSource(path).fetch({"earth/allocated_gpus": "allocated_gpus"}, start, end, STEP)
    ts = raw["timestamp"].dt.tz_localize("UTC")
    expected = raw.loc[(ts >= start) & (ts <= end), "allocated_gpus"].to_numpy()
    assert len(frame) == 145
    np.testing.assert_array_equal(frame[Y].to_numpy(), expected)
