"""Samples into the store: pushed metrics, derived demand, and the sample-data seed.

Pushed samples are checked once here (known pool, finite, counts non-negative);
whenever allocated or queued GPUs arrive, the pool's ``demand_gpus`` is derived for
those timestamps so the forecast history grows with the push. Seeding fills an empty
store from the committed sample so the embedded default has something to decide on.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from forecaster.config.pools import ALLOCATED_GPUS, NODES, QUEUE_GPUS, PoolsConfig
from forecaster.config.settings import Settings
from forecaster.exceptions import DataValidationError
from forecaster.loaders import DEMAND, derive_demand
from forecaster.types import DS, UID, Y
from pipelines.dataset import load_dataset
from pipelines.store import Store

logger = logging.getLogger(__name__)

COUNT_SIGNALS = frozenset({ALLOCATED_GPUS, QUEUE_GPUS, NODES, DEMAND})
"""Signals that count GPUs or nodes, so cannot be negative."""


@dataclass(frozen=True)
class Ingested:
    """What a push stored: rows written (derived demand included) and the pools touched."""

    rows: int
    pools: tuple[str, ...]


def split_series_id(series_id: str) -> tuple[str, str]:
    """Return ``(pool, signal)`` of ``<pool>/<signal>``.

    Raises:
        DataValidationError: the id has no ``/``.
    """
    pool, sep, signal = series_id.rpartition("/")
    if not sep or not pool or not signal:
        raise DataValidationError(
            f"series_id {series_id!r} is not '<pool>/<signal>', e.g. 'a100-train/queue_gpus'"
        )
    return pool, signal


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


def check_samples(frame: pd.DataFrame, pools: PoolsConfig) -> list[str]:
    """Check pushed samples and return the pools they belong to, sorted.

    Raises:
        DataValidationError: a series names an unknown pool, a value is not finite, or
            a count is negative; the message lists every offender and the fix.
    """
    known = set(pools.names)
    problems: list[str] = []
    touched: set[str] = set()
    unknown: set[str] = set()
    for sid, value in zip(frame[UID], frame[Y], strict=True):
        pool, signal = split_series_id(str(sid))
        if pool not in known:
            unknown.add(pool)
            continue
        touched.add(pool)
        if not math.isfinite(value):
            problems.append(f"{sid}: value {value} is not finite")
        elif signal in COUNT_SIGNALS and value < 0:
            problems.append(f"{sid}: {signal} counts GPUs or nodes, got negative {value}")
    if unknown:
        problems.insert(
            0, f"unknown pools {sorted(unknown)}; known pools: {', '.join(pools.names)}"
        )
    if problems:
        shown = problems[:10] + (
            [f"... and {len(problems) - 10} more"] if len(problems) > 10 else []
        )
        raise DataValidationError("rejected samples: " + "; ".join(shown))
    return sorted(touched)


def derive_pool_demand(store: Store, pool: str, start: datetime) -> int:
    """Store ``<pool>/demand_gpus`` = allocated + queued for timestamps from ``start``.

    Returns:
        The number of demand rows written.
    """
    parts = [f"{pool}/{ALLOCATED_GPUS}", f"{pool}/{QUEUE_GPUS}"]
    raw = store.samples.read(parts, start=start)
    derived = derive_demand(raw, pending=QUEUE_GPUS)
    demand = derived[derived[UID] == f"{pool}/{DEMAND}"]
    return store.samples.upsert(demand.dropna(subset=[Y])) if not demand.empty else 0


def ingest(store: Store, pools: PoolsConfig, frame: pd.DataFrame) -> Ingested:
    """Check, store and derive demand for pushed samples.

    Raises:
        DataValidationError: the samples are invalid (see :func:`check_samples`).
        StoreError: the store failed.
    """
    if frame.empty:
        return Ingested(0, ())
    touched = check_samples(frame, pools)
    rows = store.samples.upsert(frame)
    signals = frame[UID].astype(str).str.rpartition("/")[2]
    parts = frame[signals.isin([ALLOCATED_GPUS, QUEUE_GPUS])]
    for pool in touched:
        mine = parts[parts[UID].astype(str).str.startswith(f"{pool}/")]
        if not mine.empty:
            rows += derive_pool_demand(store, pool, mine[DS].min().to_pydatetime())
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
    owner = frame[UID].astype(str).str.rpartition("/")[0]
    chosen = frame[owner.isin(empty)]
    if chosen.empty:
        logger.info("the sample data set has no series of pools %s", empty)
        return 0
    rows = store.samples.upsert(chosen)
    logger.info("seeded %d samples of pools %s from the sample data set", rows, empty)
    return rows


def _pools_without_demand(store: Store, names: Sequence[str]) -> list[str]:
    return [name for name in names if store.samples.last_timestamp(f"{name}/{DEMAND}") is None]
