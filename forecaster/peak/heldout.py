"""The peak model on held-out windows: fitted before them, scored by pinball after.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/heldout.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import pandas as pd

from forecaster.exceptions import DataValidationError
from forecaster.peak.combine import pinball
from forecaster.peak.fleet import fleet_frame
from forecaster.peak.frames import collect_inputs
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.peak.online import steps_per_day
from forecaster.peak.reference import trailing_reference
from forecaster.peak.scale import recent_scale
from forecaster.peak.target import lead_peak
from forecaster.peak.types import LEAD
from forecaster.types import DS, UID, Y, quantile_column

BUFFER: Final = "buffer"
"""Method name of the trailing-day buffer in :func:`peak_losses`' frame."""
LEVEL: Final = "level"
METHOD: Final = "method"
PINBALL: Final = "pinball"
N_ORIGINS: Final = "n_origins"
LOSS_COLUMNS: Final = (LEAD, LEVEL, METHOD, PINBALL, N_ORIGINS)
"""Columns of :func:`peak_losses`' frame."""


def heldout_forecasts(
    prototype: PeakQuantileForecaster,
    history: pd.DataFrame,
    heldout_from: Mapping[str, pd.Timestamp],
) -> pd.DataFrame:
    """Fit a copy of ``prototype`` before the held-out windows; forecast every origin in them.

    Args:
        prototype: the peak model's hyperparameters (it is not fitted itself).
        history: the training's long frame (targets and covariates).
        heldout_from: each series' first held-out cutoff
            (``BacktestResult.heldout_from``); the fit sees the data up to the earliest
            of the target series', and each series is forecast from its own on.

    Returns:
        ``predict_peak``'s frame (``unique_id, ds, lead, last, scale, q<level>...``) of
        the origins at or after each target series' first held-out cutoff.

    Raises:
        InsufficientHistoryError: too little history before the first held-out cutoff.
        DataValidationError: no target series is held out.
    """
    model = PeakQuantileForecaster(**prototype.get_params())
    fleet = fleet_frame(history, model.targets)
    starts = _target_starts(fleet, model, heldout_from)
    first = min(starts.values())
    model.fit(fleet[fleet[DS] <= first])
    made = model.predict_peak(fleet, since=first)
    own = made[UID].astype(str).map(starts)
    return made[made[DS] >= own].reset_index(drop=True)


def _target_starts(
    fleet: pd.DataFrame, model: PeakQuantileForecaster, heldout_from: Mapping[str, pd.Timestamp]
) -> dict[str, pd.Timestamp]:
    targets = {item.uid for item in collect_inputs(fleet, model.targets, ())}
    starts = {uid: _utc(when) for uid, when in heldout_from.items() if uid in targets}
    if not starts:
        raise DataValidationError(
            f"none of the peak model's target series {sorted(targets)} has held-out windows; "
            "the backtest must cover them (check the training's series)"
        )
    return starts


def peak_losses(
    history: pd.DataFrame,
    forecasts: Mapping[str, pd.DataFrame],
    levels: Sequence[float],
) -> pd.DataFrame:
    """Mean pinball loss of each method's bound of the lead-time peak, per lead and level.

    Only origins where every method has a bound at every level and the peak is
    realised count, so the methods are scored on the same origins; the trailing-day
    buffer (method :data:`BUFFER`) is scored beside them.

    Args:
        history: the long frame the peaks and the buffer are read from.
        forecasts: method name -> ``predict_peak`` frame (one row per series, origin
            and lead; each holds ``q<level>`` for ``levels``).
        levels: the levels scored.

    Returns:
        ``lead, level, method, pinball, n_origins``: the loss in each series' scale
        units, averaged over every scored origin of every series.
    """
    columns = [quantile_column(q) for q in levels]
    keys = [UID, DS, LEAD]
    joined: pd.DataFrame | None = None
    for name, frame in forecasts.items():
        part = frame[[*keys, *columns]].rename(columns={c: f"{name}|{c}" for c in columns})
        joined = part if joined is None else joined.merge(part, on=keys, how="inner")
    if joined is None or joined.empty:
        return pd.DataFrame(columns=list(LOSS_COLUMNS))
    fleet = fleet_frame(history)  # demand clipped at zero, as the models saw it
    scored = set(joined[UID].astype(str))
    series = {
        str(uid): part.sort_values(DS)
        for uid, part in fleet[fleet[UID].isin(scored)].groupby(UID, sort=False)
    }
    rows = [
        _score_series(series[str(uid)], group, levels, list(forecasts))
        for (uid, _), group in joined.groupby([UID, LEAD], sort=True)
        if str(uid) in series
    ]
    if not rows:
        return pd.DataFrame(columns=list(LOSS_COLUMNS))
    per_origin = pd.concat(rows, ignore_index=True)
    out = (
        per_origin.groupby([LEAD, LEVEL, METHOD], sort=True)[PINBALL]
        .agg(["mean", "size"])
        .reset_index()
        .rename(columns={"mean": PINBALL, "size": N_ORIGINS})
    )
    return out[list(LOSS_COLUMNS)]


def _score_series(
    series: pd.DataFrame, group: pd.DataFrame, levels: Sequence[float], methods: list[str]
) -> pd.DataFrame:
    """Scaled pinball per origin, level and method of one series (sorted) and lead."""
    lead = int(group[LEAD].iloc[0])
    grid = pd.DatetimeIndex(series[DS])
    y = series[Y].to_numpy(dtype=np.float64)
    day = steps_per_day(pd.Timedelta(grid.to_series().diff().median()))
    at = grid.get_indexer(pd.DatetimeIndex(group[DS]))
    known = at >= 0
    group, at = group[known], at[known]
    peak = lead_peak(y, lead)[at]
    scale = recent_scale(y, day)[at]
    bounds = {BUFFER: trailing_reference(y, lead, day, levels)[at]}
    for name in methods:
        bounds[name] = group[[f"{name}|{quantile_column(q)}" for q in levels]].to_numpy(
            dtype=np.float64
        )
    ok = np.isfinite(peak) & np.logical_and.reduce(
        [np.isfinite(b).all(axis=1) for b in bounds.values()]
    )
    parts = []
    for name, bound in bounds.items():
        for k, q in enumerate(levels):
            loss = pinball(peak[ok], bound[ok, k], float(q)) / scale[ok]
            parts.append(pd.DataFrame({LEAD: lead, LEVEL: float(q), METHOD: name, PINBALL: loss}))
    return pd.concat(parts, ignore_index=True)


def _utc(when: pd.Timestamp) -> pd.Timestamp:
    stamp = pd.Timestamp(when)
    return stamp.tz_localize("UTC") if stamp.tz is None else stamp.tz_convert("UTC")
