"""The peak-quantile forecaster replayed: quantiles of the lead-time peak, from the past only.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/peak.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import pandas as pd

from forecaster.exceptions import DataValidationError, InsufficientHistoryError
from forecaster.peak.calibration import MIN_EXPECTED_MISSES, TUNED_GAMMA
from forecaster.peak.combine import TUNED_ETA, TUNED_HALFLIFE, TUNED_SNAP
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.peak.online import WARMUP, OnlinePeak, anchor, issue, steps_per_day
from forecaster.peak.recovery import MIN_LEVEL
from forecaster.peak.types import SCALE
from forecaster.types import DS, UID, SeriesId, Y, quantile_column
from pipelines.simulate.replay_forecast import PointForecast
from pipelines.simulate.types import FloatArray, History

PEAK = "peak"
"""The replay's name for this forecaster (``--model peak``)."""
DAY = pd.Timedelta(days=1)
ModelCache = dict[tuple[int, pd.Timestamp, tuple[float, ...]], PeakQuantileForecaster | None]
"""Daily fits by ``(lead, midnight, levels)``; None where there was too little history."""
_TOLERANCE = 1e-6


class PeakReplayForecaster:
    """Lead-time peak quantiles of one replayed series from a global model of its fleet.

    Args:
        fleet: long frame ``unique_id, ds, y`` (UTC, one regular step equal to the
            replay's) holding ``target`` and whatever the model learns from; rows after
            the replay's current step are never read.
        target: the replayed series' id, ``<pool>/<signal>``, whose values must equal
            the replayed demand.
        levels: the quantile levels a replay may ask for (one model per level is fitted).
        params: keyword arguments of :class:`forecaster.peak.PeakQuantileForecaster`.
        warmup: history before each day the online state learns on.
        eta: combination sharpness.
        halflife: combination loss half-life, in steps.
        min_misses: misses a level must expect over ACI's window to be calibrated (0:
            every level; see :func:`forecaster.peak.calibration.calibrates`).
        gamma: ACI's step size.
        snap: the snap to demand (:class:`forecaster.peak.online.OnlinePeak`).
        min_level: the lowest level held at the level demand returns to after an idle
            spell (:mod:`forecaster.peak.recovery`).
        models: a cache of daily fits to share between forecasters of the same fleet
            (the pools of one fleet share one global model per day).
    """

    def __init__(
        self,
        fleet: pd.DataFrame,
        target: str,
        levels: Sequence[float],
        *,
        params: Mapping[str, Any] | None = None,
        warmup: timedelta = WARMUP,
        eta: float = TUNED_ETA,
        halflife: float = TUNED_HALFLIFE,
        min_misses: float = MIN_EXPECTED_MISSES,
        gamma: float = TUNED_GAMMA,
        snap: float = TUNED_SNAP,
        min_level: float = MIN_LEVEL,
        models: ModelCache | None = None,
    ) -> None:
        missing = [c for c in (UID, DS, Y) if c not in fleet.columns]
        if missing:
            raise DataValidationError(f"the fleet frame lacks columns {missing}")
        rows = fleet[fleet[UID] == target].sort_values(DS)
        if rows.empty:
            raise DataValidationError(
                f"the fleet frame has no series {target!r}; pass the replayed series' id"
            )
        self.levels = sorted({float(q) for q in levels})
        if not self.levels or not all(0.0 < q < 1.0 for q in self.levels):
            raise ValueError(f"levels must be in (0, 1), got {levels}")
        self.fleet = fleet
        self.target = target
        self.params = dict(params or {})
        self.warmup = pd.Timedelta(warmup)
        self.eta = eta
        self.halflife = halflife
        self.min_misses = min_misses
        self.gamma = gamma
        self.snap = snap
        self.min_level = min_level
        self._ds = pd.DatetimeIndex(rows[DS])
        self._y = rows[Y].to_numpy(dtype=np.float64)
        self._step = pd.Timedelta(self._ds[1] - self._ds[0])
        self._day = steps_per_day(self._step)
        self._raw: dict[tuple[int, pd.Timestamp], tuple[FloatArray, FloatArray]] = {}
        self._models: ModelCache = {} if models is None else models
        self._issued: dict[tuple[int, int], FloatArray] = {}
        self.fit_log: list[pd.Timestamp] = []

    def forecast(self, history: History, horizon: int, levels: Sequence[float]) -> PointForecast:
        """Return the ``levels`` quantiles of the lead-time peak as a flat ``horizon``-step path."""
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        unknown = sorted({float(q) for q in levels} - set(self.levels))
        if unknown:
            raise ValueError(f"levels {unknown} were not fitted; construct with them")
        now = history.now
        position = self._position(now)
        observed = float(history.demand[-1])
        if abs(self._y[position] - observed) > _TOLERANCE * max(1.0, abs(observed)):
            raise DataValidationError(
                f"the fleet's {self.target!r} is {self._y[position]} at {now}, the replay's "
                f"demand {observed}: give the forecaster the replayed series' own fleet"
            )
        lead = max(1, min(horizon, history.pool.lead_steps))
        bounds = self._bounds(position, lead)
        raw, unit = self._raw_bounds(position, lead)
        values = dict(zip(self.levels, bounds, strict=True))
        origin = now.to_pydatetime()
        return PointForecast(
            origin=origin,
            timestamps=tuple(origin + self._step * j for j in range(1, horizon + 1)),
            quantiles={float(q): np.full(horizon, values[float(q)]) for q in levels},
            peak_lead=lead,
            last=observed,
            scale=unit if np.isfinite(raw).any() and np.isfinite(unit) and unit > 0 else None,
        )

    # -- online state ----------------------------------------------------------------

    def _bounds(self, position: int, lead: int) -> FloatArray:
        """The bounds issued at ``position``: the online state rebuilt at its anchor."""
        key = (lead, position)
        if key not in self._issued:
            start = int(self._ds.searchsorted(anchor(self._ds[position], self.warmup)))
            state = OnlinePeak(
                self.levels,
                lead,
                self._day,
                eta=self.eta,
                halflife=self.halflife,
                min_misses=self.min_misses,
                gamma=self.gamma,
                snap=self.snap,
                min_level=self.min_level,
            )
            midnight = self._ds[position].floor("D")
            day_start = int(self._ds.searchsorted(midnight))
            day_end = int(self._ds.searchsorted(midnight + DAY))
            made = [self._raw_bounds(p, lead) for p in range(start, day_end)]
            raw = np.array([bounds for bounds, _ in made]).reshape(len(made), len(self.levels))
            scale = np.array([unit for _, unit in made])
            issued = issue(state, self._y, start, raw, scale)
            # The warmup's own bounds are its day's state's: only the day's are kept.
            for p in range(day_start, day_end):
                self._issued[(lead, p)] = issued[p - start]
        return self._issued[key]

    # -- daily fits --------------------------------------------------------------------

    def _raw_bounds(self, p: int, horizon: int) -> tuple[FloatArray, float]:
        """The model's raw bounds and scale at position ``p`` (NaN before any fit)."""
        ts = self._ds[p]
        cutoff = self._cutoff(ts)
        key = (horizon, cutoff)
        if key not in self._raw:
            self._raw[key] = self._fit_day(cutoff, horizon)
        bounds, scales = self._raw[key]
        row = int((ts - cutoff) / self._step)
        if row >= len(scales):
            return np.full(len(self.levels), np.nan), 1.0
        return bounds[row], float(scales[row])

    def _cutoff(self, ts: pd.Timestamp) -> pd.Timestamp:
        return pd.Timestamp(ts).floor("D")

    def _fit_day(self, cutoff: pd.Timestamp, horizon: int) -> tuple[FloatArray, FloatArray]:
        """Forecast the target's origins of the day starting at ``cutoff``."""
        model = self._model(cutoff, horizon)
        if model is None:
            return np.empty((0, len(self.levels))), np.empty(0)
        frame = self.fleet
        pool = SeriesId.of(self.target).pool
        upto = frame[(frame[DS] < cutoff + DAY) & (SeriesId.split(frame[UID])[0] == pool)]
        pred = model.predict_peak(upto, since=cutoff)
        pred = pred[pred[UID] == self.target].sort_values(DS)
        expected = self._ds[(self._ds >= cutoff) & (self._ds < cutoff + DAY)]
        pred = pred.set_index(DS).reindex(expected)
        columns = [quantile_column(q) for q in self.levels]
        return pred[columns].to_numpy(dtype=np.float64), pred[SCALE].to_numpy(dtype=np.float64)

    def _model(self, cutoff: pd.Timestamp, horizon: int) -> PeakQuantileForecaster | None:
        """The fleet's model fitted on rows before ``cutoff`` (shared through the cache)."""
        key = (horizon, cutoff, tuple(self.levels))
        if key not in self._models:
            model = PeakQuantileForecaster(
                lead_steps=(horizon,), quantiles=self.levels, **self.params
            )
            past = self.fleet[self.fleet[DS] < cutoff]
            target_rows = int((past[UID] == self.target).sum())
            try:
                self._models[key] = model.fit(past) if target_rows > horizon else None
            except InsufficientHistoryError:
                self._models[key] = None
        if self._models[key] is not None:
            self.fit_log.append(cutoff)
        return self._models[key]

    def _position(self, now: pd.Timestamp) -> int:
        position = int(self._ds.searchsorted(now))
        if position >= len(self._ds) or self._ds[position] != now:
            raise DataValidationError(
                f"the fleet's {self.target!r} has no value at {now}: put the fleet on the "
                "replay's step and span"
            )
        return position
