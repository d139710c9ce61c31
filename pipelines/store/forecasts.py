"""Stored forecasts: what was predicted, when, by which model version (docs/jobs.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final, TypeVarTuple

import numpy as np
import pandas as pd
from sqlalchemy import Select, func, select

from forecaster.exceptions import DataValidationError
from forecaster.types import (
    DS,
    MEAN,
    MODEL,
    STEP,
    UID,
    quantile_column,
    quantile_level,
    quantile_levels,
)
from pipelines.store.engine import Database
from pipelines.store.schema import ForecastRow, ForecastRunRow, as_utc

MODEL_VERSION: Final = "model_version"
GENERATED_AT: Final = "generated_at"


class ForecastRepository:
    """Forecast frames keyed by ``(series_id, generated_at, step)``.

    Rows are written with the run they belong to (:meth:`ForecastRunRepository.commit
    <pipelines.store.forecast_runs.ForecastRunRepository.commit>`); the same generation
    time again overwrites them, so a retried forecast job stores each step once.
    :meth:`latest` and :meth:`newest` read only rows of recorded runs, so they never see
    a run half written.
    """

    def __init__(self, database: Database) -> None:
        self._db = database

    def latest(
        self,
        series_id: str,
        model_version: str | None = None,
        *,
        until: datetime | None = None,
    ) -> pd.DataFrame:
        """Return the most recently generated forecast of a series (empty if none).

        Args:
            model_version: only forecasts this model version made; None: any.
            until: only forecasts generated at or before it (a reader on a replay
                clock skips runs another clock dated in its future).
        """
        newest = _of_runs(
            select(func.max(ForecastRow.generated_at)).where(ForecastRow.series_id == series_id)
        )
        if until is not None:
            newest = newest.where(ForecastRow.generated_at <= as_utc(until))
        statement = select(ForecastRow).where(ForecastRow.series_id == series_id)
        if model_version is not None:
            newest = newest.where(ForecastRow.model_version == model_version)
            statement = statement.where(ForecastRow.model_version == model_version)
        statement = statement.where(ForecastRow.generated_at == newest.scalar_subquery())
        return self._frame(statement.order_by(ForecastRow.step), "read the latest forecast")

    def newest(
        self,
        series_ids: Sequence[str],
        model_version: str | None = None,
        *,
        until: datetime | None = None,
    ) -> dict[str, datetime]:
        """Return when each series' newest forecast was generated (one query).

        Args:
            series_ids: the series to look at; those without a forecast are left out.
            model_version: only forecasts this model version made; None: any.
            until: only forecasts generated at or before it.
        """
        statement = _of_runs(
            select(ForecastRow.series_id, func.max(ForecastRow.generated_at))
            .where(ForecastRow.series_id.in_(list(series_ids)))
            .group_by(ForecastRow.series_id)
        )
        if model_version is not None:
            statement = statement.where(ForecastRow.model_version == model_version)
        if until is not None:
            statement = statement.where(ForecastRow.generated_at <= as_utc(until))
        with self._db.transaction("read the newest forecast times") as session:
            rows = session.execute(statement).all()
        return {str(sid): as_utc(when) for sid, when in rows if when is not None}

    def read(
        self,
        series_ids: Sequence[str] | None = None,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        generated_since: datetime | None = None,
    ) -> pd.DataFrame:
        """Return stored forecasts whose target times fall in ``[start, end)``.

        Args:
            series_ids: the series to read; None reads all.
            start: first target time ``ds`` included (tz-aware), None for no bound.
            end: first target time ``ds`` excluded (tz-aware), None for no bound.
            generated_since: only forecasts generated at or after this time.

        Returns:
            A frame sorted by series, generation time and step (columns
            ``unique_id, ds, step, model, mean``, quantiles, ``model_version``,
            ``generated_at``).
        """
        statement = select(ForecastRow).order_by(
            ForecastRow.series_id, ForecastRow.generated_at, ForecastRow.step
        )
        if series_ids is not None:
            statement = statement.where(ForecastRow.series_id.in_(list(series_ids)))
        if start is not None:
            statement = statement.where(ForecastRow.ds >= as_utc(start))
        if end is not None:
            statement = statement.where(ForecastRow.ds < as_utc(end))
        if generated_since is not None:
            statement = statement.where(ForecastRow.generated_at >= as_utc(generated_since))
        return self._frame(statement, "read forecasts")

    def _frame(self, statement: Select[ForecastRow], action: str) -> pd.DataFrame:
        with self._db.transaction(action) as session:
            rows = list(session.scalars(statement))
        return _rows_to_frame(rows)


_Ts = TypeVarTuple("_Ts")


def _of_runs(statement: Select[*_Ts]) -> Select[*_Ts]:
    """``statement`` over ``forecasts`` restricted to rows of recorded forecast runs."""
    return statement.join(
        ForecastRunRow,
        (ForecastRunRow.model_version == ForecastRow.model_version)
        & (ForecastRunRow.generated_at == ForecastRow.generated_at),
    )


def _quantile_columns(frame: pd.DataFrame) -> list[str]:
    return [quantile_column(q) for q in quantile_levels(frame.columns)]


def forecast_rows(
    frame: pd.DataFrame, model_version: str, generated_at: datetime
) -> list[dict[str, Any]]:
    """The store rows of a forecast frame ``unique_id, ds, [step], [model], mean, q<level>...``.

    ``frame`` is as ``Forecaster.predict`` returns it; without a ``step`` column steps
    are numbered 1.. per series in ``ds`` order.

    Raises:
        DataValidationError: a column is missing or a mean is not finite.
    """
    missing = [column for column in (UID, DS, MEAN) if column not in frame.columns]
    if missing:
        raise DataValidationError(
            f"cannot store the forecast: columns {missing} are missing; pass the frame "
            "Forecaster.predict returns (unique_id, ds, mean, q<level>...)"
        )
    if frame.empty:
        return []
    if not isinstance(frame[DS].dtype, pd.DatetimeTZDtype):
        raise DataValidationError(
            f"cannot store the forecast: ds has dtype {frame[DS].dtype}, not a tz-aware "
            "timestamp; convert it with pd.to_datetime(..., utc=True)"
        )
    means = frame[MEAN].astype(np.float64)
    bad = ~np.isfinite(means.to_numpy())
    if bad.any():
        series = sorted(frame.loc[bad, UID].astype(str).unique())
        raise DataValidationError(
            f"cannot store the forecast: series {series} have non-finite means"
        )
    ordered = frame.sort_values([UID, DS], kind="stable").reset_index(drop=True)
    if STEP in ordered.columns:
        steps = ordered[STEP].astype(np.int64)
    else:
        steps = ordered.groupby(UID, sort=False).cumcount() + 1
    models = ordered[MODEL] if MODEL in ordered.columns else pd.Series(None, index=ordered.index)
    quantiles = {
        column: ordered[column].astype(np.float64).to_numpy()
        for column in _quantile_columns(ordered)
    }
    return [
        {
            "series_id": str(uid),
            "generated_at": generated_at,
            "step": int(step),
            "ds": ds.to_pydatetime(),
            "model_version": model_version,
            "model": None if model is None or pd.isna(model) else str(model),
            "mean": float(mean),
            # JSON has no NaN: a missing quantile is stored as null.
            "quantiles": {column: _json_number(values[i]) for column, values in quantiles.items()},
        }
        for i, (uid, ds, step, model, mean) in enumerate(
            zip(ordered[UID], ordered[DS], steps, models, ordered[MEAN], strict=True)
        )
    ]


def _json_number(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _rows_to_frame(rows: Sequence[ForecastRow]) -> pd.DataFrame:
    levels = sorted({key for row in rows for key in row.quantiles}, key=quantile_level)
    data: dict[str, Any] = {
        UID: pd.Series([row.series_id for row in rows], dtype=object),
        DS: pd.to_datetime([row.ds for row in rows], utc=True).as_unit("ns"),
        STEP: np.array([row.step for row in rows], dtype=np.int64),
        MODEL: pd.Series([row.model for row in rows], dtype=object),
        MEAN: np.array([row.mean for row in rows], dtype=np.float64),
    }
    for column in levels:
        data[column] = np.array(
            [_nan_if_none(row.quantiles.get(column)) for row in rows], dtype=np.float64
        )
    data[MODEL_VERSION] = pd.Series([row.model_version for row in rows], dtype=object)
    data[GENERATED_AT] = pd.to_datetime([row.generated_at for row in rows], utc=True).as_unit("ns")
    return pd.DataFrame(data)


def _nan_if_none(value: Any) -> float:
    return math.nan if value is None else float(value)
