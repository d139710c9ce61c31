"""Reference forecasts a user could script in an afternoon, the bar Foresight must clear.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/reference.py`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta
from typing import Literal, get_args

import numpy as np
import pandas as pd

from forecaster.exceptions import DataValidationError
from pipelines.config.pools import PoolConfig
from pipelines.simulate.foresight import ForesightPolicy
from pipelines.simulate.replay_forecast import PointForecast
from pipelines.simulate.types import FloatArray, History

Base = Literal["persistence", "seasonal_naive"]
"""The naive forecast under the margin."""

REFERENCE_BASES: tuple[Base, ...] = get_args(Base)


class ReferenceForecaster:
    """Naive forecast + ``k`` standard deviations of its recent errors.

    Args:
        base: ``persistence`` or ``seasonal_naive``.
        k: standard deviations of margin, >= 0.
        window: how far back the errors are measured.
        season: the seasonal naive's season.
        prehistory: demand before the replay (UTC index on the replay's step, ending one
            step before it), so the errors are known from the first step.
    """

    def __init__(
        self,
        base: Base = "persistence",
        k: float = 2.0,
        *,
        window: timedelta = timedelta(days=1),
        season: timedelta = timedelta(days=1),
        prehistory: pd.Series | None = None,
    ) -> None:
        if base not in REFERENCE_BASES:
            raise ValueError(f"base must be one of {REFERENCE_BASES}, got {base!r}")
        if not (math.isfinite(k) and k >= 0):
            raise ValueError(f"k must be a finite number >= 0, got {k}")
        if window <= timedelta(0) or season <= timedelta(0):
            raise ValueError("window and season must be positive")
        self.base = base
        self.k = k
        self.window = window
        self.season = season
        self.prehistory = prehistory
        self._pre: FloatArray = np.empty(0)

    @property
    def name(self) -> str:
        """A label such as ``persistence+2sd``."""
        return f"{self.base}+{self.k:g}sd"

    def forecast(self, history: History, horizon: int, levels: Sequence[float]) -> PointForecast:
        """Return ``naive path + k sd`` for every level, from steps ``<= t`` only."""
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        if history.t == 0:
            self._pre = self._prehistory(history)
        pool = history.pool
        lead = pool.lead_steps
        w = max(2, math.ceil(self.window / pool.step))
        if self.base == "persistence":
            recent = self._recent(history, w + lead)
            path = np.full(horizon, recent[-1])
            errors = recent[lead:] - recent[:-lead]
        else:
            s = max(1, math.ceil(self.season / pool.step))
            recent = self._recent(history, w + s)
            n = len(recent) - 1
            if n < s:
                path = np.full(horizon, recent[-1])  # less than a season seen: persistence
                errors = np.empty(0)
            else:
                # j steps ahead, one season back; past the observed end, the last value.
                back = np.minimum(np.arange(1, horizon + 1) + n - s, n)
                path = recent[back]
                errors = recent[s:] - recent[:-s]
        sd = float(errors.std()) if errors.size > 1 else 0.0
        values = np.maximum(path + self.k * sd, 0.0)
        origin = history.now.to_pydatetime()
        return PointForecast(
            origin=origin,
            timestamps=tuple(origin + pool.step * j for j in range(1, horizon + 1)),
            quantiles={float(level): values for level in levels},
        )

    def _recent(self, history: History, count: int) -> FloatArray:
        seen = history.demand[-count:]
        if len(seen) >= count or self._pre.size == 0:
            return np.asarray(seen, dtype=np.float64)
        return np.concatenate([self._pre[-(count - len(seen)) :], seen])

    def _prehistory(self, history: History) -> FloatArray:
        pre = self.prehistory
        if pre is None or len(pre) == 0:
            return np.empty(0)
        index = pd.DatetimeIndex(pre.index)
        if index.tz is None or index[-1] + history.pool.step != history.timestamps[0]:
            raise DataValidationError(
                "prehistory must be UTC-indexed and end one step before the replay starts "
                f"at {history.timestamps[0]}; it ends at {index[-1]}"
            )
        return pre.to_numpy(dtype=np.float64)


def reference_policy(
    pool: PoolConfig,
    base: Base = "persistence",
    k: float = 2.0,
    *,
    window: timedelta = timedelta(days=1),
    season: timedelta = timedelta(days=1),
    prehistory: pd.Series | None = None,
) -> ForesightPolicy:
    """The reference replayed through Foresight's policy chain with the pool's settings."""
    forecaster = ReferenceForecaster(base, k, window=window, season=season, prehistory=prehistory)
    return ForesightPolicy(pool, forecaster)
