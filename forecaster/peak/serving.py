"""The served peak bounds of a fleet's fresh raw forecasts, as the forecast job stores them.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/serving.py`."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import pandas as pd

from forecaster.peak.online import WARMUP, OnlinePeak, anchor, day_rule, issue, steps_per_day
from forecaster.peak.recovery import held_level
from forecaster.peak.reference import SEASON
from forecaster.peak.types import LEAD, SCALE, FloatArray
from forecaster.types import DS, UID, Y, quantile_column, quantile_levels

RAW_PREFIX: Final = "raw_"
"""Prefix of a served frame's columns of the model's own quantiles (``raw_q0.9``)."""
RETURN_LEVEL: Final = "return_level"
"""Column of a served frame: the level the bounds were held at after an idle spell."""


StateKey = tuple[str, int]
"""A served state's series id and lead (steps)."""


@dataclass(frozen=True)
class Stepped:
    """The online state of one series and lead after its last origin, and what it read.

    Attributes:
        grid: the series' grid, ending at the origin the state last issued.
        y: the actuals on ``grid``.
        raw: the raw bounds per position of ``grid`` and level.
        scale: the scale per position of ``grid``.
        levels: the levels of ``raw``'s columns.
        warmup: as :func:`anchor`.
        state: the state, stepped through ``grid``'s last origin.
        bounds: what it issued there, per level.
    """

    grid: pd.DatetimeIndex
    y: FloatArray
    raw: FloatArray
    scale: FloatArray
    levels: tuple[float, ...]
    warmup: pd.Timedelta
    state: OnlinePeak
    bounds: FloatArray

    def continues(
        self,
        grid: pd.DatetimeIndex,
        y: FloatArray,
        raw: FloatArray,
        scale: FloatArray,
        levels: tuple[float, ...],
        warmup: pd.Timedelta,
    ) -> bool:
        """Whether ``grid``'s inputs extend the ones this state stepped through, unchanged."""
        n = len(self.grid)
        return (
            levels == self.levels
            and warmup == self.warmup
            and len(grid) >= n
            and grid[:n].equals(self.grid)
            and np.array_equal(y[:n], self.y, equal_nan=True)
            and np.array_equal(raw[:n], self.raw, equal_nan=True)
            and np.array_equal(scale[:n], self.scale, equal_nan=True)
        )


def _stepped(
    ds: pd.DatetimeIndex,
    y: FloatArray,
    raw: FloatArray,
    scale: FloatArray,
    levels: tuple[float, ...],
    lead: int,
    step: pd.Timedelta,
    warmup: pd.Timedelta,
    before: Stepped | None,
) -> Stepped:
    """The state at ``ds``'s last origin: ``before`` continued when it can be, else rebuilt.

    ``before``'s state is stepped on in place: the caller gives up its copy.
    """
    n = len(ds)
    if n < 1 or not len(y) == len(raw) == len(scale) == n:
        raise ValueError(
            f"need a grid of 1 or more with y, raw and scale as long; got {n}, {len(y)}, "
            f"{len(raw)}, {len(scale)}"
        )
    if before is not None and before.continues(ds, y, raw, scale, levels, warmup):
        state, start = before.state, len(before.grid)
        if start == n:  # nothing new: what it issued at this origin stands
            return before
    else:
        start = int(ds.searchsorted(anchor(ds[-1], warmup)))
        state = OnlinePeak(levels, lead, steps_per_day(step))
    issued = issue(state, y, start, raw[start:], scale[start:])[-1]
    return Stepped(ds, y, raw, scale, levels, warmup, state, np.asarray(issued, dtype=np.float64))


