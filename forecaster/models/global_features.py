"""Features and training rows of the global gradient boosting family (docs/forecasting.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import numpy.typing as npt
import pandas as pd

from forecaster.models.base import FloatArray
from forecaster.models.boosting import shift

IntArray = npt.NDArray[np.intp]
CHANGE_LAGS: Final[tuple[int, ...]] = (1, 2, 3, 6, 12, 36)
ROLLING: Final[tuple[int, ...]] = (6, 36)


@dataclass(frozen=True)
class Prepared:
    """One series cut to its history, scaled, with its origin features."""

    y: FloatArray
    ds: pd.DatetimeIndex
    scale: float
    origins: IntArray
    """The origins the rows of ``base`` belong to (all, or a sample of them)."""
    base: FloatArray
    fold_start: int


def series_scale(y: FloatArray) -> float:
    """Return the mean absolute 1-step change of ``y``, or a fallback when it is 0.

    A constant series has no change to scale by: its mean absolute level is used, and
    1 when that is 0 too, so scaled values stay finite.
    """
    finite = y[np.isfinite(y)]
    if finite.size >= 2:
        change = float(np.mean(np.abs(np.diff(finite))))
        if change > 0:
            return change
    level = float(np.mean(np.abs(finite))) if finite.size else 0.0
    return level if level > 0 else 1.0


def steps_since(flags: npt.NDArray[np.bool_], cap: int) -> FloatArray:
    """Steps since ``flags`` was last true at or before each position, capped at ``cap``."""
    idx = np.arange(len(flags))
    last = np.maximum.accumulate(np.where(flags, idx, -1))
    since = np.where(last >= 0, idx - last, cap)
    return np.minimum(since, cap).astype(np.float64)


def base_features(y: FloatArray, scale: float, season_length: int) -> FloatArray:
    """Features of an origin that do not depend on the step ahead, shape ``(n, F)``."""
    day = max(2, season_length)
    series = pd.Series(y)
    feats: list[FloatArray] = [y / scale]
    feats += [(y - shift(y, lag)) / scale for lag in CHANGE_LAGS]
    for w in ROLLING:
        roll = series.rolling(w, min_periods=max(2, w // 2))
        feats.append((roll.mean().to_numpy(dtype=np.float64) - y) / scale)
        feats.append(roll.std().to_numpy(dtype=np.float64) / scale)
    daily = series.rolling(day, min_periods=max(2, day // 4))
    high = daily.max().to_numpy(dtype=np.float64)
    low = daily.min().to_numpy(dtype=np.float64)
    feats.append((high - y) / scale)
    feats.append((y - low) / scale)
    feats.append((daily.median().to_numpy(dtype=np.float64) - y) / scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        span = high - low
        feats.append(np.where(span > 0, (y - low) / span, np.nan))
    zero = (y == 0).astype(np.float64)
    zeros = pd.Series(zero)
    feats.append(zeros.rolling(36, min_periods=1).mean().to_numpy(dtype=np.float64))
    feats.append(zeros.rolling(day, min_periods=1).mean().to_numpy(dtype=np.float64))
    cap = 2 * day
    feats.append(steps_since(y == 0, cap))
    moved = np.r_[True, np.diff(y) != 0]
    feats.append(steps_since(moved, cap))
    n = len(y)
    feats.append(np.full(n, float(zero.mean())))
    feats.append(np.full(n, scale / (scale + float(np.mean(np.abs(y))))))
    return np.column_stack(feats)


def last_base_features(y: FloatArray, scale: float, season_length: int) -> FloatArray:
    """The row of :func:`base_features` of the last origin only, shape ``(1, F)``.

    Every feature but the last two looks back at most two days (the day windows, the
    steps since a zero or a change, capped at two days), so a tail of that length
    gives the same row; the last two are over the whole window and are computed so.
    """
    day = max(2, season_length)
    reach = max(2 * day, *CHANGE_LAGS, *ROLLING) + 1
    row = base_features(y[-reach:], scale, season_length)[-1:].copy()
    zero = float((y == 0).mean())
    row[0, -2] = zero
    row[0, -1] = scale / (scale + float(np.mean(np.abs(y))))
    return row


def step_features(p: Prepared, k: int, origins: IntArray, season_length: int) -> FloatArray:
    """Features of the target times ``t + k`` of ``origins``: a day earlier, hour, weekday."""
    day = max(1, season_length)
    back = day * int(np.ceil(k / day))
    y = p.y[origins]
    before = origins + k - back  # y[t + k - back], and y[t - back]: NaN before the start
    same_time = np.where(before >= 0, p.y[np.clip(before, 0, None)], np.nan)
    earlier = origins - back
    then = np.where(earlier >= 0, p.y[np.clip(earlier, 0, None)], np.nan)
    step = p.ds[1] - p.ds[0]
    target = p.ds[origins] + step * k
    return np.column_stack(
        [
            (same_time - y) / p.scale,
            (same_time - then) / p.scale,
            np.asarray(target.hour + target.minute / 60.0, dtype=np.float64),
            np.asarray(target.dayofweek, dtype=np.float64),
        ]
    )


def rows(p: Prepared, k: int, season_length: int) -> dict[str, tuple[FloatArray, FloatArray]]:
    """One series' sampled rows at anchor ``k``: ``fold``, ``scored`` and ``all``."""
    n = len(p.y)
    t = p.origins
    x = np.column_stack([p.base, step_features(p, k, t, season_length)])
    ahead = t + k
    target = np.where(ahead < n, p.y[np.minimum(ahead, n - 1)], np.nan) - p.y[t]
    target = target / p.scale
    fold = ahead < p.fold_start
    scored = (t >= p.fold_start) & (ahead < n)
    usable = ahead < n
    return {
        "fold": (x[fold], target[fold]),
        "scored": (x[scored], target[scored]),
        "all": (x[usable], target[usable]),
    }


def stack(
    parts: list[dict[str, tuple[FloatArray, FloatArray]]], key: str
) -> tuple[FloatArray, FloatArray]:
    """The ``key`` rows (features, targets) of every series' :func:`rows`, concatenated."""
    return np.concatenate([p[key][0] for p in parts]), np.concatenate([p[key][1] for p in parts])


def sample(p: Prepared, stride: int) -> Prepared:
    """Keep every ``stride``-th origin (counted back from the last) of a prepared series."""
    if stride == 1:
        return p
    origins = np.arange(len(p.y) - 1, -1, -stride)[::-1]
    return replace(p, origins=origins, base=p.base[origins])
