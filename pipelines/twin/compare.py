"""The offline replay beside the twin: same trace, pool, settings, quantile and forecasts.

Details: docs/twin.md, "Notes from the code", `pipelines/twin/compare.py`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Final

import pandas as pd

from pipelines.config.pools import PoolConfig
from pipelines.simulate.result import SimResult
from pipelines.simulate.types import History
from pipelines.store.forecasts import GENERATED_AT
from pipelines.store.store import Store
from pipelines.store.stored_peak import stored_peak
from pipelines.twin.cluster import Published
from policy.decide import decide
from policy.state import StabilisationState
from policy.types import NO_LATENCY, DemandForecast, ForecastHealth, LiveSignals, Sample

FIGURES: Final = (
    "waiting_gpu_hours",
    "node_hours",
    "gpu_hours_provisioned",
    "scale_ups",
    "scale_downs",
    "nodes_added",
    "nodes_removed",
    "p95_wait_minutes",
)
"""The figures put side by side."""


class StoredRunPolicy:
    """The replay policy deciding from the forecast runs stored at each step.

    Args:
        pool: the pool (quantile, lead, sizes, bounds, scale-down).
        store: the store the twin's forecast job wrote.
        versions: the model version of the run made at each step (the twin's log).
        initial: the stabilisation state the service held before the first step (it
            decides from the stored history as soon as it starts); default empty.
    """

    def __init__(
        self,
        pool: PoolConfig,
        store: Store,
        versions: Mapping[pd.Timestamp, str],
        initial: StabilisationState | None = None,
    ) -> None:
        self.pool = pool
        self.initial = initial or StabilisationState()
        self.versions = dict(versions)
        sid = pool.series_id("demand_gpus")
        self._rows = store.forecasts.read([sid])
        self._peaks = store.peak_forecasts.read([sid])
        self.state = self.initial
        self.decisions: dict[pd.Timestamp, int] = {}
        self.stages: dict[pd.Timestamp, dict[str, int]] = {}

    def reset(self) -> None:
        """Start from the initial stabilisation state."""
        self.state = self.initial
        self.decisions = {}
        self.stages = {}

    def decide(self, history: History) -> int:
        """Return what :func:`policy.decide` recommends from the step's stored run."""
        return self.publish(history).desired_nodes

    def publish(self, history: History) -> Published:
        """The step's recommendation as a consumer acts on it: nodes and placeholder pods."""
        now = history.now.to_pydatetime()
        step = history.pool.step
        forecast = self._forecast(history.now, step)
        live = LiveSignals(
            demand_gpus=Sample(history.wanted_now, now),
            ready_nodes=Sample(history.ready_now, now),
        )
        # Fresh inputs at every step and no live error measured: healthy, as in the twin.
        health = ForecastHealth(
            recent_error=None,
            error_bound=math.inf,
            max_live_age=2 * step,
            max_forecast_age=2 * step,
        )
        made = decide(self.pool, forecast, live, health, NO_LATENCY, self.state, now)
        self.state = made.state
        self.decisions[history.now] = made.desired_nodes
        stages = made.explanation.stages
        self.stages[history.now] = {k: v for k, v in vars(stages).items() if isinstance(v, int)}
        return Published(made.desired_nodes, made.headroom_pods)

    def _forecast(self, ts: pd.Timestamp, step: timedelta) -> DemandForecast | None:
        version = self.versions.get(ts)
        if version is None:
            return None
        rows = self._rows[
            (self._rows[GENERATED_AT] == ts) & (self._rows["model_version"] == version)
        ]
        if rows.empty:
            return None
        at = ts.to_pydatetime()
        made = DemandForecast.from_frame(
            rows, level=self.pool.quantile, model_version=version, generated_at=at, step=step
        )
        peaks = self._peaks[
            (self._peaks[GENERATED_AT] == ts) & (self._peaks["model_version"] == version)
        ]
        # The same rows -> bound as the service (api.forecasts): what serves is replayed.
        peak, missing = stored_peak(peaks, self.pool.lead_time, step, self.pool.quantile)
        return DemandForecast(
            made.timestamps,
            made.quantiles,
            made.level,
            made.model_version,
            made.generated_at,
            made.step,
            peak=peak,
            peak_missing=missing,
        )


def compare(twin: SimResult, replay: SimResult) -> list[dict[str, float | str]]:
    """The figures of both runs and the twin's relative difference to the replay."""
    left, right = twin.summary(), replay.summary()
    rows: list[dict[str, float | str]] = []
    for name in FIGURES:
        a, b = float(left[name]), float(right[name])
        rel = 0.0 if a == b else (a - b) / b if b else math.inf
        rows.append({"figure": name, "twin": a, "replay": b, "relative_difference": rel})
    return rows


def agreement(twin_desired: pd.Series, replay_desired: pd.Series) -> float:
    """The share of steps at which the twin's service and the replay desired the same nodes."""
    joined = pd.concat([twin_desired, replay_desired], axis=1, join="inner").dropna()
    if joined.empty:
        return math.nan
    return float((joined.iloc[:, 0] == joined.iloc[:, 1]).mean())
