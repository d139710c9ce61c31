"""Stored peak forecasts: quantiles of the demand peak over the lead time, per series.

Details: docs/jobs.md, "Notes from the code", `pipelines/store/peak_forecasts.py`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import numpy as np
import pandas as pd
from sqlalchemy import Select, func, select

from forecaster.exceptions import DataValidationError
from forecaster.peak.serving import RAW_PREFIX, RETURN_LEVEL
from forecaster.peak.types import SCALE
from forecaster.types import DS, UID, quantile_column, quantile_level, quantile_levels
from pipelines.store.engine import Database
from pipelines.store.forecasts import GENERATED_AT, MODEL_VERSION
from pipelines.store.schema import PeakForecastRow, as_utc

ORIGIN: Final = "origin"
LEAD: Final = "lead"
LAST: Final = "last"
RAW: Final = RAW_PREFIX
"""Prefix of the columns of the model's raw quantiles (``raw_q0.9``)."""
RETURN: Final = RETURN_LEVEL
"""Column of the level the served quantiles were held at after an idle spell."""


class PeakForecastRepository:
    """Peak forecasts keyed by ``(series_id, generated_at, lead)``.

    The forecast job writes peak rows together with the per-horizon rows of the same
    run (:meth:`ForecastRunRepository.commit
    <pipelines.store.forecast_runs.ForecastRunRepository.commit>`); the same generation
    time again overwrites them, so a retried forecast job stores each lead once.
    """

    def __init__(self, database: Database) -> None:
        self._db = database

    def latest(self, series_id: str, model_version: str | None = None) -> pd.DataFrame:
        """Return the newest peak forecast of a series (of ``model_version`` if given).

        Empty when there is none.
        """
        newest = select(func.max(PeakForecastRow.generated_at)).where(
            PeakForecastRow.series_id == series_id
        )
        if model_version is not None:
            newest = newest.where(PeakForecastRow.model_version == model_version)
        statement = select(PeakForecastRow).where(
            PeakForecastRow.series_id == series_id,
            PeakForecastRow.generated_at == newest.scalar_subquery(),
        )
        if model_version is not None:
            statement = statement.where(PeakForecastRow.model_version == model_version)
        return self._frame(statement.order_by(PeakForecastRow.lead), "read the latest peak")

    def at(self, series_id: str, model_version: str, generated_at: datetime) -> pd.DataFrame:
        """Return the peak forecast of a series made by one forecast run (empty if none).

        The run is ``(model_version, generated_at)``, as the per-horizon rows read with
        it name it: both come from the same run, whatever was stored since.
        """
        statement = select(PeakForecastRow).where(
            PeakForecastRow.series_id == series_id,
            PeakForecastRow.model_version == model_version,
            PeakForecastRow.generated_at == as_utc(generated_at),
        )
        return self._frame(statement.order_by(PeakForecastRow.lead), "read a run's peak")

    def read(
        self, series_ids: Sequence[str] | None = None, *, since: datetime | None = None
    ) -> pd.DataFrame:
        """Return the stored peak forecasts of ``series_ids`` (all when None).

        ``since``: only those generated at or after it.
        """
        statement = select(PeakForecastRow).order_by(
            PeakForecastRow.series_id, PeakForecastRow.generated_at, PeakForecastRow.lead
        )
        if series_ids is not None:
            statement = statement.where(PeakForecastRow.series_id.in_(list(series_ids)))
        if since is not None:
            statement = statement.where(PeakForecastRow.generated_at >= as_utc(since))
        return self._frame(statement, "read peak forecasts")

    def _frame(self, statement: Select[PeakForecastRow], action: str) -> pd.DataFrame:
        with self._db.transaction(action) as session:
            rows = list(session.scalars(statement))
        return _to_frame(rows)


