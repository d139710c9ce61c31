"""Features of one origin, in the series' own scale, from data up to the origin only.

For a target series ``y`` with scale ``s`` (``scale.py``), at origin ``t``:

- recent changes ``(y[t] - y[t-k]) / s`` for ``k`` in 1, 2, 3, 6, 12 steps;
- volatility: the 2-hour standard deviation of 1-step changes and, per lead ``L``,
  the trailing-day standard deviation of ``L``-step changes, both over ``s``;
- position in the day's range: level minus the trailing-day mean, distance below the
  trailing-day maximum and above its minimum, over ``s``; the day's share of rising
  steps and of unchanged steps; steps since the last jump of more than ``s``;
- calendar: hour of day and weekday of the origin;
- series features: ``log1p`` of the level and of ``s`` (the pool's size and
  granularity: one 8-GPU job is a burst on a small pool, noise on a big one);
- covariates, by role: queue depth in target units (level and 1- and 3-step
  changes over ``s``, and its share of the target); arrivals, pending jobs and GPU
  utilisation relative to their own trailing-day mean (level, 1- and 3-step changes).

With ``flat=True``, three features for pools whose demand is unchanged on most
steps (the headroom is exactly 0 there, a point mass the quantile must see):
steps since the last change of any size, the 2-hour share of unchanged steps, and
the trailing-day share of realised 1-step headrooms that were <= 0.

With ``history=True``, per lead ``L``, features of the *realised* ``L``-step headroom
``max(y[s+1 .. s+L]) - y[s]`` of the origins ``s <= t - L`` (the ones known at ``t``),
over ``s``: its trailing-day quantiles at ``HISTORY_LEVELS`` (the reference bound's
own headroom, so the trees learn a correction to it rather than the reference
itself), its trailing-week 0.95 quantile, its 6-hour maximum, and the trailing-day
share of it that was <= 0.

Every statistic is trailing, so a feature at ``t`` never reads ``y[t+1:]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from forecaster.peak.frames import SeriesInput
from forecaster.peak.scale import recent_scale
from forecaster.peak.target import lead_headroom
from forecaster.peak.types import ROLES, FloatArray

CHANGE_STEPS: tuple[int, ...] = (1, 2, 3, 6, 12)
SHORT_WINDOW = 12
"""Steps of the short volatility window (2 hours at 10 min)."""


FLAT_FEATURES: tuple[str, ...] = ("since_change", "flat_share_short", "no_rise_share")
HISTORY_LEVELS: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)
"""Levels of the trailing-day quantiles of realised headroom (``history=True``)."""
HISTORY_MAX_WINDOW = 36
"""Steps of the trailing maximum of realised headroom (6 hours at 10 min)."""


def history_names(lead: int) -> list[str]:
    """Return the realised-headroom feature columns of one lead (``history=True``)."""
    names = [f"headroom_{lead}_q{q:g}" for q in HISTORY_LEVELS]
    return [*names, f"headroom_{lead}_week_q0.95", f"headroom_{lead}_max", f"headroom_{lead}_flat"]


def feature_names(leads: Sequence[int], flat: bool = False, history: bool = False) -> list[str]:
    """Return the feature columns, in order, for the given leads."""
    names = [f"change_{k}" for k in CHANGE_STEPS]
    names += ["vol_short", *(f"vol_lead_{lead}" for lead in leads)]
    names += ["level_vs_mean", "below_max", "above_min", "rise_share", "flat_share"]
    names += ["since_jump", "hour", "weekday", "log_level", "log_scale"]
    names += ["queue", "queue_change_1", "queue_change_3", "queue_share"]
    for role in ROLES[1:]:
        names += [f"{role}", f"{role}_change_1", f"{role}_change_3"]
    if flat:
        names += list(FLAT_FEATURES)
    if history:
        for lead in leads:
            names += history_names(lead)
    return names


def _lag(x: FloatArray, k: int) -> FloatArray:
    out = np.full(len(x), np.nan)
    out[k:] = x[: len(x) - k]
    return out


def _steps_since(event: np.ndarray, cap: int) -> FloatArray:
    """Steps since the latest ``True`` at or before each index (``cap`` if none)."""
    index = np.arange(len(event))
    last = np.maximum.accumulate(np.where(event, index, -1))
    since = np.where(last >= 0, index - last, cap)
    return np.minimum(since, cap).astype(np.float64)


def series_features(
    item: SeriesInput,
    leads: Sequence[int],
    day: int,
    flat: bool = False,
    history: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """Return ``(X, scale)`` for every origin of one series.

    Args:
        item: the target series and its covariates.
        leads: the lead times (steps) the model forecasts.
        day: steps in a day.
        flat: add the point-mass features (``FLAT_FEATURES``).
        history: add the realised-headroom features (``history_names``).

    Returns:
        ``X`` of shape ``(n, len(feature_names(leads, flat, history)))`` and the scale
        per origin.
    """
    y = item.y
    s = recent_scale(y, day)
    series = pd.Series(y)
    change = series.diff()
    cols: list[FloatArray] = [(y - _lag(y, k)) / s for k in CHANGE_STEPS]
    cols.append(change.rolling(SHORT_WINDOW, min_periods=2).std().to_numpy() / s)
    for lead in leads:
        lead_change = series.diff(lead).rolling(day, min_periods=2).std().to_numpy()
        cols.append(lead_change / s)
    rolling = series.rolling(day, min_periods=1)
    cols.append((y - rolling.mean().to_numpy()) / s)
    cols.append((rolling.max().to_numpy() - y) / s)
    cols.append((y - rolling.min().to_numpy()) / s)
    cols.append((change > 0).astype(float).rolling(day, min_periods=1).mean().to_numpy())
    cols.append((change == 0).astype(float).rolling(day, min_periods=1).mean().to_numpy())
    cols.append(_steps_since((change > s).to_numpy(), day))
    cols.append(np.asarray(item.ds.hour + item.ds.minute / 60.0, dtype=np.float64))
    cols.append(np.asarray(item.ds.dayofweek, dtype=np.float64))
    cols.append(np.log1p(np.abs(rolling.mean().to_numpy())))
    cols.append(np.log1p(s))
    cols += _queue_features(item.covariates.get("queue"), y, s)
    for role in ROLES[1:]:
        cols += _relative_features(item.covariates.get(role), len(y), day)
    if flat:
        cols += _flat_features(y, change, day)
    if history:
        for lead in leads:
            cols += _history_features(y, s, lead, day)
    return np.column_stack(cols).astype(np.float64), s


def _flat_features(y: FloatArray, change: pd.Series, day: int) -> list[FloatArray]:
    """Steps since any change, 2-hour unchanged share, day share of no-rise next steps."""
    since = _steps_since((change.fillna(0.0) != 0.0).to_numpy(), day)
    flat_short = (change == 0).astype(float).rolling(SHORT_WINDOW, min_periods=1).mean()
    # The 1-step headroom of origin t - 1 is realised at t: y[t] - y[t-1] = change[t].
    no_rise = (change <= 0).astype(float).where(change.notna())
    share = no_rise.rolling(day, min_periods=1).mean().to_numpy()
    return [since, flat_short.to_numpy(), share]


def _history_features(y: FloatArray, s: FloatArray, lead: int, day: int) -> list[FloatArray]:
    """Trailing statistics of the realised ``lead``-step headroom, over the scale."""
    # The headroom of origin t - lead is max(y[t-lead+1 .. t]) - y[t-lead]: known at t.
    realised = pd.Series(lead_headroom(y, lead)).shift(lead)
    trailing = realised.rolling(day, min_periods=max(1, day // 2))
    cols = [trailing.quantile(q).to_numpy() / s for q in HISTORY_LEVELS]
    week = realised.rolling(7 * day, min_periods=max(1, day // 2)).quantile(0.95)
    cols.append(week.to_numpy() / s)
    cols.append(realised.rolling(HISTORY_MAX_WINDOW, min_periods=1).max().to_numpy() / s)
    flat = (realised <= 0).astype(float).where(realised.notna())
    cols.append(flat.rolling(day, min_periods=1).mean().to_numpy())
    return cols


def _queue_features(queue: FloatArray | None, y: FloatArray, s: FloatArray) -> list[FloatArray]:
    if queue is None:
        return [np.full(len(y), np.nan)] * 4
    share = np.divide(queue, np.abs(y), out=np.zeros(len(y)), where=np.abs(y) > 0)
    return [queue / s, (queue - _lag(queue, 1)) / s, (queue - _lag(queue, 3)) / s, share]


def _relative_features(values: FloatArray | None, n: int, day: int) -> list[FloatArray]:
    """Level and changes of a covariate over its own trailing-day mean magnitude."""
    if values is None:
        return [np.full(n, np.nan)] * 3
    unit = pd.Series(np.abs(values)).rolling(day, min_periods=1).mean().to_numpy() + 1e-9
    return [values / unit, (values - _lag(values, 1)) / unit, (values - _lag(values, 3)) / unit]
