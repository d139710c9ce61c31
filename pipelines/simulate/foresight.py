"""Foresight replayed: a replay forecaster's forecasts turned into nodes by the real scale policy.

Details: docs/simulate.md, "Notes from the code", `pipelines/simulate/foresight.py`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from pipelines.config.pools import PoolConfig
from pipelines.simulate.replay_forecast import PointForecast, ReplayForecaster
from pipelines.simulate.types import History
from policy.decide import decide as policy_decide
from policy.peak import PeakForecast
from policy.recommendation import Recommendation
from policy.state import StabilisationState
from policy.types import (
    NO_LATENCY,
    DemandForecast,
    ForecastHealth,
    LatencyAdjustment,
    LiveSignals,
    Sample,
)

DecideFn = Callable[
    [
        PoolConfig,
        DemandForecast | None,
        LiveSignals,
        ForecastHealth,
        LatencyAdjustment,
        StabilisationState,
        datetime,
    ],
    Recommendation,
]
"""The shape of :func:`policy.decide`."""

MODEL_VERSION: Final = "walk-forward"


class ForesightPolicy:
    """Foresight's decision at every replayed step, from walk-forward forecasts.

    Args:
        pool: the pool's configuration; its quantile, lead time, sizes, bounds, target
            utilisation and scale-down settings are what the real policy uses. Replay
            it with the same pool (``simulate(demand, pool, policy)``).
        forecaster: where the forecasts come from (:mod:`.replay_forecast`): the
            walk-forward champion, a pinned family, a reference, any new forecaster.
            Share one between policies replaying the same series (a quantile sweep) so
            the forecasts are computed once.
        refresh_every: steps between forecast refreshes (1: every step); in between,
            the last forecast is used, as a deployment serves its latest forecast.
        health: the health bounds; default: no live error bound, forecasts may be as
            old as the refresh interval plus a step.
        decide_fn: the decision function; :func:`policy.decide` unless a test
            wraps it.
    """

    def __init__(
        self,
        pool: PoolConfig,
        forecaster: ReplayForecaster,
        *,
        refresh_every: int = 1,
        health: ForecastHealth | None = None,
        decide_fn: DecideFn = policy_decide,
    ) -> None:
        if refresh_every < 1:
            raise ValueError(f"refresh_every must be >= 1, got {refresh_every}")
        self.pool = pool
        self.forecaster = forecaster
        self.refresh_every = refresh_every
        self.health = health
        self.decide_fn = decide_fn
        self.state = StabilisationState()
        self.terms: Counter[str] = Counter()
        """How often each term of the chain set the number (``forecast``, ``floor``...)."""
        self.last: Recommendation | None = None
        self._forecast: DemandForecast | None = None

    def reset(self) -> None:
        """Start a replay with an empty stabilisation state and no forecast."""
        self.state = StabilisationState()
        self.terms = Counter()
        self.last = None
        self._forecast = None

    def decide(self, history: History) -> int:
        """Return the nodes :func:`policy.decide` recommends at this step."""
        now = history.now.to_pydatetime()
        step = history.pool.step
        if self._forecast is None or history.t % self.refresh_every == 0:
            horizon = history.pool.lead_steps + self.refresh_every
            made = self.forecaster.forecast(history, horizon, (self.pool.quantile,))
            self._forecast = _as_demand_forecast(made, self.pool.quantile, step)
        live = LiveSignals(
            demand_gpus=Sample(history.wanted_now, now),
            ready_nodes=Sample(history.ready_now, now),
        )
        recommendation = self.decide_fn(
            self.pool,
            self._forecast,
            live,
            self.health or self._default_health(step),
            NO_LATENCY,
            self.state,
            now,
        )
        self.state = recommendation.state
        self.last = recommendation
        self.terms[recommendation.explanation.term] += 1
        return recommendation.desired_nodes

    def _default_health(self, step: timedelta) -> ForecastHealth:
        return ForecastHealth(
            recent_error=None,
            error_bound=float("inf"),
            max_live_age=step,
            max_forecast_age=step * self.refresh_every,
        )


def _as_demand_forecast(made: PointForecast, level: float, step: timedelta) -> DemandForecast:
    """The policy's forecast; a peak forecaster's also as the peak forecast it serves as."""
    peak = None
    if made.peak_lead is not None and made.last is not None:
        peak = PeakForecast(
            quantiles={q: float(values[0]) for q, values in made.quantiles.items()},
            origin=made.origin,
            last=made.last,
            lead=made.peak_lead * step,
            scale=made.scale,
        )
    return DemandForecast(
        timestamps=made.timestamps,
        quantiles={q: tuple(values.tolist()) for q, values in made.quantiles.items()},
        level=level,
        model_version=MODEL_VERSION,
        generated_at=made.origin,
        step=step,
        peak=peak,
        peak_missing="" if peak is not None else "the replayed forecaster gives none",
    )
