"""Writing a forecast run: its rows and its run record in one transaction.

Both repositories of forecast rows (per horizon and of the lead-time peak) and the
run repository write through :func:`commit_run`, so whichever writes a run, the rows
and the record that makes them visible commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from pipelines.store.engine import Database
from pipelines.store.schema import ForecastRow, ForecastRunRow, PeakForecastRow
from pipelines.store.upsert import upsert

FORECAST_UPDATE: Final = ("ds", "model_version", "model", "mean", "quantiles")
PEAK_UPDATE: Final = (
    "origin",
    "ds",
    "model_version",
    "last",
    "quantiles",
    "raw",
    "scale",
    "return_level",
)


def commit_run(
    database: Database,
    forecasts: Sequence[Mapping[str, Any]],
    peaks: Sequence[Mapping[str, Any]],
    *,
    model_version: str,
    generated_at: datetime,
    observed_until: datetime | None = None,
) -> None:
    """Store a run's per-horizon and peak rows and record the run, in one transaction.

    ``observed_until``: the newest observation the run was made from, if known. A
    retry with the same ``generated_at`` overwrites the rows and the record. Nothing is
    written when both row lists are empty.

    Raises:
        StoreError: the database failed; nothing of the run was kept.
    """
    if not forecasts and not peaks:
        return
    record = {
        "model_version": model_version,
        "generated_at": generated_at,
        "series": len({str(row["series_id"]) for row in (*forecasts, *peaks)}),
        "rows": len(forecasts),
        "peak_rows": len(peaks),
        "observed_until": observed_until,
    }
    dialect = database.dialect
    with database.transaction("write a forecast run") as session:
        if forecasts:
            upsert(
                session,
                dialect,
                ForecastRow,
                forecasts,
                keys=("series_id", "generated_at", "step"),
                update=FORECAST_UPDATE,
            )
        if peaks:
            upsert(
                session,
                dialect,
                PeakForecastRow,
                peaks,
                keys=("series_id", "generated_at", "lead"),
                update=PEAK_UPDATE,
            )
        upsert(
            session,
            dialect,
            ForecastRunRow,
            [record],
            keys=("model_version", "generated_at"),
            update=("series", "rows", "peak_rows", "observed_until"),
        )
