"""Samples into the store: pushed metrics, derived demand, and the sample-data seed.

Pushed samples are checked once here (see :mod:`api.sample_checks`); whenever
allocated or queued GPUs arrive, the store derives the pool's ``demand_gpus`` for
exactly those timestamps so the forecast history grows with the push. Seeding fills an
empty store from the committed sample so the embedded default has something to decide on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from api.sample_checks import TimeWindow, check_samples
from forecaster.loaders import DEMAND
from forecaster.types import DS, UID, SeriesId, Y
from pipelines.config.pools import PoolsConfig
from pipelines.config.settings import Settings
from pipelines.dataset import load_dataset
from pipelines.store import Store

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Ingested:
    """What a push stored: rows written (derived demand included) and the pools touched."""

    rows: int
    pools: tuple[str, ...]


def samples_frame(items: Iterable[tuple[str, datetime, float]]) -> pd.DataFrame:
    """Return a long frame ``unique_id, ds, y`` (UTC) of ``(series_id, ts, value)`` items."""
    rows = list(items)
    return pd.DataFrame(
        {
            UID: pd.Series([r[0] for r in rows], dtype=object),
            DS: pd.to_datetime([r[1] for r in rows], utc=True),
            Y: pd.Series([float(r[2]) for r in rows], dtype="float64"),
        }
    )


def ingest(store: Store, pools: PoolsConfig, frame: pd.DataFrame, window: TimeWindow) -> Ingested:
    """Check and store pushed samples, deriving demand where its parts moved.

    Args:
        store: where the samples go.
        pools: the configured pools (and the signals each declares).
        frame: the pushed samples, long format.
        window: the times a sample may carry (see :mod:`api.sample_checks`).

    Raises:
        DataValidationError: the samples are invalid (see
            :func:`~api.sample_checks.check_samples`); nothing is stored.
        StoreError: the store failed.
    """
    if frame.empty:
        return Ingested(0, ())
    touched = check_samples(frame, pools, window)
    rows = store.samples.upsert_with_demand(frame)
    return Ingested(rows, tuple(touched))


def seed_from_sample(settings: Settings, store: Store, pools: PoolsConfig) -> int:
    """Fill pools without any demand samples from the committed sample data set.

    Returns:
        The number of rows written (0 when every pool already has data or the sample
        holds none of the empty pools).

    Raises:
        SourceError: the sample file cannot be read.
        DataValidationError: the sample breaks the data contract.
    """
    empty = _pools_without_demand(store, pools.names)
    if not empty:
        return 0
    frame = load_dataset(settings).frame
    owner, _ = SeriesId.split(frame[UID])
    chosen = frame[owner.isin(empty)]
    if chosen.empty:
        logger.info("the sample data set has no series of pools %s", empty)
        return 0
    rows = store.samples.upsert(chosen)
    logger.info("seeded %d samples of pools %s from the sample data set", rows, empty)
    return rows


def _pools_without_demand(store: Store, names: Sequence[str]) -> list[str]:
    return [
        name for name in names if store.samples.last_timestamp(str(SeriesId(name, DEMAND))) is None
    ]
