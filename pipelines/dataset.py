"""Series for a training or forecast: read a file (or the sample), derive demand, clean.

This is the edge where frames are validated, so everything after it can trust the
series contract.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from forecaster.contract import CleaningReport, validate_series
from forecaster.exceptions import DataValidationError, SourceError
from forecaster.loaders import derive_demand, load_frame
from forecaster.types import DS, UID
from pipelines.config.settings import Settings

logger = logging.getLogger(__name__)

SAMPLE_FILE = "metrics.csv.gz"
QUEUE_SIGNAL = "queue_gpus"


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
        settings: where the sample lives.
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
    raw = derive_demand(load_frame(source), pending=QUEUE_SIGNAL)
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
    lines = report.readable_lines()
    if lines:
        # Once, as lines a person reads (not a warning with this module's path).
        logger.warning("data in %s: %s", source, "\n".join(lines))
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
