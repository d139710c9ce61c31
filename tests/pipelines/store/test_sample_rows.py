"""Rows of a push, made without a frame: UTC times, last value kept, bad input refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pandas as pd
import pytest

from api.ingest import pushed_rows
from forecaster.exceptions import DataValidationError
from pipelines.store.samples import _sample_rows, sample_rows

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def test_rows_are_utc_and_a_repeated_sample_keeps_its_last_value() -> None:
    plus_two = timezone(timedelta(hours=2))
    rows = sample_rows(
        [
            ("a/nodes", T0, 1.0),
            ("a/queue_gpus", T0, 3),
            ("a/nodes", T0.astimezone(plus_two), 2.0),  # the same instant, written again
        ]
    )
    assert rows == [
        {"series_id": "a/queue_gpus", "ts": T0, "value": 3.0},
        {"series_id": "a/nodes", "ts": T0, "value": 2.0},
    ]
    assert all(row["ts"].tzinfo is UTC for row in rows)
    assert isinstance(rows[0]["value"], float)


def test_rows_match_what_a_frame_of_the_same_samples_writes() -> None:
    items = [("a/nodes", T0 + timedelta(minutes=5 * k), float(k)) for k in range(4)]
    frame = pd.DataFrame(
        {
            "unique_id": [i[0] for i in items],
            "ds": pd.to_datetime([i[1] for i in items], utc=True),
            "y": [i[2] for i in items],
        }
    )
    assert sample_rows(items) == _sample_rows(frame)


@pytest.mark.parametrize(
    ("item", "words"),
    [
        (("a/nodes", datetime(2025, 3, 1), 1.0), "without a timezone"),
        (("a/nodes", T0, float("nan")), "not finite"),
    ],
)
def test_a_bad_sample_is_refused_naming_its_series(
    item: tuple[str, datetime, float], words: str
) -> None:
    with pytest.raises(DataValidationError, match=words) as raised:
        sample_rows([item])
    assert "a/nodes" in str(raised.value)


def test_a_push_outside_a_timestamps_span_names_the_sample() -> None:
    far = datetime(9999, 1, 1, tzinfo=UTC)
    with pytest.raises(DataValidationError, match=r"samples\[1\]\.ts is outside the years"):
        pushed_rows([("a/nodes", T0, 1.0), ("a/nodes", far, 1.0)])
    # Early 2262 is still a timestamp: the time checks (not this one) refuse it.
    assert pushed_rows([("a/nodes", datetime(2262, 1, 1, tzinfo=UTC), 1.0)])
