"""The time-of-day reference: recent buffers at this time of day, not over the whole day.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/reference.py`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.peak.target import lead_headroom, lead_peak
from forecaster.peak.types import FloatArray

SEASON: Final = pd.Timedelta(days=8, hours=1)
"""How far before an origin the references read the series, up to a lead more: a
week and an hour for the time-of-day reference, a week and a day for the seasonal
reference of last week (its errors over the trailing day)."""
SEASONAL_MIN: Final = 20
"""Realised headrooms the reference needs before it issues a bound."""
SEASONAL_NAIVE_LAGS: Final = (pd.Timedelta(days=1), pd.Timedelta(weeks=1))
"""The seasonal references' lags: same time yesterday and same time last week."""


def seasonal_lags(day: int, lead: int) -> npt.NDArray[np.intp]:
    """Steps back from an origin to the earlier origins within an hour of its time of
    day over the last week, whose lead-time peak is realised at the origin."""
    hour = max(1, day // 24)
    lags = {d * day + j for d in range(8) for j in range(-hour, hour + 1)}
    return np.array(sorted(m for m in lags if m >= lead), dtype=np.intp)


def seasonal_bound(
    y: FloatArray,
    p: int,
    lags: npt.NDArray[np.intp],
    lead: int,
    levels: Sequence[float] | FloatArray,
) -> FloatArray:
    """The reference bound at origin ``p`` of ``y``, one per level.

    ``y[p]`` plus the ``levels`` quantiles of the realised headroom of the origins
    ``lags`` (:func:`seasonal_lags`) before ``p``; NaN with fewer than
    :data:`SEASONAL_MIN`. Only ``y[: p + 1]`` is read.
    """
    origins = p - lags
    origins = origins[origins >= 0]
    ahead = np.arange(1, lead + 1)
    headroom = np.max(y[origins[:, None] + ahead[None, :]], axis=1) - y[origins]
    headroom = headroom[np.isfinite(headroom)]
    if len(headroom) < SEASONAL_MIN:
        return np.full(len(levels), np.nan)
    return np.asarray(float(y[p]) + np.quantile(headroom, levels), dtype=np.float64)


def trailing_reference(y: FloatArray, lead: int, day: int, levels: Sequence[float]) -> FloatArray:
    """The trailing-day buffer at every origin of ``y``, shape ``(origin, level)``.

    ``y[t]`` plus the ``levels`` quantiles of the headroom ``max(y[s+1 .. s+lead]) - y[s]``
    realised by ``t`` (origins ``s`` from ``t - lead - day + 1`` to ``t - lead``): what
    persistence + k sd provisions, the reference the served combination
    (:class:`forecaster.peak.online.OnlinePeak`) mixes in and the promotion gate scores
    the peak model against. NaN until half a day of headroom is realised.
    """
    values = np.asarray(y, dtype=np.float64)
    peak = pd.Series(lead_headroom(values, lead)).shift(lead)  # realised by the origin
    window = peak.rolling(day, min_periods=max(1, day // 2))
    out = [values + window.quantile(float(q)).to_numpy(dtype=np.float64) for q in levels]
    return np.column_stack(out) if out else np.empty((len(values), 0))


def naive_lags(day: int) -> tuple[int, ...]:
    """:data:`SEASONAL_NAIVE_LAGS` in steps of a grid with ``day`` steps a day."""
    return tuple(round(lag / pd.Timedelta(days=1) * day) for lag in SEASONAL_NAIVE_LAGS)


def seasonal_naive_bound(
    y: FloatArray,
    p: int,
    lag: int,
    lead: int,
    window: int,
    levels: Sequence[float] | FloatArray,
) -> FloatArray:
    """The seasonal reference bound at origin ``p`` of ``y``, one per level.

    The peak ``max(y[p-lag+1 .. p-lag+lead])`` realised ``lag`` steps before (the same
    time on an earlier day) plus the ``levels`` quantiles of that forecast's errors
    ``peak(s) - peak(s - lag)`` over the ``window`` origins ``s`` realised by ``p``
    (``p - lead - window < s <= p - lead``); NaN with fewer than half of them known.
    Reads ``y[p - lead - window - lag + 2 : p + 1]`` only.

    Raises:
        ValueError: ``lag`` shorter than ``lead`` (its peak would not be realised).
    """
    if lag < lead or lead < 1 or window < 1:
        raise ValueError(f"need lag >= lead >= 1 and window >= 1; got {lag}, {lead}, {window}")
    values = np.asarray(y, dtype=np.float64)
    n = len(levels)
    if p - lag + 1 < 0:
        return np.full(n, np.nan)
    ahead = np.arange(1, lead + 1)
    base = float(np.max(values[p - lag + ahead]))
    origins = np.arange(p - lead - window + 1, p - lead + 1)
    origins = origins[origins - lag + 1 >= 0]
    if not np.isfinite(base) or len(origins) < max(1, window // 2):
        return np.full(n, np.nan)
    peak = np.max(values[origins[:, None] + ahead[None, :]], axis=1)
    before = np.max(values[origins[:, None] - lag + ahead[None, :]], axis=1)
    errors = peak - before
    errors = errors[np.isfinite(errors)]
    if len(errors) < max(1, window // 2):
        return np.full(n, np.nan)
    return np.asarray(base + np.quantile(errors, levels), dtype=np.float64)


def seasonal_naive_reference(
    y: FloatArray, lag: int, lead: int, window: int, levels: Sequence[float]
) -> FloatArray:
    """:func:`seasonal_naive_bound` at every origin of ``y``, shape ``(origin, level)``.

    Computed with rolling quantiles over the whole series (the benchmark's columns),
    equal to stepping :func:`seasonal_naive_bound` origin by origin.
    """
    if lag < lead or lead < 1 or window < 1:
        raise ValueError(f"need lag >= lead >= 1 and window >= 1; got {lag}, {lead}, {window}")
    values = np.asarray(y, dtype=np.float64)
    peak = pd.Series(lead_peak(values, lead))
    # before[i] = max(y[i .. i + lead - 1]), the peak of origin i - 1 (for i = 0 too).
    before = lead_peak(np.concatenate([[np.nan], values]), lead)[: len(values)]
    base = pd.Series(before).shift(lag - 1)  # max(y[t - lag + 1 .. t - lag + lead])
    errors = (peak - base).shift(lead)  # realised by the origin
    rolling = errors.rolling(window, min_periods=max(1, window // 2))
    out = [(base + rolling.quantile(float(q))).to_numpy(dtype=np.float64) for q in levels]
    return np.column_stack(out) if out else np.empty((len(values), 0))


def time_of_day_columns(
    y: FloatArray, start: int, lags: npt.NDArray[np.intp], lead: int, levels: FloatArray
) -> FloatArray:
    """:func:`~forecaster.peak.reference.seasonal_bound` at origins ``start`` to the end
    of ``y``, shape ``(origin, level)``: the realised headrooms looked up once."""
    headroom = lead_headroom(y, lead)
    origins = np.arange(start, len(y))[:, None] - lags[None, :]
    seen = np.where(origins >= 0, headroom[np.clip(origins, 0, None)], np.nan)
    seen = np.where(np.isfinite(seen), seen, np.nan)
    enough = np.count_nonzero(~np.isnan(seen), axis=1) >= SEASONAL_MIN
    out = np.full((len(origins), len(levels)), np.nan)
    if enough.any():
        out[enough] = _row_quantiles(seen[enough], levels) + y[start:][enough, None]
    return out


def _row_quantiles(values: FloatArray, levels: FloatArray) -> FloatArray:
    """Each row's ``levels`` quantiles of its non-NaN values, as ``np.quantile`` (linear)."""
    ordered = np.sort(values, axis=1)  # NaN last
    counts = np.count_nonzero(~np.isnan(values), axis=1)
    position = levels[None, :] * (counts - 1)[:, None]
    lower = np.floor(position).astype(np.intp)
    upper = np.minimum(lower + 1, (counts - 1)[:, None])
    rows = np.arange(len(values))[:, None]
    low, high = ordered[rows, lower], ordered[rows, upper]
    return np.asarray(low + (position - lower) * (high - low), dtype=np.float64)