def peak_rows(
    frame: pd.DataFrame, model_version: str, generated_at: datetime, step: timedelta
) -> list[dict[str, Any]]:
    """The store rows of a peak frame as ``PeakQuantileForecaster.predict_peak`` returns it.

    ``frame`` is ``unique_id, ds, lead, last, q<level>...`` with ``ds`` the origin, and
    optionally ``raw_q<level>...``, ``scale`` and ``return_level``; ``step`` is the series
    step (``ds`` of a row is ``origin + lead * step``).

    Raises:
        DataValidationError: a column is missing, or ``last`` or a quantile is not finite.
        ValueError: ``step`` is not positive.
    """
    missing = [column for column in (UID, DS, LEAD, LAST) if column not in frame.columns]
    if missing:
        raise DataValidationError(
            f"cannot store the peak forecast: columns {missing} are missing; pass the frame "
            "PeakQuantileForecaster.predict_peak returns (unique_id, ds, lead, last, q...)"
        )
    if step <= timedelta(0):
        raise ValueError(f"step must be positive, got {step}")
    columns = [quantile_column(q) for q in quantile_levels(frame.columns)]
    raw = [c for c in columns if f"{RAW}{c}" in frame.columns]
    values = frame[[LAST, *columns]].to_numpy(dtype=np.float64)
    raw_values = frame[[f"{RAW}{c}" for c in raw]].to_numpy(dtype=np.float64)
    scales, returns = (
        frame[column].to_numpy(dtype=np.float64)
        if column in frame.columns
        else np.full(len(frame), np.nan)
        for column in (SCALE, RETURN_LEVEL)
    )
    if not np.isfinite(values).all():
        bad = sorted(frame.loc[~np.isfinite(values).all(axis=1), UID].astype(str).unique())
        raise DataValidationError(
            f"cannot store the peak forecast: series {bad} have non-finite values"
        )
    rows = []
    for i, (uid, origin, lead) in enumerate(zip(frame[UID], frame[DS], frame[LEAD], strict=True)):
        start = pd.Timestamp(origin).to_pydatetime()
        rows.append(
            {
                "series_id": str(uid),
                "generated_at": generated_at,
                "lead": int(lead),
                "origin": start,
                "ds": start + int(lead) * step,
                "model_version": model_version,
                "last": float(values[i, 0]),
                "quantiles": {c: float(values[i, k + 1]) for k, c in enumerate(columns)},
                "raw": {c: float(raw_values[i, k]) for k, c in enumerate(raw)} or None,
                "scale": float(scales[i]) if math.isfinite(scales[i]) else None,
                "return_level": float(returns[i]) if math.isfinite(returns[i]) else None,
            }
        )
    return rows


def _to_frame(rows: Sequence[PeakForecastRow]) -> pd.DataFrame:
    levels = sorted({key for row in rows for key in row.quantiles}, key=quantile_level)
    data: dict[str, Any] = {
        UID: pd.Series([row.series_id for row in rows], dtype=object),
        ORIGIN: pd.to_datetime([row.origin for row in rows], utc=True).as_unit("ns"),
        DS: pd.to_datetime([row.ds for row in rows], utc=True).as_unit("ns"),
        LEAD: np.array([row.lead for row in rows], dtype=np.int64),
        LAST: np.array([row.last for row in rows], dtype=np.float64),
    }
    for column in levels:
        data[column] = np.array(
            [row.quantiles.get(column, math.nan) for row in rows], dtype=np.float64
        )
    for column in levels:
        data[f"{RAW}{column}"] = np.array(
            [(row.raw or {}).get(column, math.nan) for row in rows], dtype=np.float64
        )
    data[SCALE] = np.array(
        [math.nan if row.scale is None else row.scale for row in rows], dtype=np.float64
    )
    data[RETURN_LEVEL] = np.array(
        [math.nan if row.return_level is None else row.return_level for row in rows],
        dtype=np.float64,
    )
    data[MODEL_VERSION] = pd.Series([row.model_version for row in rows], dtype=object)
    data[GENERATED_AT] = pd.to_datetime([row.generated_at for row in rows], utc=True).as_unit("ns")
    return pd.DataFrame(data)
