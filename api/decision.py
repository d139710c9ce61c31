"""One pool's decision from the service's inputs, each checked to be this clock's (docs/api.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from api.clock import from_another_clock, warn_another_clock
from api.forecasts import ForecastCache, PoolForecast
from api.live import LiveIndex
from api.services import Services
from api.settings import ServiceSettings
from forecaster.exceptions import DataValidationError
from forecaster.unavailable import Unavailable
from pipelines.config.pools import PoolConfig
from policy.decide import decide
from policy.recommendation import Recommendation
from policy.state import StabilisationState
from policy.types import DemandForecast, ForecastHealth, LiveSignals

Warned = set[tuple[str, str, datetime]]
"""Inputs dated by another clock already logged: (pool, input, its time)."""


def clock_skew(settings: ServiceSettings) -> timedelta:
    """How far past now a stored time may lie and still be this clock's.

    The skew a pushed sample may carry (``service.max_sample_future_seconds``):
    replicas' clocks disagree that much, and a replica's replay clock lags the newest
    sample by up to one poll. Further ahead, a time was dated by another clock (see
    :func:`~api.clock.from_another_clock`).
    """
    return timedelta(seconds=settings.max_sample_future_seconds)


def forecast_health(
    settings: ServiceSettings,
    step: timedelta,
    error: float | None,
    error_at: datetime | None,
) -> ForecastHealth:
    """Return the health bounds of a pool whose series has ``step``, from the settings."""
    return ForecastHealth(
        recent_error=error,
        error_bound=settings.max_live_mase,
        max_live_age=settings.live_stale_steps * step,
        max_forecast_age=settings.forecast_stale_steps * step,
        error_at=error_at,
    )


def forecast_unusable(made: PoolForecast, now: datetime, skew: timedelta) -> Unavailable | None:
    """Why the pool's stored forecast cannot be shown as the one decisions use; None: it can."""
    forecast = made.forecast
    if forecast is None:
        return Unavailable("no_forecast", f"no demand forecast: {made.reason}")
    if from_another_clock(forecast.generated_at, now, skew):
        return Unavailable(
            "forecast_other_clock",
            f"no demand forecast: the newest stored one was made at "
            f"{forecast.generated_at.isoformat()}, after now ({now.isoformat()}), so another "
            "clock dated it and recommendations do not use it; see 'One clock' in docs/api.md",
        )
    return None


@dataclass(frozen=True)
class DecisionInputs:
    """What a pool's decisions read, shared by every decision of the service.

    Attributes:
        services: the app's services (settings, sources).
        forecasts: the stored forecasts of the served model.
        warned: the inputs from another clock already logged (mutated: logged once).
    """

    services: Services
    live: LiveIndex
    forecasts: ForecastCache
    warned: Warned


def decide_pool(
    inputs: DecisionInputs, pool: PoolConfig, now: datetime, state: StabilisationState
) -> Recommendation | Unavailable:
    """Decide for one pool at ``now`` from its state; why not when it cannot be decided."""
    live = _live_signals(inputs.live, pool)
    if isinstance(live, Unavailable):
        return live
    services = inputs.services
    made = inputs.forecasts.get(pool)
    forecast = _this_clocks_forecast(inputs, pool, made.forecast, now)
    if forecast is not None and services.settings.service.live_calibration:
        forecast = forecast.calibrated(services.calibration(pool, forecast.level))
    error, error_at = _this_clocks_error(inputs, pool, now)
    state = _this_clocks_state(inputs, pool, state, now)
    health = forecast_health(services.settings.service, made.step, error, error_at)
    return decide(pool, forecast, live, health, services.latency(pool, now), state, now)


def _live_signals(live: LiveIndex, pool: PoolConfig) -> LiveSignals | Unavailable:
    readings = live.readings(pool.name)
    try:
        signals = readings.live_signals()
    except DataValidationError as exc:
        # Stored by another writer (the push API checks its own): this pool cannot
        # be decided, the others still can.
        return Unavailable("invalid_samples", f"the live samples are invalid: {exc}")
    if signals is None:
        missing = ", ".join(readings.missing())
        return Unavailable(
            "no_live_samples", f"no live samples of {missing} yet; push them to /signals/metrics"
        )
    return signals


def _this_clocks_forecast(
    inputs: DecisionInputs, pool: PoolConfig, forecast: DemandForecast | None, now: datetime
) -> DemandForecast | None:
    skew = clock_skew(inputs.services.settings.service)
    if forecast is not None and from_another_clock(forecast.generated_at, now, skew):
        # Made after now: not by this clock (a forecast job on the wall clock while
        # this process replays). Its age would be negative and its data unknown.
        warn_another_clock(inputs.warned, pool.name, "forecast", forecast.generated_at, now)
        return None
    return forecast


def _this_clocks_error(
    inputs: DecisionInputs, pool: PoolConfig, now: datetime
) -> tuple[float | None, datetime | None]:
    error, error_at = inputs.services.live_error(pool, now)
    skew = clock_skew(inputs.services.settings.service)
    if error_at is not None and from_another_clock(error_at, now, skew):
        # Measured after now: by an evaluation on another clock; not this decision's.
        warn_another_clock(inputs.warned, pool.name, "live forecast error", error_at, now)
        return None, None
    return error, error_at


def _this_clocks_state(
    inputs: DecisionInputs, pool: PoolConfig, state: StabilisationState, now: datetime
) -> StabilisationState:
    last = state.last_decision_at
    skew = clock_skew(inputs.services.settings.service)
    if last is not None and from_another_clock(last, now, skew):
        # Kept, its timers would run backwards (a scale-down warming up for months);
        # starting afresh only delays the next scale-down by one window.
        warn_another_clock(inputs.warned, pool.name, "stabilisation state", last, now)
        return StabilisationState()
    return state
