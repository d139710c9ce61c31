"""Forecast runs: a run's per-horizon and peak forecasts, stored and seen as one unit.

Details: docs/jobs.md, "Notes from the code", `pipelines/store/forecast_runs.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

import pandas as pd
from sqlalchemy import func, select

from pipelines.store.engine import Database
from pipelines.store.forecasts import forecast_rows
from pipelines.store.peak_forecasts import peak_rows
from pipelines.store.schema import ForecastRow, ForecastRunRow, PeakForecastRow, as_utc
from pipelines.store.upsert import upsert

_FORECAST_UPDATE: Final = ("ds", "model_version", "model", "mean", "quantiles")
_PEAK_UPDATE: Final = (
    "origin",
    "ds",
    "model_version",
    "last",
    "quantiles",
    "raw",
    "scale",
    "return_level",
)


@dataclass(frozen=True)
class ForecastRun:
    """The record of one complete forecast run.

    Attributes:
        observed_until: the newest observation it was made from; None for runs
            recorded before it was kept.
    """

    model_version: str
    generated_at: datetime
    observed_until: datetime | None


@dataclass(frozen=True)
class StoredRun:
    """What one committed forecast run stored."""

    rows: int
    peak_rows: int


class ForecastRunRepository:
    """Forecast runs keyed by ``(model_version, generated_at)``."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def commit(
        self,
        forecasts: pd.DataFrame | None,
        peaks: pd.DataFrame | None,
        *,
        model_version: str,
        generated_at: datetime,
        step: timedelta,
        observed_until: datetime | None = None,
    ) -> StoredRun:
        """Store a run's forecasts and peak forecasts and record the run, atomically.

        Args:
            forecasts: the per-horizon frame (see :func:`forecast_rows`); None
                when no series was forecast.
            peaks: the peak frame (see :func:`peak_rows`); None when the
                version has no peak model or its forecast failed.
            model_version: the model version that made both.
            generated_at: the run's generation time (tz-aware); a retry with the same
                time overwrites the run.
            observed_until: the newest observation the run was made from.

        Raises:
            DataValidationError: a frame is malformed; nothing was stored.
            StoreError: the database failed; nothing of the run was stored.
        """
        at = as_utc(generated_at)
        rows = [] if forecasts is None else forecast_rows(forecasts, model_version, at)
        peak = [] if peaks is None else peak_rows(peaks, model_version, at, step)
        _commit_run(
            self._db,
            rows,
            peak,
            model_version=model_version,
            generated_at=at,
            observed_until=None if observed_until is None else as_utc(observed_until),
        )
        return StoredRun(len(rows), len(peak))

    def newest(self, model_version: str, *, until: datetime | None = None) -> datetime | None:
        """Return when the newest complete run of ``model_version`` was generated.

        ``until``: only runs generated at or before it.
        """
        statement = select(func.max(ForecastRunRow.generated_at)).where(
            ForecastRunRow.model_version == model_version
        )
        if until is not None:
            statement = statement.where(ForecastRunRow.generated_at <= as_utc(until))
        with self._db.transaction("read the newest forecast run") as session:
            newest = session.execute(statement).scalar_one_or_none()
        return None if newest is None else as_utc(newest)

    def latest(self, model_version: str) -> ForecastRun | None:
        """Return the record of the newest complete run of ``model_version``, if any."""
        statement = (
            select(ForecastRunRow)
            .where(ForecastRunRow.model_version == model_version)
            .order_by(ForecastRunRow.generated_at.desc())
            .limit(1)
        )
        with self._db.transaction("read the newest forecast run") as session:
            row = session.scalars(statement).first()
        if row is None:
            return None
        return ForecastRun(row.model_version, as_utc(row.generated_at), row.observed_until)


def _commit_run(
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
                update=_FORECAST_UPDATE,
            )
        if peaks:
            upsert(
                session,
                dialect,
                PeakForecastRow,
                peaks,
                keys=("series_id", "generated_at", "lead"),
                update=_PEAK_UPDATE,
            )
        upsert(
            session,
            dialect,
            ForecastRunRow,
            [record],
            keys=("model_version", "generated_at"),
            update=("series", "rows", "peak_rows", "observed_until"),
        )
