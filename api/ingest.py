"""Pushed samples into the store, with derived demand.

Pushed samples are checked once here (see :mod:`api.sample_checks`); whenever
allocated or queued GPUs arrive, the store derives the pool's ``demand_gpus`` for
exactly those timestamps so the forecast history grows with the push. Seeding an
empty store from the committed sample is :func:`pipelines.dataset.seed_from_sample`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from api.sample_checks import TimeWindow, check_samples
from forecaster.types import DS, UID, Y
from pipelines.config.pools import PoolsConfig
from pipelines.store.store import Store


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
