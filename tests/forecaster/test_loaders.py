"""Loaders: tidy files in long and wide layouts, and the shared public traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.contract import validate_series
from forecaster.exceptions import SourceError
from forecaster.loaders import (
    TRACES,
    derive_demand,
    load_frame,
    load_trace,
    read_table,
    shared_data_dir,
)

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / ".." / "shared" / "data"
needs_data = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"shared public traces not found at {DATA} (a fresh checkout)"
)

WIDE = pd.DataFrame(
    {
        "timestamp": ["2024-05-01 00:00", "2024-05-01 00:10"],
        "cluster": ["c1", "c1"],
        "queue_gpus": [1, 2],
        "allocated_gpus": [10.0, 11.0],
    }
)


def write(df: pd.DataFrame, path: Path) -> Path:
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_long_file_round_trips(tmp_path: Path, suffix: str) -> None:
    df = pd.DataFrame(
        {"unique_id": ["a/x", "a/x", "b/x"], "ds": ["2024-05-01 00:00"] * 3, "y": [1.0, 2, 3]}
    )
    out = load_frame(write(df, tmp_path / f"f{suffix}"))
    assert list(out.columns) == ["unique_id", "ds", "y"]
    assert out["unique_id"].tolist() == ["a/x", "a/x", "b/x"]
    assert out["y"].tolist() == [1.0, 2.0, 3.0]


def test_long_file_with_configured_names_and_prefix(tmp_path: Path) -> None:
    df = pd.DataFrame({"when": ["2024-05-01"], "host": ["h1"], "cpu": [0.5]})
    out = load_frame(
        write(df, tmp_path / "f.csv"),
        layout="long",
        time_col="when",
        id_cols=["host"],
        value_cols=["cpu"],
        prefix="pool",
    )
    assert out.to_dict("list") == {"unique_id": ["pool/h1"], "ds": ["2024-05-01"], "y": [0.5]}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_wide_file_names_series_by_prefix_and_column(tmp_path: Path, suffix: str) -> None:
    out = load_frame(write(WIDE, tmp_path / f"f{suffix}"), prefix="a100")
    # The string column is not a value column; every numeric one is.
    assert sorted(out["unique_id"].unique()) == ["a100/allocated_gpus", "a100/queue_gpus"]
    queue = out[out["unique_id"] == "a100/queue_gpus"]
    assert queue["y"].tolist() == [1, 2]
    assert queue["ds"].astype(str).str.startswith("2024-05-01 00:").all()


def test_wide_file_defaults_prefix_to_file_stem(tmp_path: Path) -> None:
    out = load_frame(write(WIDE, tmp_path / "h100.csv"), value_cols=["queue_gpus"])
    assert out["unique_id"].unique().tolist() == ["h100/queue_gpus"]


def test_wide_file_with_id_column_names_series_by_id(tmp_path: Path) -> None:
    out = load_frame(write(WIDE, tmp_path / "f.csv"), id_cols=["cluster"])
    assert sorted(out["unique_id"].unique()) == ["c1/allocated_gpus", "c1/queue_gpus"]


def test_wide_value_column_called_y_does_not_clash(tmp_path: Path) -> None:
    df = pd.DataFrame({"ds": ["2024-05-01"], "y": [3.0], "z": [4.0]})
    out = load_frame(write(df, tmp_path / "f.csv"), layout="wide", prefix="p")
    assert dict(zip(out["unique_id"], out["y"], strict=True)) == {"p/y": 3.0, "p/z": 4.0}


def test_loaded_frame_validates(tmp_path: Path) -> None:
    raw = load_frame(write(WIDE, tmp_path / "f.csv"), prefix="a100")
    clean, report = validate_series(raw)
    assert str(clean["ds"].dtype) == "datetime64[ns, UTC]"
    assert len(clean) == 4
    assert report.frame_notes == ("ds had no time zone; read it as UTC",)


def test_missing_file_and_unknown_extension_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file") as err:
        read_table(tmp_path / "absent.csv")
    assert "absent.csv" in str(err.value)
    (tmp_path / "f.xlsx").write_text("x")
    with pytest.raises(SourceError, match=r"unsupported file type '\.xlsx'.*\.csv.*\.parquet"):
        load_frame(tmp_path / "f.xlsx")


def test_corrupt_parquet_is_a_source_error(tmp_path: Path) -> None:
    (tmp_path / "f.parquet").write_bytes(b"not parquet")
    with pytest.raises(SourceError, match="as parquet"):
        read_table(tmp_path / "f.parquet")


def test_missing_columns_are_named_with_the_file_shape_to_fix(tmp_path: Path) -> None:
    path = write(WIDE, tmp_path / "f.csv")
    with pytest.raises(SourceError, match=r"lacks the columns \['gpus'\].*A long file has") as e:
        load_frame(path, value_cols=["gpus"])
    df = pd.DataFrame({"when": ["2024-05-01"], "v": [1.0]})
    with pytest.raises(SourceError, match=r"no time column.*one of ds, timestamp") as f:
        load_frame(write(df, tmp_path / "g.csv"))
    # The hints name what the file needs, not Python arguments the CLI does not have.
    for raised in (e, f):
        assert not any(arg in str(raised.value) for arg in ("time_col", "value_cols", "id_cols"))


def test_an_unknown_extra_column_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    df = pd.DataFrame(
        {"unique_id": ["a/x", "a/x"], "ds": ["2024-05-01", "2024-05-02"], "y": [1.0, 2.0]}
    )
    df["region"] = "eu"
    with caplog.at_level("WARNING", logger="forecaster.loaders.files"):
        frame = load_frame(write(df, tmp_path / "long.csv"))
    assert list(frame.columns) == ["unique_id", "ds", "y"]
    assert "ignored the columns ['region']" in caplog.text


def test_long_layout_rejects_several_value_columns(tmp_path: Path) -> None:
    path = write(WIDE, tmp_path / "f.csv")
    with pytest.raises(SourceError, match="layout='wide'"):
        load_frame(path, layout="long", id_cols=["cluster"], value_cols=["queue_gpus", "cluster"])


def test_derive_demand_sums_aligned_timestamps_only() -> None:
    ds = pd.date_range("2024-05-01", periods=3, freq="10min", tz="UTC")
    df = pd.DataFrame(
        {
            "unique_id": ["p/allocated_gpus"] * 3 + ["p/pending_gpus"] * 2 + ["q/allocated_gpus"],
            "ds": [*ds, ds[0], ds[2], ds[0]],
            "y": [10.0, 11.0, 12.0, 1.0, np.nan, 5.0],
        }
    )
    out = derive_demand(df)
    demand = out[out["unique_id"] == "p/demand_gpus"]
    assert demand["ds"].tolist() == [ds[0], ds[2]]
    assert demand["y"].iloc[0] == 11.0
    assert np.isnan(demand["y"].iloc[1])  # a missing input is not a zero
    assert "q/demand_gpus" not in set(out["unique_id"])  # q has no pending series
    assert len(derive_demand(df[df["unique_id"] == "q/allocated_gpus"])) == 1


def test_shared_data_dir_walks_up_to_the_repo_root(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg" / "sub").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    assert shared_data_dir(repo / "pkg" / "sub") is None
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert shared_data_dir(repo / "pkg" / "sub") == (tmp_path / "shared" / "data").resolve()


def test_unknown_trace_name_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="helios_earth_total"):
        load_trace("nope", data_dir=tmp_path)
    with pytest.raises(SourceError, match="no such file"):
        load_trace("nab", data_dir=tmp_path)


# -- the shared public traces ---------------------------------------------------------


def signals_of(df: pd.DataFrame) -> set[str]:
    return set(df["unique_id"])


def assert_demand_is_sum(df: pd.DataFrame, entity: str) -> None:
    wide = df[df["unique_id"].str.startswith(entity + "/")].pivot(
        index="ds", columns="unique_id", values="y"
    )
    total = wide[f"{entity}/allocated_gpus"] + wide[f"{entity}/pending_gpus"]
    np.testing.assert_allclose(wide[f"{entity}/demand_gpus"], total)


@needs_data
def test_helios_earth_total() -> None:
    df = load_trace("helios_earth_total")
    assert {
        "earth_total/allocated_gpus",
        "earth_total/pending_gpus",
        "earth_total/demand_gpus",
    } <= (signals_of(df))
    assert str(df["ds"].dtype) == "datetime64[ns, UTC]"
    assert df["ds"].min() == pd.Timestamp("2020-05-01", tz="UTC")
    assert_demand_is_sum(df, "earth_total")
    clean, report = validate_series(df)
    assert len(clean) == len(df)
    assert not report


@needs_data
def test_helios_earth_vc() -> None:
    df = load_trace("helios_earth_vc", signals={"allocated_gpus", "pending_gpus", "demand_gpus"})
    entities = {uid.split("/")[0] for uid in df["unique_id"]}
    assert len(entities) == 16
    assert all(e.startswith("earth_vc_") for e in entities)
    assert "earth_vc_vc3sl/demand_gpus" in signals_of(df)
    assert_demand_is_sum(df, "earth_vc_vc3sl")


@needs_data
def test_alibaba_traces() -> None:
    lora = load_trace("alibaba_lora")
    assert {"alibaba_lora/arrivals", "alibaba_lora/busy_gpus_est"} <= signals_of(lora)
    assert not any(uid.endswith("/demand_gpus") for uid in signals_of(lora))
    openb = load_trace(DATA / TRACES["alibaba_openb"].file)
    assert {"alibaba_openb/pending_gpus", "alibaba_openb/demand_gpus"} <= signals_of(openb)
    assert_demand_is_sum(openb, "alibaba_openb")
    assert str(openb["ds"].dtype) == "datetime64[ns, UTC]"


@needs_data
def test_nab_has_missing_values_that_validation_fills() -> None:
    df = load_trace("nab")
    assert signals_of(df) == {
        "nab/ec2_cpu_utilization_24ae8d",
        "nab/elb_request_count_8c0756",
        "nab/rds_cpu_utilization_e47b3b",
    }
    assert df["y"].isna().sum() > 0
    clean, report = validate_series(df)
    assert not clean["y"].isna().any()
    assert set(report.changed) == {"nab/elb_request_count_8c0756"}
    assert report.steps["nab/ec2_cpu_utilization_24ae8d"] == pd.Timedelta("5min")
