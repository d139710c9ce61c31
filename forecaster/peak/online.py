"""The served peak bound: the model's raw quantiles, calibrated and combined online.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/online.py`."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import Final, Literal, NamedTuple

import numpy as np
import pandas as pd

from forecaster.peak.calibration import (
    MIN_EXPECTED_MISSES,
    TUNED_GAMMA,
    AdaptiveConformal,
    calibrates,
)
from forecaster.peak.combine import (
    TUNED_ETA,
    TUNED_HALFLIFE,
    TUNED_SNAP,
    DiscountedExperts,
    mix,
    pinball,
    snap_to_demand,
)
from forecaster.peak.recovery import MIN_LEVEL, ReturnRule, held_level
from forecaster.peak.reference import (
    naive_lags,
    seasonal_bound,
    seasonal_lags,
    seasonal_naive_bound,
    seasonal_naive_reference,
    time_of_day_columns,
)
from forecaster.peak.types import FloatArray

WARMUP: Final = pd.Timedelta(days=1)
"""History before an origin's day that the online state learns on."""
Expert = Literal["calibrated", "reference", "raw", "time_of_day", "yesterday", "last_week"]
"""An expert of the served mix (:class:`OnlinePeak`)."""
EXPERTS: Final[tuple[Expert, ...]] = (
    "calibrated",
    "reference",
    "raw",
    "time_of_day",
    "yesterday",
    "last_week",
)
"""Experts mixed per level, in their column order: the calibrated model, the
trailing-day reference, the raw model, the time-of-day reference and the seasonal
references of the same time yesterday and last week (what each gained held out:
``docs/forecasting.md``)."""


def anchor(origin: pd.Timestamp, warmup: pd.Timedelta = WARMUP) -> pd.Timestamp:
    """Where the online state issuing ``origin``'s bound starts: ``warmup`` before its day.

    The state is rebuilt at every midnight (UTC), so it never runs longer than
    ``warmup`` and a day.
    """
    return pd.Timestamp(origin).floor("D") - warmup


