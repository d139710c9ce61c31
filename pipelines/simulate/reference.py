"""Reference policies a user could script in an afternoon, the bar Foresight must clear.

Each step: a naive forecast of the demand over the lead time, plus ``k`` standard
deviations of that forecast's recent errors, in whole nodes, never below the work
wanted now (the reactive floor). No stabilisation: the count follows the formula.

- ``persistence``: the forecast is the demand now; its errors are the recent
  lead-time changes ``y_s - y_{s-L}``.
- ``seasonal_naive``: the forecast is the peak of the demand one season (a day)
  before each step of the lead time; its errors are ``y_s - y_{s-season}``.

Like every policy, they see :class:`~pipelines.simulate.types.History` only (and an
optional prehistory ending before the replay).
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Literal, get_args

import numpy as np
import pandas as pd

from api.policy.need import ceil_nodes
from forecaster.exceptions import DataValidationError
from pipelines.simulate.types import History

Base = Literal["persistence", "seasonal_naive"]
"""The naive forecast under the margin."""


class ReferencePolicy:
    """Naive forecast + ``k`` standard deviations of its recent errors, reactive floor.

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
        if base not in get_args(Base):
            raise ValueError(f"base must be one of {get_args(Base)}, got {base!r}")
        if not (math.isfinite(k) and k >= 0):
            raise ValueError(f"k must be a finite number >= 0, got {k}")
        if window <= timedelta(0) or season <= timedelta(0):
            raise ValueError("window and season must be positive")
        self.base = base
        self.k = k
        self.window = window
        self.season = season
        self.prehistory = prehistory
        self._values: list[float] = []

    @property
    def name(self) -> str:
        """A label such as ``persistence+2.0sd``."""
        return f"{self.base}+{self.k:g}sd"

    def reset(self) -> None:
        """Forget the observed demand."""
        self._values = []

    def decide(self, history: History) -> int:
        """Return ``max(ceil((forecast + k sd) / gpus_per_node), floor)``."""
        if history.t == 0:
            self._values = self._prehistory(history)
        self._values.append(float(history.demand[-1]))
        pool = history.pool
        lead = pool.lead_steps
        w = max(2, math.ceil(self.window / pool.step))
        floor = ceil_nodes(history.wanted_now / pool.gpus_per_node)
        if self.base == "persistence":
            recent = np.asarray(self._values[-(w + lead) :])
            forecast = recent[-1]
            errors = recent[lead:] - recent[:-lead]
        else:
            s = max(1, math.ceil(self.season / pool.step))
            recent = np.asarray(self._values[-(w + s) :])
            if len(recent) <= s:
                return floor  # less than a season seen: nothing to repeat yet
            n = len(recent) - 1
            # Steps 1..lead+1 ahead, one season back: all observed since s > lead here.
            back = [n + j - s for j in range(1, lead + 2) if n + j - s <= n]
            forecast = float(recent[back].max()) if back else recent[-1]
            errors = recent[s:] - recent[:-s]
        sd = float(errors.std()) if errors.size > 1 else 0.0
        return max(ceil_nodes((forecast + self.k * sd) / pool.gpus_per_node), floor)

    def _prehistory(self, history: History) -> list[float]:
        pre = self.prehistory
        if pre is None or len(pre) == 0:
            return []
        index = pd.DatetimeIndex(pre.index)
        if index.tz is None or index[-1] + history.pool.step != history.timestamps[0]:
            raise DataValidationError(
                "prehistory must be UTC-indexed and end one step before the replay starts "
                f"at {history.timestamps[0]}; it ends at {index[-1]}"
            )
        return [float(v) for v in pre.to_numpy(dtype=np.float64)]
