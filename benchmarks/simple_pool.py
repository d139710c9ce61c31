"""A pool of simple causal point forecasters, each a function of one window's history.

Used by :mod:`benchmarks.forecast_headroom` to ask how far any per-series choice of a
method could get above persistence. Every member sees only the training window
(oldest first, the last value is the origin) and returns ``horizon`` values:

- persistence;
- the mean and the median of the last ``w`` values;
- simple exponential smoothing (level only) at several smoothing weights;
- seasonal naive (a day, a week) and the mean of the same time over the last ``n``
  days;
- persistence plus the seasonal change: the last value moved as the same hours moved
  on the last ``n`` days;
- drift: the last value plus the median step of the last ``w`` steps per step ahead;
- each of the level and seasonal members blended with persistence (weights 1/4, 1/2,
  3/4), the shrinkage a combination toward persistence would make.

A member that lacks the history it needs (a week's season in ten days) returns NaN
for the window, which leaves it out of that window's scores.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]
Member = Callable[[Vector, int], Vector]

WINDOWS = (2, 3, 4, 6, 8, 12, 18, 24, 36, 48, 72, 144, 288)
ALPHAS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7)
SEASON_COUNTS = (1, 2, 3, 4)
DRIFT_WINDOWS = (6, 12, 36)
BLENDS = (0.25, 0.5, 0.75)


def pool(steps_per_day: int) -> dict[str, Member]:
    """Every member by name, for series with ``steps_per_day`` steps a day."""
    day, week = steps_per_day, 7 * steps_per_day
    bases: dict[str, Member] = {}
    for w in WINDOWS:
        bases[f"mean{w}"] = _window(w, np.mean)
        bases[f"median{w}"] = _window(w, np.median)
    for alpha in ALPHAS:
        bases[f"ses{alpha}"] = _ses(alpha)
    for n in SEASON_COUNTS:
        bases[f"season_mean_day{n}"] = _season_mean(day, n)
        bases[f"season_change_day{n}"] = _season_change(day, n)
    for n in (1, 2):
        bases[f"season_mean_week{n}"] = _season_mean(week, n)
        bases[f"season_change_week{n}"] = _season_change(week, n)
    members: dict[str, Member] = {"persistence": _persistence, **bases}
    for name, base in bases.items():
        for weight in BLENDS:
            members[f"{name}~p{weight}"] = _blend(base, weight)
    for w in DRIFT_WINDOWS:
        members[f"drift{w}"] = _drift(w)
    return members


def _persistence(y: Vector, horizon: int) -> Vector:
    return np.full(horizon, y[-1])


def _window(w: int, stat: Callable[[Vector], np.floating]) -> Member:
    def member(y: Vector, horizon: int) -> Vector:
        if y.size < w:
            return np.full(horizon, np.nan)
        return np.full(horizon, float(stat(y[-w:])))

    return member


def _ses(alpha: float) -> Member:
    def member(y: Vector, horizon: int) -> Vector:
        # The level after the whole window; weights decay as (1 - alpha) ** age.
        ages = np.arange(y.size - 1, -1, -1, dtype=np.float64)
        weights = alpha * (1.0 - alpha) ** ages
        weights[0] = (1.0 - alpha) ** ages[0]
        return np.full(horizon, float(weights @ y))

    return member


def _season_mean(period: int, n: int) -> Member:
    def member(y: Vector, horizon: int) -> Vector:
        ahead = np.arange(1, horizon + 1)
        if y.size < n * period or horizon > period:
            return np.full(horizon, np.nan)
        rows = [y[y.size - 1 + ahead - j * period] for j in range(1, n + 1)]
        return np.asarray(np.mean(rows, axis=0), dtype=np.float64)

    return member


def _season_change(period: int, n: int) -> Member:
    def member(y: Vector, horizon: int) -> Vector:
        ahead = np.arange(1, horizon + 1)
        if y.size < n * period + 1 or horizon > period:
            return np.full(horizon, np.nan)
        last = y.size - 1
        moves = [y[last + ahead - j * period] - y[last - j * period] for j in range(1, n + 1)]
        return np.asarray(y[-1] + np.mean(moves, axis=0), dtype=np.float64)

    return member


def _drift(w: int) -> Member:
    def member(y: Vector, horizon: int) -> Vector:
        if y.size < w + 1:
            return np.full(horizon, np.nan)
        slope = float(np.median(np.diff(y[-(w + 1) :])))
        return np.asarray(y[-1] + slope * np.arange(1, horizon + 1), dtype=np.float64)

    return member


def _blend(base: Member, weight: float) -> Member:
    def member(y: Vector, horizon: int) -> Vector:
        return np.asarray(weight * y[-1] + (1.0 - weight) * base(y, horizon), dtype=np.float64)

    return member