class OnlinePeak:
    """Calibration and combination state of one series and lead, for every level at once.

    Args:
        levels: the quantile levels, increasing.
        lead: steps between an origin and the end of its peak window.
        day: steps in a day (the reference's trailing window).
        eta: combination sharpness.
        halflife: combination loss half-life, in steps.
        snap: scale units within which a mix above demand is set to demand where
            the reference is at demand.
        min_misses: misses a level must expect over ACI's window to be calibrated (0:
            every level).
        gamma: ACI's step size.
        min_level: the lowest level held at the level demand returns to after an
            idle spell (above every level: never held).
        experts: the experts mixed, a subset of :data:`EXPERTS` (a benchmark's
            ablation; serving mixes them all).
    """

    def __init__(
        self,
        levels: Sequence[float],
        lead: int,
        day: int,
        *,
        eta: float = TUNED_ETA,
        halflife: float = TUNED_HALFLIFE,
        snap: float = TUNED_SNAP,
        min_misses: float = MIN_EXPECTED_MISSES,
        gamma: float = TUNED_GAMMA,
        min_level: float = MIN_LEVEL,
        experts: Sequence[Expert] = EXPERTS,
    ) -> None:
        if lead < 1 or day < 1 or snap < 0.0:
            raise ValueError(f"need lead >= 1, day >= 1 and snap >= 0; got {lead}, {day}, {snap}")
        unknown = sorted(set(experts) - set(EXPERTS))
        if unknown or not experts:
            raise ValueError(f"experts must be some of {EXPERTS}; got {list(experts)}")
        self.levels = np.asarray(levels, dtype=np.float64)
        if len(self.levels) == 0 or np.any(np.diff(self.levels) <= 0):
            raise ValueError(f"levels must be given increasing, got {list(levels)}")
        self.lead = lead
        self.day = day
        self.snap = snap
        self.min_level = min_level
        self._columns = [EXPERTS.index(name) for name in experts]
        self._aci = [AdaptiveConformal(float(q), lead, gamma=gamma) for q in self.levels]
        # Extreme levels expect too few misses in ACI's window: their raw bound serves.
        self._calibrates = [
            calibrates(float(q), a.window, min_misses)
            for q, a in zip(self.levels, self._aci, strict=True)
        ]
        self._experts = [DiscountedExperts(eta, halflife, len(experts)) for _ in self.levels]
        self._headroom: deque[float] = deque(maxlen=day)
        self._lags = seasonal_lags(day, lead)
        self._naive = [lag for lag in naive_lags(day) if lag >= lead]
        self._issued: deque[tuple[int, FloatArray, FloatArray, FloatArray, float]] = deque()
        self._last: int | None = None
        self._rule = day_rule(day)

    def step(
        self,
        y: FloatArray,
        p: int,
        raw: FloatArray,
        scale: float,
        seasonal: FloatArray | None = None,
    ) -> FloatArray:
        """Learn from the origin realised at ``p``, then return ``p``'s bounds.

        Call it for consecutive ``p``. Only ``y[: p + 1]`` is read (the references
        read back to :data:`SEASON` and a lead before ``p`` where ``y`` reaches).

        Args:
            y: the series on its grid (NaN where missing).
            p: the origin's position in ``y``.
            raw: the model's raw bound per level at ``p`` (NaN where none was made).
            scale: the series' scale at ``p`` (losses and offsets are in it).
            seasonal: the references' bounds at ``p`` that depend on the series only
                (a row per level, a column for the time of day, yesterday and last
                week), as :meth:`seasonal_columns` gives them for many origins at
                once; computed here when None.
        """
        mixed = self.mix(y, p, raw, scale, seasonal)
        returning = held_level(y, p, self._rule)
        return finish(mixed, self.levels, returning, snap=self.snap, min_level=self.min_level)

    def mix(
        self,
        y: FloatArray,
        p: int,
        raw: FloatArray,
        scale: float,
        seasonal: FloatArray | None = None,
    ) -> Mixed:
        """Learn from the origin realised at ``p``, then return ``p``'s mix before :func:`finish`.

        :meth:`step` is this and :func:`finish`; a benchmark varying only the snap or
        the held levels calls the two apart. Same arguments as :meth:`step`.
        """
        if self._last is not None and p != self._last + 1:
            raise ValueError(f"origins must be consecutive: {p} after {self._last}")
        self._last = p
        self._learn(y, p)
        level = float(y[p])
        offsets = np.array(
            [a.offset() if c else 0.0 for a, c in zip(self._aci, self._calibrates, strict=True)]
        )
        reference = self._reference(level)
        experts = self._bounds(y, p, raw, raw + offsets * scale, reference, seasonal)
        bounds = np.array([mix(experts[k], e.weights()) for k, e in enumerate(self._experts)])
        self._issued.append((p, raw, offsets, experts, scale))
        return Mixed(bounds, level, scale, reference)

    def seasonal_columns(self, y: FloatArray, start: int, count: int) -> FloatArray:
        """The seasonal references' bounds at origins ``start .. start + count - 1``.

        Shape ``(count, level, 3)``: the time-of-day reference's, yesterday's, then last
        week's; ``y`` is read up to the last origin only.
        """
        out = np.full((count, len(self.levels), 3), np.nan)
        values = np.asarray(y[: start + count], dtype=np.float64)
        out[:, :, 0] = time_of_day_columns(values, start, self._lags, self.lead, self.levels)
        levels = [float(q) for q in self.levels]
        for which, lag in enumerate(self._naive[:2]):
            columns = seasonal_naive_reference(values, lag, self.lead, self.day, levels)
            out[:, :, which + 1] = columns[start : start + count]
        return out

    def _bounds(
        self,
        y: FloatArray,
        p: int,
        raw: FloatArray,
        calibrated: FloatArray,
        reference: FloatArray,
        seasonal: FloatArray | None = None,
    ) -> FloatArray:
        """The chosen experts' bounds at ``p``: a row per level, a column per expert."""
        columns: list[FloatArray] = []
        for k in self._columns:
            name = EXPERTS[k]
            if name == "calibrated":
                columns.append(calibrated)
            elif name == "reference":
                columns.append(reference)
            elif name == "raw":
                columns.append(np.asarray(raw, dtype=np.float64))
            elif name == "time_of_day":
                if seasonal is not None:
                    columns.append(seasonal[:, 0])
                else:
                    columns.append(seasonal_bound(y, p, self._lags, self.lead, self.levels))
            else:
                which = 0 if name == "yesterday" else 1
                if seasonal is not None:
                    columns.append(seasonal[:, which + 1])
                else:
                    columns.append(self._seasonal(y, p, which))
        return np.column_stack(columns)

    def _seasonal(self, y: FloatArray, p: int, which: int) -> FloatArray:
        if which >= len(self._naive):  # a lead longer than the season: no such expert
            return np.full(len(self.levels), np.nan)
        return seasonal_naive_bound(y, p, self._naive[which], self.lead, self.day, self.levels)

    def _learn(self, y: FloatArray, p: int) -> None:
        if not self._issued or self._issued[0][0] != p - self.lead:
            return
        s, raw, offsets, experts, scale = self._issued.popleft()
        peak = float(np.max(y[s + 1 : p + 1]))
        for k, q in enumerate(self.levels):
            self._aci[k].learn((peak - raw[k]) / scale, float(offsets[k]))
            losses = pinball(np.full(len(self._columns), peak), experts[k], float(q)) / scale
            self._experts[k].observe(losses)
        if math.isfinite(peak - y[s]):
            self._headroom.append(peak - float(y[s]))

    def _reference(self, level: float) -> FloatArray:
        if len(self._headroom) < max(1, self.day // 2):
            return np.full(len(self.levels), np.nan)
        seen = np.fromiter(self._headroom, dtype=np.float64)
        return np.asarray(level + np.quantile(seen, self.levels), dtype=np.float64)


class Mixed(NamedTuple):
    """Experts' mixes with what :func:`finish` needs beside them.

    One origin (``bounds`` a row per level, the rest scalars) or many (``bounds`` and
    ``reference`` shaped ``(origin, level)``, the rest ``(origin,)``).
    """

    bounds: FloatArray
    """The mix per level (NaN where no expert has a bound)."""
    level: FloatArray | float
    """Demand at the origin."""
    scale: FloatArray | float
    """The series' scale at the origin."""
    reference: FloatArray
    """The trailing-day reference per level (NaN until it is known)."""


def finish(
    mixed: Mixed,
    levels: FloatArray,
    returning: FloatArray | float,
    *,
    snap: float = TUNED_SNAP,
    min_level: float = MIN_LEVEL,
) -> FloatArray:
    """Return the served bounds from the experts' mix, of one origin or many.

    Snapped to demand where the reference is at or below it
    (:func:`forecaster.peak.combine.snap_to_demand`), persistence where nothing is
    known, held at ``returning`` (the level demand had before an idle spell it has
    just come back from, NaN where the rule is silent) at the levels from
    ``min_level`` up, never below 0 and never crossing between levels.
    """
    bounds = np.asarray(mixed.bounds, dtype=np.float64)
    level = np.asarray(mixed.level, dtype=np.float64)[..., None]
    scale = np.asarray(mixed.scale, dtype=np.float64)[..., None]
    back = np.asarray(returning, dtype=np.float64)[..., None]
    out = snap_to_demand(bounds, level, scale, np.asarray(mixed.reference), snap)
    out = np.where(np.isfinite(out), out, level)  # nothing known: persistence
    held = (np.asarray(levels) >= min_level) & np.isfinite(back)
    out = np.where(held, np.fmax(out, back), out)
    return np.asarray(np.maximum.accumulate(np.maximum(out, 0.0), axis=-1), dtype=np.float64)


def steps_per_day(step: pd.Timedelta) -> int:
    """The grid's steps in a day (at least 1): the ``day`` :class:`OnlinePeak` takes."""
    return max(1, int(pd.Timedelta(days=1) / step))


def day_rule(day: int) -> ReturnRule:
    """The return-from-idle rule on a grid of ``day`` steps a day.

    The one place the rule is derived: :class:`OnlinePeak` holds its bound with it and
    :func:`~forecaster.peak.serving.serve_states` reports the level it held, so the two
    cannot disagree.
    """
    return ReturnRule.on_step(pd.Timedelta(days=1) / day)


def issue(
    state: OnlinePeak, y: FloatArray, start: int, raw: FloatArray, scale: FloatArray
) -> FloatArray:
    """Step ``state`` through the origins ``start, start + 1, ...`` and return their bounds.

    The one online loop: the forecast job
    (:func:`~forecaster.peak.serving.serve_states`) and the decision replay
    (``pipelines.simulate.peak``) both run it, so they issue the same bound from the
    same inputs.

    Args:
        state: a fresh state (or one last stepped at ``start - 1``).
        y: the series on its grid (NaN where missing).
        start: the first origin's position in ``y``.
        raw: the model's raw bounds, one row per origin from ``start`` on.
        scale: the scale per origin; one not finite or not positive (no forecast
            there) counts as 1.

    Returns:
        The bounds, one row per origin, a column per level.
    """
    out = np.empty((len(raw), len(state.levels)))
    seasonal = state.seasonal_columns(y, start, len(raw))
    for i, (row, s) in enumerate(zip(raw, scale, strict=True)):
        unit = float(s) if math.isfinite(s) and s > 0 else 1.0
        out[i] = state.step(y, start + i, row, unit, seasonal[i])
    return out
