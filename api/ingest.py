"""Pushed samples into the store, with derived demand (docs/api.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from api.sample_checks import TimeWindow, check_samples
from forecaster.exceptions import DataValidationError
from pipelines.config.pools import PoolsConfig
from pipelines.store.samples import SampleRow, sample_rows
from pipelines.store.store import Store

MIN_YEAR: Final = 1678
"""The first whole year a nanosecond timestamp (pandas', every reader's) holds."""
MAX_YEAR: Final = 2261
"""The last whole year a nanosecond timestamp holds."""
_STORABLE: Final = (
    datetime(1677, 9, 21, 0, 12, 44, tzinfo=UTC),
    datetime(2262, 4, 11, 23, 47, 16, tzinfo=UTC),
)
"""The exact span of a nanosecond timestamp, to the second inside it."""


@dataclass(frozen=True)
class Ingested:
    """What a push stored: rows written (derived demand included) and the pools touched."""

    rows: int
    pools: tuple[str, ...]


def pushed_rows(items: Iterable[tuple[str, datetime, float]]) -> list[SampleRow]:
    """Rows to store from pushed ``(series_id, time, value)`` items (see :func:`sample_rows`).

    Raises:
        DataValidationError: a time is outside the years a timestamp can hold (the
            message names the sample), has no timezone, or a value is not finite.
    """
    listed = list(items)
    for index, (_, ts, _) in enumerate(listed):
        if ts.tzinfo is not None and not _STORABLE[0] <= ts <= _STORABLE[1]:
            # Valid RFC 3339 (year 1 or 9999) but outside what every reader's
            # nanosecond timestamps hold; the message names the sample and the rule.
            raise DataValidationError(
                f"samples[{index}].ts is outside the years {MIN_YEAR}-{MAX_YEAR}, which the "
                "store cannot hold; send the observation time in UTC"
            )
    return sample_rows(listed)


def ingest(
    store: Store, pools: PoolsConfig, rows: Sequence[SampleRow], window: TimeWindow
) -> Ingested:
    """Check and store pushed samples, deriving demand where its parts moved.

    Args:
        pools: the configured pools (and the signals each declares).
        rows: the pushed samples (see :func:`pushed_rows`).
        window: the times a sample may carry (see :mod:`api.sample_checks`).

    Raises:
        DataValidationError: the samples are invalid (see
            :func:`~api.sample_checks.check_samples`); nothing is stored.
        StoreError: the store failed.
    """
    if not rows:
        return Ingested(0, ())
    touched = check_samples(rows, pools, window)
    written = store.samples.write_with_demand(rows)
    return Ingested(written, tuple(touched))
