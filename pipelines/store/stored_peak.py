"""A stored peak forecast as the policy takes it: the one place rows become a bound.

Details: docs/jobs.md, "Notes from the code", `pipelines/store/stored_peak.py`."""

from __future__ import annotations

import math
from datetime import timedelta

import pandas as pd

from forecaster.peak.fleet import lead_steps
from forecaster.peak.types import SCALE
from forecaster.types import quantile_column, quantile_levels
from pipelines.store.peak_forecasts import LAST, LEAD, ORIGIN, RAW, RETURN
from policy.peak import PeakForecast


def stored_peak(
    peaks: pd.DataFrame, lead_time: timedelta, step: timedelta, level: float
) -> tuple[PeakForecast | None, str]:
    """The stored peak over ``lead_time`` at ``level``, or why there is none.

    Args:
        peaks: one run's peak rows of one series (``PeakForecastRepository.at``).
        lead_time: the pool's lead time; the shortest stored lead covering it is used.
        level: the pool's quantile; the rows must carry it.
    """
    if peaks.empty:
        return None, "the served model version has no peak forecast for the pool"
    need = lead_steps(lead_time, step)
    covering = peaks[peaks[LEAD] >= need].sort_values(LEAD)
    if covering.empty:
        return None, (
            f"the peak forecasts reach {int(peaks[LEAD].max())} steps, short of the pool's "
            f"lead time of {need} steps (retrain after changing lead times)"
        )
    row = covering.iloc[0]
    column = quantile_column(level)
    if column not in row.index or pd.isna(row[column]):
        return None, (
            f"the peak forecasts have no {column} (retrain after changing the pool's quantile)"
        )
    levels = {
        q: float(row[quantile_column(q)])
        for q in quantile_levels(row.index)
        if not pd.isna(row[quantile_column(q)])
    }
    raw_columns = [str(c).removeprefix(RAW) for c in row.index if str(c).startswith(RAW)]
    raw = {
        q: float(row[f"{RAW}{quantile_column(q)}"])
        for q in quantile_levels(raw_columns)
        if not pd.isna(row[f"{RAW}{quantile_column(q)}"])
    }
    peak = PeakForecast(
        quantiles=levels,
        origin=pd.Timestamp(row[ORIGIN]).to_pydatetime(),
        last=float(row[LAST]),
        lead=int(row[LEAD]) * step,
        raw=raw or None,
        returning=None if pd.isna(row[RETURN]) else float(row[RETURN]),
        scale=_scale(row),
    )
    return peak, ""


def _scale(row: pd.Series) -> float | None:
    """The row's volatility scale, None where it has none (rows from before it was stored)."""
    value = row.get(SCALE)
    if value is None or pd.isna(value):
        return None
    scale = float(value)
    return scale if math.isfinite(scale) and scale > 0 else None
