"""Series for a training or forecast: read a file (or the sample), derive demand, clean.

Details: docs/jobs.md, "Notes from the code", `pipelines/dataset.py`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from forecaster.contract import CleaningReport, validate_series
from forecaster.exceptions import DataValidationError, SourceError
from forecaster.loaders import DEMAND, derive_demand, load_frame
from forecaster.types import DS, UID, SeriesId
from pipelines.config.settings import Settings
from pipelines.config.signals import QUEUE_GPUS
from pipelines.data_warnings import first_time, warning_key

if TYPE_CHECKING:
    from pipelines.config.pools import PoolsConfig
    from pipelines.store.store import Store

logger = logging.getLogger(__name__)

SAMPLE_FILE = "metrics.csv.gz"


@dataclass(frozen=True)
class Dataset:
    """A validated long frame and what cleaning did to it."""

    frame: pd.DataFrame
    report: CleaningReport
    source: Path

    @property
    def step(self) -> pd.Timedelta:
        """The step shared by every series (checked at load)."""
        return self.report.steps[str(self.frame[UID].iloc[0])]


def default_data_path(settings: Settings) -> Path:
    """The committed sample that ``make run`` trains on."""
    return settings.sample_dir / SAMPLE_FILE


def load_dataset(
    settings: Settings,
    path: Path | None = None,
    *,
    series: list[str] | None = None,
) -> Dataset:
    """Load, derive ``<pool>/demand_gpus`` and validate the series of a file.

    Args:
        path: a CSV or Parquet file (long ``unique_id, ds, y`` or wide); default the
            committed sample.
        series: keep only these series ids (after demand is derived).

    Raises:
        SourceError: the file cannot be read.
        DataValidationError: the series break the contract, or their steps differ.
    """
    source = path or default_data_path(settings)
    if not source.exists():
        raise SourceError(
            f"data file {source} does not exist; pass --data with a CSV or Parquet file "
            "(long unique_id, ds, y or wide with a time column)"
        )
    raw = derive_demand(load_frame(source), pending=QUEUE_GPUS)
    raw = derive_demand(raw)
    if series:
        unknown = sorted(set(series) - set(raw[UID].astype(str)))
        if unknown:
            known = ", ".join(sorted(raw[UID].astype(str).unique())[:20])
            raise DataValidationError(
                f"series {unknown} are not in {source}; known series include: {known}"
            )
        raw = raw[raw[UID].isin(series)]
    frame, report = validate_series(raw, max_gap_steps=settings.max_gap_steps, on_error="drop")
    _report(settings, source, report.readable_lines())
    steps = set(report.steps.values())
    if len(steps) > 1:
        by_step = {str(s): sorted(u for u, v in report.steps.items() if v == s) for s in steps}
        raise DataValidationError(
            f"series in {source} have different steps {by_step}; train each step separately "
            "(select series with --series)"
        )
    return Dataset(
        frame=frame.sort_values([UID, DS], ignore_index=True), report=report, source=source
    )


def _report(settings: Settings, source: Path, lines: list[str]) -> None:
    """Say what cleaning changed once per run, as lines a person reads."""
    if not lines:
        return
    text = "\n".join(lines)
    if first_time(settings.data_dir, warning_key(source, text)):
        logger.warning("data in %s: %s", source, text)
    else:
        logger.debug("data in %s: already reported in this run", source)


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
