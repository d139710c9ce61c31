"""The forecast quantiles of the demand peak over the lead time, as the policy takes them.

Details: docs/policy.md, "Notes from the code", `policy/peak.py`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import MappingProxyType

from forecaster.exceptions import DataValidationError
from policy.types import Calibration, Sample, require_aware


@dataclass(frozen=True)
class PeakForecast:
    """Quantiles of the pool's demand peak over ``lead`` after ``origin``.

    Attributes:
        quantiles: level -> the peak's quantile, in GPUs.
        origin: the observation the forecast is made from.
        last: the demand at ``origin``, in GPUs (``q - last`` is the headroom).
        lead: the window the peak is over: ``(origin, origin + lead]``.
        made_at: the origin of the stored forecast, when :meth:`rebased` moved the
            bound to newer demand; None when it is the stored forecast as made.
        calibration: the evaluate job's live calibration added to the provisioned
            level (only for a forecast stored without ``raw``: see :meth:`calibrated`).
        raw: the model's own quantiles when ``quantiles`` are the served bounds the
            forecast job calibrated and combined online (:mod:`forecaster.peak.online`);
            None for a forecast stored as the model made it.
        returning: the level demand had before an idle spell it had just come back
            from at the origin, which the quantiles from the median up were held at or
            above (:mod:`forecaster.peak.recovery`); None when they were not.
        scale: the series' recent volatility at the origin, in GPUs (the peak model's
            scale, :mod:`forecaster.peak.scale`): the unit of a pool's
            ``safety_margin``; None when the forecast does not carry it.
    """

    quantiles: Mapping[float, float]
    origin: datetime
    last: float
    lead: timedelta
    made_at: datetime | None = None
    calibration: Calibration | None = None
    raw: Mapping[float, float] | None = None
    returning: float | None = None
    scale: float | None = None

    def __post_init__(self) -> None:
        require_aware(self.origin, "PeakForecast.origin")
        if self.lead <= timedelta(0):
            raise DataValidationError(f"a peak forecast's lead must be positive, got {self.lead}")
        values = {float(q): float(v) for q, v in self.quantiles.items()}
        if not values or not all(math.isfinite(v) for v in [*values.values(), self.last]):
            raise DataValidationError(
                f"a peak forecast needs finite quantiles and a finite last value, got "
                f"{values} and {self.last}"
            )
        object.__setattr__(self, "quantiles", MappingProxyType(values))
        if self.raw is not None:
            raw = {float(q): float(v) for q, v in self.raw.items() if math.isfinite(v)}
            object.__setattr__(self, "raw", MappingProxyType(raw) if raw else None)
        if self.returning is not None and not (
            math.isfinite(self.returning) and self.returning >= 0
        ):
            raise DataValidationError(
                f"a peak forecast's returning level must be finite and >= 0 (or None), got "
                f"{self.returning}"
            )

        if self.scale is not None and not (math.isfinite(self.scale) and self.scale > 0):
            raise DataValidationError(
                f"a peak forecast's scale must be finite and > 0 (or None), got {self.scale}"
            )

    @property
    def end(self) -> datetime:
        """The end of the window the peak is over."""
        return self.origin + self.lead

    def headroom(self, level: float) -> float:
        """The peak quantile above the demand at the origin, in GPUs."""
        return self.quantiles[level] - self.last

    def rebased(self, demand: Sample) -> PeakForecast:
        """The same headroom on ``demand`` when it is newer than the origin, else self.

        Values stay at or above 0 (demand is). The window keeps its length and starts
        at the newer observation. A quantile held at the level demand had before an
        idle spell (``returning``) is a level, not a headroom: it stays there, or at
        the newer demand when that is higher.
        """
        if demand.at <= self.origin:
            return self

        def moved(v: float) -> float:
            if v == self.returning:  # held at the level: not a headroom over `last`
                return max(v, demand.value)
            return max(0.0, demand.value + (v - self.last))

        return replace(
            self,
            quantiles={q: moved(v) for q, v in self.quantiles.items()},
            raw=None
            if self.raw is None
            else {q: max(0.0, demand.value + (v - self.last)) for q, v in self.raw.items()},
            origin=demand.at,
            last=demand.value,
            made_at=self.made_at or self.origin,
        )

    def calibrated(self, level: float, calibration: Calibration | None) -> PeakForecast:
        """Add ``calibration``'s offset to the ``level`` quantile (at or above 0).

        A forecast the forecast job already calibrated online (``raw`` set) is returned
        as it is: calibrating it again would count the model's bias twice.
        """
        if calibration is None or self.raw is not None:
            return self
        if self.calibration is not None:
            raise ValueError("this peak forecast is already calibrated")
        value = max(0.0, self.quantiles[level] + calibration.offset)
        return replace(self, quantiles={**self.quantiles, level: value}, calibration=calibration)
