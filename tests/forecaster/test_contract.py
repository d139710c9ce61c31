"""The series data contract: every cleaning rule, every rejection, the report."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest

from forecaster.contract import CleaningReport, CleaningWarning, validate_series
from forecaster.exceptions import DataValidationError, InsufficientHistoryError

T0 = pd.Timestamp("2024-05-01 00:00", tz="UTC")
TEN = pd.Timedelta("10min")


def times(*minutes: float, tz: str | None = "UTC") -> list[pd.Timestamp]:
    base = T0 if tz == "UTC" else T0.tz_localize(None)
    return [base + pd.Timedelta(minutes=m) for m in minutes]


def series(uid: str, minutes: Sequence[float], ys: Sequence[object]) -> pd.DataFrame:
    return pd.DataFrame({"unique_id": uid, "ds": times(*minutes), "y": ys})


def expected(uid: str, start_min: float, ys: list[float], step_min: float = 10) -> pd.DataFrame:
    ds = pd.date_range(T0 + pd.Timedelta(minutes=start_min), periods=len(ys), freq=f"{step_min}min")
    return pd.DataFrame({"unique_id": uid, "ds": ds.as_unit("ns"), "y": np.asarray(ys, float)})


def test_clean_frame_passes_unchanged_with_exact_dtypes() -> None:
    df = pd.concat([series("a/x", [0, 10, 20], [1, 2, 3]), series("b/x", [0, 60], [5, 6])])
    out, report = validate_series(df)
    assert list(out.columns) == ["unique_id", "ds", "y"]
    assert str(out["ds"].dtype) == "datetime64[ns, UTC]"
    assert out["y"].dtype == np.float64
    assert all(isinstance(uid, str) for uid in out["unique_id"])
    assert not report
    assert report.changed == {}
    assert report.steps == {"a/x": TEN, "b/x": pd.Timedelta("1h")}
    assert list(out.index) == list(range(5))


def test_missing_columns_error_lists_them_and_says_rename() -> None:
    df = pd.DataFrame({"unique_id": ["a"], "timestamp": [T0], "value": [1.0]})
    with pytest.raises(DataValidationError) as err:
        validate_series(df)
    message = str(err.value)
    assert "['ds', 'y']" in message
    assert "rename" in message.lower()
    assert "timestamp" in message  # what was found, so the user sees the mismatch


def test_empty_frame_is_rejected() -> None:
    with pytest.raises(DataValidationError, match="no rows"):
        validate_series(pd.DataFrame({"unique_id": [], "ds": [], "y": []}))


def test_unique_id_becomes_str_and_extra_columns_are_dropped_with_note() -> None:
    df = pd.DataFrame({"unique_id": [7, 7], "ds": times(0, 10), "y": [1, 2], "extra": [0, 0]})
    out, report = validate_series(df)
    assert out["unique_id"].tolist() == ["7", "7"]
    assert list(out.columns) == ["unique_id", "ds", "y"]
    assert report.frame_notes == ("ignored extra columns ['extra']",)


def test_naive_ds_is_localised_to_utc_with_note() -> None:
    df = pd.DataFrame({"unique_id": "a", "ds": times(0, 10, tz=None), "y": [1.0, 2.0]})
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 0, [1, 2]))
    assert any("no time zone" in note for note in report.frame_notes)


def test_aware_ds_is_converted_to_utc() -> None:
    berlin = [t.tz_convert("Europe/Berlin") for t in times(0, 10)]
    df = pd.DataFrame({"unique_id": "a", "ds": berlin, "y": [1.0, 2.0]})
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 0, [1, 2]))
    assert report.frame_notes == ("converted ds from Europe/Berlin to UTC",)


def test_string_ds_with_mixed_offsets_is_parsed_to_utc() -> None:
    df = pd.DataFrame(
        {"unique_id": "a", "ds": ["2024-05-01T02:00+02:00", "2024-05-01T00:10Z"], "y": [1, 2]}
    )
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 0, [1, 2]))
    assert report.frame_notes  # it says that ds was parsed element by element


def test_unparseable_ds_and_non_numeric_y_name_every_bad_series_and_the_fix() -> None:
    df = pd.concat(
        [
            pd.DataFrame({"unique_id": "bad_ds", "ds": ["2024-05-01 00:00", "soon"], "y": [1, 2]}),
            pd.DataFrame(
                {
                    "unique_id": "bad_y",
                    "ds": ["2024-05-01 00:00", "2024-05-01 00:10"],
                    "y": [1, "x"],
                }
            ),
            pd.DataFrame(
                {"unique_id": "good", "ds": ["2024-05-01 00:00", "2024-05-01 00:10"], "y": [1, 2]}
            ),
        ]
    )
    with pytest.raises(DataValidationError) as err:
        validate_series(df)
    assert not isinstance(err.value, InsufficientHistoryError)
    message = str(err.value)
    assert "2 series break the data contract" in message
    assert "'bad_ds'" in message
    assert "'soon'" in message
    assert "ISO 8601" in message
    assert "'bad_y'" in message
    assert "'x'" in message
    assert "pd.to_numeric" in message
    assert "'good'" not in message
    assert "on_error='drop'" in message


def test_on_error_drop_keeps_good_series_and_names_the_dropped() -> None:
    df = pd.concat(
        [
            pd.DataFrame({"unique_id": "bad", "ds": ["2024-05-01 00:00", "never"], "y": [1, 2]}),
            pd.DataFrame(
                {"unique_id": "good", "ds": ["2024-05-01 00:00", "2024-05-01 00:10"], "y": [1, 2]}
            ),
        ]
    )
    out, report = validate_series(df, on_error="drop")
    pd.testing.assert_frame_equal(out, expected("good", 0, [1, 2]))
    assert set(report.dropped) == {"bad"}
    assert "never" in report.dropped["bad"]
    assert report  # dropping is a change


def test_drop_with_no_series_left_still_raises() -> None:
    df = pd.DataFrame({"unique_id": "bad", "ds": ["never", "ever"], "y": [1, 2]})
    with pytest.raises(DataValidationError, match="No series is left"):
        validate_series(df, on_error="drop")


def test_textual_nan_in_y_is_missing_not_an_error() -> None:
    df = pd.DataFrame({"unique_id": "a", "ds": times(0, 10, 20), "y": ["1", "nan", "3"]})
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 0, [1, 2, 3]))
    assert "treated 1 NaN y values as missing" in report.notes["a"]


def test_numeric_ds_is_rejected_with_the_conversion_to_use() -> None:
    df = pd.DataFrame({"unique_id": "a", "ds": [0, 600], "y": [1.0, 2.0]})
    with pytest.raises(DataValidationError, match=r"pd.to_datetime\(df\['ds'\], unit='s'"):
        validate_series(df)


def test_missing_unique_id_raises_or_drops_rows() -> None:
    df = pd.DataFrame({"unique_id": ["a", None, "a"], "ds": times(0, 5, 10), "y": [1, 9, 2]})
    with pytest.raises(DataValidationError, match="1 rows have no unique_id"):
        validate_series(df)
    out, report = validate_series(df, on_error="drop")
    pd.testing.assert_frame_equal(out, expected("a", 0, [1, 2]))
    assert "dropped 1 rows without a unique_id" in report.frame_notes


def test_duplicates_keep_the_last_row_in_input_order() -> None:
    df = series("a", [0, 10, 10, 20], [1, 2, 99, 3])
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 0, [1, 99, 3]))
    assert report.notes["a"] == ("dropped 1 rows with a repeated ds, keeping the last",)


def test_unsorted_rows_are_sorted_with_note_and_dup_order_kept() -> None:
    df = series("a", [20, 10, 0, 10], [3, 2, 1, 22])
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 0, [1, 22, 3]))
    assert report.notes["a"][0] == "sorted rows by ds"


def test_nan_inf_and_negative_become_missing_and_are_interpolated() -> None:
    df = series("a/queue_gpus", [0, 10, 20, 30, 40], [0, np.nan, -4, np.inf, 8])
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a/queue_gpus", 0, [0, 2, 4, 6, 8]))
    notes = report.notes["a/queue_gpus"]
    assert "treated 1 NaN and 1 infinite y values as missing" in notes
    assert "treated 1 negative y values as missing" in notes
    assert any(n.startswith("filled 3 missing steps in 1 gaps") for n in notes)


def test_negative_values_are_kept_where_the_signal_may_be_negative() -> None:
    df = pd.concat(
        [series("p/queue_gpus", [0, 10, 20], [1, -1, 3]), series("p/delta", [0, 10], [1, -1])]
    )
    out, report = validate_series(df, nonnegative={"queue_gpus"})
    assert out.loc[out["unique_id"] == "p/delta", "y"].tolist() == [1.0, -1.0]
    assert out.loc[out["unique_id"] == "p/queue_gpus", "y"].tolist() == [1.0, 2.0, 3.0]
    assert report.notes["p/delta"] == ()
    out, _ = validate_series(df, nonnegative=False)
    assert out.loc[out["unique_id"] == "p/queue_gpus", "y"].tolist() == [1.0, -1.0, 3.0]


def test_missing_steps_are_inserted_and_filled_within_the_bound() -> None:
    df = series("a", [0, 10, 40, 50], [0, 1, 4, 5])
    out, report = validate_series(df, max_gap_steps=2)
    pd.testing.assert_frame_equal(out, expected("a", 0, [0, 1, 2, 3, 4, 5]))
    assert report.notes["a"] == (
        "inserted 2 missing steps",
        "filled 2 missing steps in 1 gaps of at most 2 steps by linear interpolation",
    )


def test_long_gap_keeps_the_segment_after_it_with_a_note_naming_the_gap() -> None:
    # steps 0..2, then 3 missing (30, 40, 50), then 60..80; bound 2 -> keep 60..80.
    df = series("a", [0, 10, 20, 60, 70, 80], [1, 2, 3, 6, 7, 8])
    out, report = validate_series(df, max_gap_steps=2)
    pd.testing.assert_frame_equal(out, expected("a", 60, [6, 7, 8]))
    note = report.notes["a"][-1]
    assert "3 missing steps from 2024-05-01T00:30:00+00:00 to 2024-05-01T00:50:00+00:00" in note
    assert "max_gap_steps=2" in note
    assert "dropped the 6 steps before it" in note


def test_short_gap_before_the_long_one_is_cut_and_later_short_gap_filled() -> None:
    ys = [1, np.nan, 3, np.nan, np.nan, np.nan, 7, np.nan, 9]
    df = series("a", [10 * i for i in range(9)], ys)
    out, _ = validate_series(df, max_gap_steps=2)
    pd.testing.assert_frame_equal(out, expected("a", 60, [7, 8, 9]))


def test_too_short_after_cleaning_raises_insufficient_history_naming_need() -> None:
    df = series("a", [0, 10, 20, 90, 100], [1, 2, 3, 4, 5])
    with pytest.raises(InsufficientHistoryError) as err:
        validate_series(df, max_gap_steps=2, min_length=3)
    message = str(err.value)
    assert "'a'" in message
    assert "has 2 observations" in message
    assert "at least 3" in message
    assert "raise max_gap_steps" in message


def test_single_row_and_all_missing_series_are_insufficient() -> None:
    df = pd.concat([series("one", [0], [1.0]), series("none", [0, 10], [np.nan, -1])])
    with pytest.raises(InsufficientHistoryError) as err:
        validate_series(df)
    assert "'one'" in str(err.value)
    assert "'none'" in str(err.value)
    assert "no usable y values" in str(err.value)


def test_leading_and_trailing_missing_steps_are_trimmed() -> None:
    df = series("a", [0, 10, 20, 30, 40], [np.nan, 1, 2, 3, np.nan])
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 10, [1, 2, 3]))
    assert "trimmed 1 missing steps at the start" in report.notes["a"]
    assert "trimmed 1 missing steps at the end" in report.notes["a"]


def test_off_grid_timestamps_snap_to_the_inferred_step_and_collisions_average() -> None:
    # Mostly 10-min steps at :00; 41 snaps to 40, 68 and 71 both land on 70 (mean).
    df = series("a", [0, 10, 20, 30, 41, 50, 60, 68, 71, 80], [0, 1, 2, 3, 4, 5, 6, 6, 8, 8])
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 0, [0, 1, 2, 3, 4, 5, 6, 7, 8]))
    assert "snapped 3 timestamps to the 10min grid" in report.notes["a"]
    assert "averaged 1 samples into occupied steps" in report.notes["a"]


def test_regular_series_keeps_its_own_phase() -> None:
    df = series("a", [3, 13, 23], [1, 2, 3])
    out, report = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 3, [1, 2, 3]))
    assert not report


def test_given_freq_regularises_to_that_step() -> None:
    # Half-way points round up: :05 joins :10, :15 joins :20 (then averaged).
    df = series("a", [0, 5, 10, 15, 20], [1, 3, 2, 4, 3])
    out, report = validate_series(df, freq="10min")
    pd.testing.assert_frame_equal(out, expected("a", 0, [1, 2.5, 3.5]))
    assert "averaged 2 samples into occupied steps" in report.notes["a"]
    assert report.steps["a"] == TEN


def test_series_may_have_different_steps() -> None:
    df = pd.concat([series("fast", [0, 5, 10], [1, 2, 3]), series("slow", [0, 60], [1, 2])])
    out, report = validate_series(df)
    assert report.steps == {"fast": pd.Timedelta("5min"), "slow": pd.Timedelta("1h")}
    assert len(out) == 5


def test_absurd_step_is_rejected_instead_of_exploding_memory() -> None:
    df = series("a", [0, 0.001, 0.002, 60 * 24 * 365], [1, 2, 3, 4])
    with pytest.raises(DataValidationError, match="Pass freq="):
        validate_series(df)


def test_arguments_are_checked() -> None:
    df = series("a", [0, 10], [1, 2])
    with pytest.raises(ValueError, match="fixed duration"):
        validate_series(df, freq="MS")
    with pytest.raises(ValueError, match="max_gap_steps"):
        validate_series(df, max_gap_steps=-1)
    with pytest.raises(ValueError, match="on_error"):
        validate_series(df, on_error="ignore")  # type: ignore[arg-type]


def test_non_unique_input_index_is_fine() -> None:
    df = series("a", [0, 10, 20], [1, 2, 3])
    df.index = [0, 0, 0]
    out, _ = validate_series(df)
    pd.testing.assert_frame_equal(out, expected("a", 0, [1, 2, 3]))


def test_warn_emits_one_warning_naming_every_series_and_change() -> None:
    df = pd.concat(
        [
            series("a", [0, 10, 10], [1, 2, 3]),
            series("b", [0, 10], [1, -1]),
            series("c", [0, 10], [1, 2]),
        ]
    )
    _, report = validate_series(df, on_error="drop")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report.warn()
    assert len(caught) == 1
    assert caught[0].category is CleaningWarning
    text = str(caught[0].message)
    assert "'a': dropped 1 rows with a repeated ds" in text
    assert "'b' DROPPED" in text
    assert "'c'" not in text  # clean series are not listed
    assert caught[0].filename == __file__  # points at the caller


def test_empty_report_is_false_and_does_not_warn() -> None:
    report = CleaningReport()
    assert not report
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report.warn()


def test_readable_lines_group_series_that_got_the_same_change() -> None:
    gap = [0, 10, 40, 50]
    df = pd.concat(
        [
            series("p/x", gap, [1, 2, 3, 4]),
            series("p/y", gap, [5, 6, 7, 8]),
            series("q/z", [0, 10, 10], [1, 2, 3]),
            series("q/bad", [0, 10], [1, -1]),
            series("r/clean", [0, 10], [1, 2]),
        ]
    )
    _, report = validate_series(df, on_error="drop")
    lines = report.readable_lines()
    assert lines[0] == "3 of 4 series cleaned, 1 left out:"
    assert sum(line.startswith("  p/{x, y}: ") for line in lines) == 1
    assert any(line.startswith("  q/z: dropped 1 rows with a repeated ds") for line in lines)
    assert any(line.startswith("  q/bad left out: ") for line in lines)
    assert not any("r/clean" in line for line in lines)
    assert not any("days" in line for line in lines)


def test_readable_lines_of_a_clean_frame_are_empty() -> None:
    _, report = validate_series(series("a/x", [0, 10, 20], [1, 2, 3]))
    assert report.readable_lines() == []
