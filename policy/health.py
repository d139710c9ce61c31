"""Forecast health: when the forecast is not to be trusted, decide reactively.

A live error never measured counts as healthy: a just-promoted model has no live record.
Details: docs/policy.md, "Notes from the code", `policy/health.py`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from policy.need import window_end
from policy.types import (
    DemandForecast,
    ForecastHealth,
    HealthReason,
    LiveSignals,
    Mode,
    require_aware,
)


@dataclass(frozen=True)
class HealthVerdict:
    """Whether the forecast may set the number, and why not.

    Attributes:
        mode: ``predictive`` when every check passed, else ``reactive``.
        reasons: the failed checks, in the order listed in docs/policy.md.
        detail: one sentence per failed check with the values that failed it.
    """

    mode: Mode
    reasons: tuple[HealthReason, ...]
    detail: str


def _seconds(delta: timedelta) -> str:
    return f"{delta.total_seconds():.0f} s"


def covers_window(forecast: DemandForecast, now: datetime, lead_time: timedelta) -> bool:
    """Return True when the forecast covers the lead time.

    A peak forecast covers it when its window is at least the lead time long (it is
    carried over to the newest demand, and its age is the staleness check's); the
    per-horizon forecasts when they reach ``now + lead_time`` with a point in the window.
    """
    if forecast.peak is not None and forecast.peak.lead >= lead_time:
        return True
    end = forecast.end
    if end is None or end < now + lead_time:
        return False
    last = window_end(now, lead_time, forecast.step)
    return any(now <= ts <= last for ts in forecast.timestamps)


def assess_health(
    forecast: DemandForecast | None,
    live: LiveSignals,
    health: ForecastHealth,
    lead_time: timedelta,
    now: datetime,
) -> HealthVerdict:
    """Check the forecast and the live data against the health bounds.

    Args:
        forecast: the pool's demand forecast, None when there is no model or forecast.
        now: the decision time (timezone-aware).
    """
    require_aware(now, "now")
    reasons: list[HealthReason] = []
    details: list[str] = []
    if forecast is None:
        reasons.append("no_forecast")
        details.append("no forecast exists for the pool")
    else:
        age = now - forecast.generated_at
        if age > health.max_forecast_age:
            reasons.append("stale_forecast")
            details.append(
                f"the forecast is {_seconds(age)} old, past the {_seconds(health.max_forecast_age)}"
                " bound"
            )
        if not covers_window(forecast, now, lead_time):
            reasons.append("forecast_short")
            reach = "nothing" if forecast.end is None else forecast.end.isoformat()
            details.append(
                f"the forecast reaches {reach}, short of now + lead time "
                f"{(now + lead_time).isoformat()}"
            )
    live_age = now - live.oldest()
    if live_age > health.max_live_age:
        reasons.append("stale_live")
        details.append(
            f"the live data is {_seconds(live_age)} old, past the "
            f"{_seconds(health.max_live_age)} bound"
        )
    error = health.measured_error
    if error is not None and error > health.error_bound:
        reasons.append("error")
        details.append(
            f"the recent {health.error_metric} is {error:.3g}, past the bound "
            f"{health.error_bound:.3g}"
        )
    if not reasons:
        return HealthVerdict("predictive", (), _healthy_sentence(health))
    return HealthVerdict("reactive", tuple(reasons), "; ".join(details))


def _healthy_sentence(health: ForecastHealth) -> str:
    # "Accurate" only when the live error was measured: a new model has no record yet.
    error = health.measured_error
    if error is None:
        return (
            "the forecast is fresh and covers the window; its live error is not "
            f"measured yet (the {health.error_metric} needs forecasts that have come due)"
        )
    return (
        f"the forecast is fresh, covers the window and its recent {health.error_metric} "
        f"{error:.3g} is within the bound {health.error_bound:.3g}"
    )
