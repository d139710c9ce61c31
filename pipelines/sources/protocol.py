"""The metric-source plug-in contract and the frame every source returns (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol

import numpy as np
import pandas as pd

from forecaster.types import DS, UID, Y

TimeLike = datetime | pd.Timestamp | str
"""A point in time: aware datetimes are converted to UTC, naive ones are read as UTC."""


class MetricSource(Protocol):
    """Where samples come from: Prometheus, a file, or anything with this ``fetch``."""

    def fetch(
        self,
        queries: Mapping[str, str],
        start: TimeLike,
        end: TimeLike,
        step: timedelta,
    ) -> pd.DataFrame:
        """Return the samples of every query within ``[start, end]``.

        Args:
            queries: series id (``<pool>/<signal>``) -> the source's query for it.
            start: the first instant of the window (inclusive).
            end: the last instant of the window (inclusive).
            step: the resolution wanted; sources that store samples at a fixed
                resolution (files) may return it unchanged.

        Returns:
            A long frame ``unique_id`` (str), ``ds`` (``datetime64[ns, UTC]``), ``y``
            (float64, NaN where the source had no number), sorted by ``unique_id`` and
            ``ds`` with one row per pair. A query that matches nothing adds no rows.

        Raises:
            SourceError: the source is unreachable or rejects a query.
        """
        ...


def to_utc(value: TimeLike) -> pd.Timestamp:
    """Return ``value`` as a UTC timestamp (naive values are read as UTC)."""
    stamp = pd.Timestamp(value)
    if pd.isna(stamp):
        raise ValueError(f"{value!r} is not a point in time")
    if stamp.tzinfo is None:
        return stamp.tz_localize("UTC")
    return stamp.tz_convert("UTC")


def check_window(
    start: TimeLike, end: TimeLike, step: timedelta
) -> tuple[pd.Timestamp, pd.Timestamp]:
    """Validate a fetch window and return ``(start, end)`` in UTC.

    Raises:
        ValueError: ``step`` is not positive or ``end`` precedes ``start``.
    """
    if pd.Timedelta(step) <= pd.Timedelta(0):
        raise ValueError(f"step must be positive, got {step}")
    first, last = to_utc(start), to_utc(end)
    if last < first:
        raise ValueError(f"end {last} is before start {first}; pass start <= end")
    return first, last


def empty_frame() -> pd.DataFrame:
    """A frame with the source columns and dtypes and no rows."""
    return pd.DataFrame(
        {
            UID: pd.Series([], dtype=object),
            DS: pd.Series([], dtype="datetime64[ns, UTC]"),
            Y: pd.Series([], dtype=np.float64),
        }
    )


def tidy(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate per-series frames into the source contract's shape.

    ``ds`` becomes ``datetime64[ns, UTC]`` and ``y`` float64; rows are sorted by
    ``unique_id`` and ``ds`` and a repeated ``(unique_id, ds)`` keeps its last row.
    """
    frames = [frame for frame in frames if not frame.empty]
    if not frames:
        return empty_frame()
    out = pd.concat(frames, ignore_index=True)[[UID, DS, Y]]
    out[UID] = out[UID].astype(str).astype(object)
    out[DS] = pd.to_datetime(out[DS], utc=True).dt.as_unit("ns")
    out[Y] = out[Y].astype(np.float64)
    out = out.drop_duplicates([UID, DS], keep="last")
    return out.sort_values([UID, DS], kind="stable").reset_index(drop=True)
