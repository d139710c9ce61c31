"""The policy's inputs and shared names: frozen values, checked once when built.

Timestamps must be timezone-aware (ValueError); demand, nodes and forecast values finite
and non-negative (DataValidationError).
Details: docs/policy.md, "Notes from the code", `policy/types.py`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, Literal

import pandas as pd

from forecaster.exceptions import DataValidationError
from forecaster.types import DS, quantile_column, quantile_levels

if TYPE_CHECKING:
    from policy.peak import PeakForecast

Action = Literal["scale_up", "hold", "scale_down"]
"""What the recommendation asks of the node group."""

Mode = Literal["predictive", "reactive"]
"""Predictive: the forecast counts. Reactive: only what is demanded right now counts."""

Term = Literal["forecast", "floor", "latency", "bounds", "stabilisation", "reactive"]
"""The step of the chain that set the final number."""

HealthReason = Literal["no_forecast", "forecast_short", "stale_forecast", "stale_live", "error"]
"""Why the forecast was not trusted (several may hold at once)."""

DEFAULT_VALIDITY: Final = timedelta(minutes=1)
"""How long a recommendation holds when no forecast step says otherwise."""


def require_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` if it carries a timezone.

    Raises:
        ValueError: ``value`` is naive; the message names it and the fix.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{name} must be timezone-aware, got naive {value.isoformat()}; "
            "use datetime.now(timezone.utc) or attach tzinfo"
        )
    return value


def _require_count(value: float, name: str) -> None:
    if not math.isfinite(value) or value < 0:
        raise DataValidationError(f"{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class Sample:
    """One live reading and when it was taken."""

    value: float
    at: datetime

    def __post_init__(self) -> None:
        require_aware(self.at, "Sample.at")
        # Integers from a push API would otherwise leak into the JSON as a mix of types.
        object.__setattr__(self, "value", float(self.value))


@dataclass(frozen=True)
class LiveSignals:
    """What the pool looks like right now.

    Attributes:
        demand_gpus: GPUs demanded now, allocated plus queued.
        gpu_util: mean GPU utilisation (0-100), reported only; None when unknown.
    """

    demand_gpus: Sample
    ready_nodes: Sample
    gpu_util: Sample | None = None

    def __post_init__(self) -> None:
        _require_count(self.demand_gpus.value, "live demand_gpus")
        _require_count(self.ready_nodes.value, "live ready_nodes")
        if self.gpu_util is not None and not math.isfinite(self.gpu_util.value):
            raise DataValidationError(f"live gpu_util must be finite, got {self.gpu_util.value}")

    @property
    def current_nodes(self) -> int:
        """Ready nodes as a whole number (a mean of samples is rounded to the nearest)."""
        return round(self.ready_nodes.value)

    def oldest(self) -> datetime:
        """Return the time of the oldest reading the decision depends on."""
        # gpu_util is reported, never decided on, so its age does not gate the forecast.
        return min(self.demand_gpus.at, self.ready_nodes.at)


@dataclass(frozen=True)
class Calibration:
    """Online calibration of a pool's quantile, as the evaluate job last measured it.

    Attributes:
        offset: GPUs added to the quantile forecast (adaptive conformal inference over
            the realised forecasts; negative when the bounds covered too often).
        live_coverage: how often the raw bounds covered the actuals.
        forecasts: how many realised forecasts that was measured on.
    """

    offset: float
    live_coverage: float
    forecasts: int

    def __post_init__(self) -> None:
        if not math.isfinite(self.offset) or self.forecasts < 1:
            raise DataValidationError(
                f"a calibration needs a finite offset and at least one forecast; got "
                f"{self.offset} over {self.forecasts}"
            )


@dataclass(frozen=True)
class DemandForecast:
    """Quantile forecasts of ``<pool>/demand_gpus``.

    Attributes:
        timestamps: the forecast times, strictly increasing, timezone-aware.
        quantiles: quantile level -> values aligned with ``timestamps``.
        level: the quantile level the policy provisions for; a key of ``quantiles``.
        step: the series step (spacing of ``timestamps``).
        calibration: the online calibration already added to the ``level`` quantile
            (see :meth:`calibrated`); None when the values are the model's own.
        peak: quantiles of the demand peak over the lead time, made with the same
            forecast; the policy provisions at it (see :mod:`policy.need`). None
            when the model version has none for the pool.
        peak_missing: why ``peak`` is None, for the explanation; empty otherwise.
    """

    timestamps: tuple[datetime, ...]
    quantiles: Mapping[float, tuple[float, ...]]
    level: float
    model_version: str
    generated_at: datetime
    step: timedelta
    calibration: Calibration | None = None
    peak: PeakForecast | None = None
    peak_missing: str = ""

    def __post_init__(self) -> None:
        require_aware(self.generated_at, "DemandForecast.generated_at")
        for ts in self.timestamps:
            require_aware(ts, "DemandForecast.timestamps")
        if any(b <= a for a, b in zip(self.timestamps, self.timestamps[1:], strict=False)):
            raise DataValidationError("forecast timestamps must be strictly increasing")
        if self.step <= timedelta(0):
            raise DataValidationError(f"forecast step must be positive, got {self.step}")
        if self.level not in self.quantiles:
            raise DataValidationError(
                f"forecast has no quantile {self.level}; it has "
                f"{sorted(self.quantiles)}; forecast the pool's quantile or change the pool's "
                "quantile to one the model predicts"
            )
        frozen: dict[float, tuple[float, ...]] = {}
        for level, values in self.quantiles.items():
            column = quantile_column(level)
            if len(values) != len(self.timestamps):
                raise DataValidationError(
                    f"forecast {column} has {len(values)} values for "
                    f"{len(self.timestamps)} timestamps; give one value per timestamp"
                )
            if not all(math.isfinite(v) for v in values):
                raise DataValidationError(f"forecast {column} holds NaN or infinite values")
            frozen[float(level)] = tuple(float(v) for v in values)
        # A read-only view keeps the frozen dataclass honest about its mapping field.
        object.__setattr__(self, "quantiles", MappingProxyType(frozen))
        if self.peak is not None and self.level not in self.peak.quantiles:
            raise DataValidationError(
                f"the peak forecast has no quantile {self.level}; it has "
                f"{sorted(self.peak.quantiles)}"
            )

    def calibrated(self, calibration: Calibration | None) -> DemandForecast:
        """Return the forecast with ``calibration``'s offset added to the ``level`` quantile.

        Values stay at or above 0 (demand is), the other levels are unchanged, and a
        forecast already calibrated is not calibrated twice. The peak forecast's
        ``level`` quantile gets the same offset only when it was stored as the model made
        it; a peak the forecast job calibrated online (``peak.raw`` set) is kept as it is.

        Raises:
            ValueError: the forecast is already calibrated.
        """
        if calibration is None:
            return self
        if self.calibration is not None:
            raise ValueError("this forecast is already calibrated; calibrate the model's own")
        values = tuple(max(0.0, v + calibration.offset) for v in self.quantiles[self.level])
        peak = None if self.peak is None else self.peak.calibrated(self.level, calibration)
        return replace(
            self,
            quantiles={**self.quantiles, self.level: values},
            calibration=calibration,
            peak=peak,
        )

    @property
    def end(self) -> datetime | None:
        """The last forecast time, None for an empty forecast."""
        return self.timestamps[-1] if self.timestamps else None

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        level: float,
        model_version: str,
        generated_at: datetime,
        step: timedelta,
    ) -> DemandForecast:
        """Build from a forecast frame of one series (``ds`` plus ``q<level>`` columns).

        Raises:
            DataValidationError: ``ds`` or the column of ``level`` is missing.
        """
        wanted = quantile_column(level)
        if DS not in frame.columns or wanted not in frame.columns:
            raise DataValidationError(
                f"forecast frame needs columns {DS!r} and {wanted!r}; it has {list(frame.columns)}"
            )
        ordered = frame.sort_values(DS)
        stamps = tuple(pd.Timestamp(ts).to_pydatetime() for ts in ordered[DS])
        levels = {
            level: tuple(float(v) for v in ordered[quantile_column(level)])
            for level in quantile_levels(ordered.columns)
        }
        return cls(stamps, levels, level, model_version, generated_at, step)


@dataclass(frozen=True)
class ForecastHealth:
    """How far the forecast may be trusted, and the bounds that decide it.

    Attributes:
        recent_error: the recent live error of the forecast (MASE by default); None
            (or NaN) when not yet measured, which counts as healthy: a model that just
            passed the promotion gate has no live record yet.
        error_bound: the largest ``recent_error`` still trusted.
        max_live_age: live readings older than this make the data stale.
        max_forecast_age: forecasts older than this are stale.
        error_metric: the name of the error measure, for the explanation.
        error_at: when ``recent_error`` was measured, None when unknown.
    """

    recent_error: float | None
    error_bound: float
    max_live_age: timedelta
    max_forecast_age: timedelta
    error_metric: str = "mase"
    error_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.error_at is not None:
            require_aware(self.error_at, "ForecastHealth.error_at")
        if not self.error_bound > 0:
            raise ValueError(f"error_bound must be > 0, got {self.error_bound}")
        if self.max_live_age <= timedelta(0) or self.max_forecast_age <= timedelta(0):
            raise ValueError("max_live_age and max_forecast_age must be positive")

    @property
    def measured_error(self) -> float | None:
        """The recent error if it is a real number, else None."""
        if self.recent_error is None or math.isnan(self.recent_error):
            return None
        return self.recent_error


@dataclass(frozen=True)
class LatencyAdjustment:
    """Extra nodes asked for by call-chain latency analysis.

    Attributes:
        extra_nodes: nodes to add for latency, >= 0.
        reason: why, in words (the bottleneck services and their excess).
        not_gpu_bound: the pool's GPUs idle while its services are slow; more GPU nodes
            would not help, so ``extra_nodes`` is not applied.
        services: the pool's services that asked for the nodes, for the explanation
            (it keeps naming them while stabilisation holds the nodes they added).
        outside: services on no GPU pool, blamed for the latency of this pool's call
            chains: GPU nodes would not help, so the summary names them.
    """

    extra_nodes: int = 0
    reason: str = ""
    not_gpu_bound: bool = False
    services: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.extra_nodes < 0:
            raise ValueError(f"extra_nodes must be >= 0, got {self.extra_nodes}")


NO_LATENCY: Final = LatencyAdjustment()
"""No call-chain adjustment."""


def iso_utc(value: datetime | None) -> str | None:
    """Return ``value`` as ISO 8601 in UTC with a ``Z`` suffix, None stays None."""
    if value is None:
        return None
    utc = require_aware(value, "timestamp").astimezone(UTC)
    return utc.isoformat().replace("+00:00", "Z")
