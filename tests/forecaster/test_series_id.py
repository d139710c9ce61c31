"""SeriesId: ``<pool>/<signal>`` parsed once, with a clear error, and formatted back."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError
from forecaster.peak.fleet import fleet_frame
from forecaster.peak.frames import collect_inputs
from forecaster.types import SeriesId


def test_parse_and_format_round_trip() -> None:
    sid = SeriesId.parse("a100-80g/queue_gpus")
    assert sid == SeriesId("a100-80g", "queue_gpus")
    pool, signal = sid
    assert (pool, signal) == ("a100-80g", "queue_gpus")
    assert str(sid) == "a100-80g/queue_gpus"


def test_the_pool_is_everything_before_the_last_slash() -> None:
    assert SeriesId.parse("alibaba/lora/demand_gpus") == SeriesId("alibaba/lora", "demand_gpus")


@pytest.mark.parametrize("text", ["queue_gpus", "/queue_gpus", "a100/", ""])
def test_parse_rejects_what_is_not_pool_slash_signal(text: str) -> None:
    with pytest.raises(
        DataValidationError, match=re.escape("is not '<pool>/<signal>', e.g. 'a100-train/")
    ):
        SeriesId.parse(text)


def test_of_takes_an_id_without_a_slash_as_a_pool() -> None:
    assert SeriesId.of("series-7") == SeriesId("series-7", "")
    assert SeriesId.of("a/q") == SeriesId.parse("a/q")


def test_split_splits_a_column_as_of_does() -> None:
    ids = pd.Series(["a/q", "b", "c/d/e"], index=[3, 5, 7])
    pools, signals = SeriesId.split(ids)
    assert pools.tolist() == ["a", "b", "c/d"]
    assert signals.tolist() == ["q", "", "e"]
    assert pools.index.tolist() == [3, 5, 7]
    assert [len(part) for part in SeriesId.split(ids.iloc[:0])] == [0, 0]


def test_the_peak_model_splits_ids_by_the_same_rule() -> None:
    """A bare id is a pool with no signal: never the peak model's target, never clipped."""
    ds = pd.date_range("2024-05-01", periods=4, freq="10min", tz="UTC")
    frame = pd.DataFrame(
        {"unique_id": ["demand_gpus"] * 4 + ["p/demand_gpus"] * 4, "ds": [*ds, *ds], "y": -1.0}
    )
    served = fleet_frame(frame)
    assert served.loc[served["unique_id"] == "demand_gpus", "y"].eq(-1.0).all()
    assert served.loc[served["unique_id"] == "p/demand_gpus", "y"].eq(0.0).all()
    with pytest.raises(DataValidationError, match="no target series"):
        collect_inputs(frame.iloc[:4], ("demand_gpus",), ())
