"""The pluggable forecaster of a replay: what the policy chain is fed at every step.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/replay_forecast.py`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from pipelines.simulate.types import FloatArray, History


@dataclass(frozen=True)
class PointForecast:
    """A forecast made at one step: the target times, the point path, the quantiles.

    Attributes:
        origin: the timestamp of the step the forecast was made at.
        timestamps: the ``horizon`` target times after ``origin``.
        quantiles: level -> values aligned with ``timestamps`` (clipped at 0).
        peak_lead: set when the quantiles are of the demand peak over this many steps
            (a flat path of the peak forecaster): the policy then provisions at it as
            it does a served peak forecast, without a utilisation margin.
        last: the demand at ``origin`` the peak's headroom is measured from.
        scale: the series' volatility at ``origin`` the peak model worked in (the unit
            of a pool's ``safety_margin``); None when the forecaster has none.
    """

    origin: datetime
    timestamps: tuple[datetime, ...]
    quantiles: dict[float, FloatArray]
    peak_lead: int | None = None
    last: float | None = None
    scale: float | None = None


class ReplayForecaster(Protocol):
    """Forecasts of a replayed demand series, made at each step from the past only."""

    def forecast(self, history: History, horizon: int, levels: Sequence[float]) -> PointForecast:
        """Return the forecast made at ``history``'s step for ``horizon`` steps.

        Called at steps in increasing order within a replay; a new replay starts at
        ``history.t == 0``. Every requested level must be a key of the quantiles.
        """
        ...