def serve_states(
    fresh: pd.DataFrame,
    history: pd.DataFrame,
    earlier: pd.DataFrame,
    step: pd.Timedelta,
    states: Mapping[StateKey, Stepped] | None = None,
    *,
    warmup: pd.Timedelta = WARMUP,
) -> tuple[pd.DataFrame, dict[StateKey, Stepped]]:
    """Return the served peak forecasts of a fresh raw peak frame, and the online states.

    The states of an earlier run are continued where they still hold.

    Args:
        fresh: ``PeakQuantileForecaster.predict_peak``'s frame made now
            (``unique_id, ds, lead, last, scale, q<level>...``, ``ds`` the origin).
        history: long frame ``unique_id, ds, y`` of the targets up to the origins.
        earlier: the raw forecasts made before, same columns as ``fresh`` (only
            ``unique_id, ds, lead, scale, q<level>...`` are read; the newest row of an
            origin and lead wins when there are several).
        step: the series' step.
        warmup: as :func:`anchor`.
        states: what an earlier call returned (its states are stepped on in place:
            the caller gives them up); a state whose inputs changed is rebuilt.

    Returns:
        ``fresh`` with ``q<level>`` the served bounds, ``raw_q<level>`` the model's and
        ``return_level`` the level demand had before an idle spell it has just come
        back from, which the bounds are held at or above (NaN where the rule is
        silent: :mod:`forecaster.peak.recovery`); and each row's state after its
        origin by ``(id, lead)``, for the next call.
    """
    levels = tuple(quantile_levels(fresh.columns))
    columns = [quantile_column(q) for q in levels]
    rule = day_rule(steps_per_day(step))
    # Each series' actuals and each (series, lead)'s earlier raw forecasts are looked
    # up once for the frame; only the online recursion itself runs origin by origin.
    actuals = _newest_by(history[[UID, DS, Y]], [UID])
    kept = [c for c in (UID, LEAD, DS, SCALE, *columns) if c in earlier.columns]
    raws = _newest_by(earlier[kept], [UID, LEAD])
    made = fresh[columns].to_numpy(dtype=np.float64)
    made_scale = fresh[SCALE].to_numpy(dtype=np.float64)
    bounds = np.full((len(fresh), len(columns)), np.nan)
    held = np.full(len(fresh), np.nan)
    before = dict(states or {})
    after: dict[StateKey, Stepped] = {}
    rows = zip(fresh[UID].astype(str), fresh[DS], fresh[LEAD].astype(int), strict=True)
    for i, (uid, origin, lead) in enumerate(rows):
        since = anchor(pd.Timestamp(origin), warmup) - SEASON - lead * step
        grid = pd.date_range(since, origin, freq=step)
        y = _on_grid(actuals.get((uid,)), [Y], grid)[:, 0]
        past = _on_grid(raws.get((uid, lead)), [*columns, SCALE], grid)
        raw, scale = past[:, :-1], past[:, -1]
        raw[-1], scale[-1] = made[i], made_scale[i]
        key = (uid, lead)
        stepped = _stepped(grid, y, raw, scale, levels, lead, step, warmup, before.pop(key, None))
        after[key] = stepped
        bounds[i] = stepped.bounds
        held[i] = held_level(y, len(y) - 1, rule)
    out = fresh.copy()
    for k, column in enumerate(columns):
        out[f"{RAW_PREFIX}{column}"] = fresh[column]
        out[column] = bounds[:, k]
    out[RETURN_LEVEL] = held
    return out, after


def _newest_by(frame: pd.DataFrame, keys: list[str]) -> dict[tuple[Hashable, ...], pd.DataFrame]:
    """Each group's rows indexed by ``ds``, the newest row of a repeated ``ds`` kept.

    Keyed by ``(unique_id,)`` or ``(unique_id, lead)``: ids as str, leads as int.
    """
    frame = frame.assign(**{UID: frame[UID].astype(str)})
    if LEAD in keys:
        frame = frame.assign(**{LEAD: frame[LEAD].astype(int)})
    out: dict[tuple[Hashable, ...], pd.DataFrame] = {}
    for group, rows in frame.groupby(keys, sort=False):
        key = group if isinstance(group, tuple) else (group,)
        out[key] = rows.drop(columns=keys).drop_duplicates(DS, keep="last").set_index(DS)
    return out


def _on_grid(rows: pd.DataFrame | None, columns: list[str], grid: pd.DatetimeIndex) -> FloatArray:
    """``columns`` of ``rows`` on ``grid`` (NaN where a time or a column is missing)."""
    if rows is None:
        return np.full((len(grid), len(columns)), np.nan)
    return rows.reindex(index=grid, columns=columns).to_numpy(dtype=np.float64)
