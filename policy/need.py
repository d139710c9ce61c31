"""Raw need: the demand peak over the lead time, in nodes, plus call-chain latency.

Provisions at the stored peak quantile; the maximum of the per-horizon quantiles is only
a fallback, since it lies below the peak's quantile.
Details: docs/policy.md, "Notes from the code", `policy/need.py`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Final, Literal

from policy.peak import PeakForecast
from policy.types import DemandForecast, LatencyAdjustment, Sample

PeakSource = Literal["peak", "horizon_max"]
"""Where the provisioned value came from: the stored peak quantile, or the fallback
maximum of the per-horizon quantiles over the window."""

_RELATIVE_TOLERANCE: Final = 1e-9
"""Ratios within this of an integer count as that integer (``12.8 / 6.4`` is 2 nodes)."""


def ceil_nodes(ratio: float) -> int:
    """Round a node ratio up to whole nodes, never below 0.

    Ratios a rounding error above an integer count as the integer, so a demand of
    exactly two nodes' worth never asks for three because of float arithmetic.
    """
    if ratio <= 0:
        return 0
    return max(0, math.ceil(ratio - _RELATIVE_TOLERANCE * max(1.0, ratio)))


@dataclass(frozen=True)
class PeakDemand:
    """The largest forecast demand in the decision window.

    Attributes:
        level: the quantile level provisioned for.
        value: the peak of that quantile over the window, in GPUs (negative clipped to 0).
        at: when the peak is forecast to happen (for a peak forecast: the window's end,
            by which it will have happened).
        by_level: the window peak of every quantile the forecast has, in GPUs.
        points: forecast points inside the window (1 for a peak forecast).
        source: ``peak`` (the stored peak quantile) or ``horizon_max`` (the fallback).
        lead: the window a peak forecast is over; None for the fallback.
        rebased_from: the stored forecast's origin when its headroom was carried over
            to newer live demand; None otherwise.
        missing: why the fallback was used (no peak forecast); empty for a peak.
        raw: the peak model's own quantile at ``level`` when ``value`` is the bound
            calibrated and combined online; None otherwise.
        returning: the level demand had before an idle spell it has just come back
            from, when ``value`` is held there (:mod:`forecaster.peak.recovery`); None
            otherwise.
        margin: the GPUs the pool's ``safety_margin`` added to the quantile (included
            in ``value``); 0 when it is 0 or cannot apply.
        margin_missing: why a nonzero ``safety_margin`` was not applied; empty otherwise.
    """

    level: float
    value: float
    at: datetime
    by_level: Mapping[float, float]
    points: int
    source: PeakSource = "horizon_max"
    lead: timedelta | None = None
    rebased_from: datetime | None = None
    missing: str = ""
    raw: float | None = None
    returning: float | None = None
    margin: float = 0.0
    margin_missing: str = ""

    @property
    def utilisation_applies(self) -> bool:
        """Whether ``target_utilisation`` applies (the fallback only; docs/policy.md)."""
        return self.source == "horizon_max"


def window_end(now: datetime, lead_time: timedelta, step: timedelta) -> datetime:
    """Return the end of the decision window, ``now + lead_time + step``."""
    return now + lead_time + step


def peak_demand(
    forecast: DemandForecast,
    now: datetime,
    lead_time: timedelta,
    demand: Sample | None = None,
    safety_margin: float = 0.0,
) -> PeakDemand | None:
    """Return the demand peak to provision for: the peak forecast, else the window's max.

    Args:
        forecast: quantile forecasts of the pool's demand in GPUs (with its peak
            forecast when the model version has one).
        now: the decision time (timezone-aware).
        demand: the newest observed demand; a peak forecast made from older data has
            its headroom carried over to it (:meth:`PeakForecast.rebased`).
        safety_margin: volatility units added beyond the peak quantile (the pool's
            ``safety_margin``; docs/policy.md).

    Returns:
        The peak, or None when there is no peak forecast and no per-horizon point
        falls in the window.
    """
    if not (math.isfinite(safety_margin) and safety_margin >= 0):
        raise ValueError(f"safety_margin must be a finite number >= 0, got {safety_margin}")
    peak = forecast.peak
    if peak is not None:
        moved = peak if demand is None else peak.rebased(demand)
        margin, why = margin_gpus(safety_margin, moved.scale)
        return PeakDemand(
            level=forecast.level,
            value=max(0.0, moved.quantiles[forecast.level]) + margin,
            at=moved.end,
            by_level=MappingProxyType(
                {level: max(0.0, v) for level, v in sorted(moved.quantiles.items())}
            ),
            points=1,
            source="peak",
            lead=moved.lead,
            rebased_from=moved.made_at,
            raw=None if moved.raw is None else moved.raw.get(forecast.level),
            returning=_held(moved, forecast.level),
            margin=margin,
            margin_missing=why,
        )
    end = window_end(now, lead_time, forecast.step)
    inside = [i for i, ts in enumerate(forecast.timestamps) if now <= ts <= end]
    if not inside:
        return None
    by_level = {
        level: max(0.0, *(values[i] for i in inside))
        for level, values in sorted(forecast.quantiles.items())
    }
    chosen = forecast.quantiles[forecast.level]
    peak_index = max(inside, key=lambda i: chosen[i])
    return PeakDemand(
        level=forecast.level,
        value=by_level[forecast.level],
        at=forecast.timestamps[peak_index],
        by_level=MappingProxyType(by_level),
        points=len(inside),
        missing=forecast.peak_missing or "no peak forecast was given",
        margin_missing=""
        if safety_margin == 0
        else "the per-horizon fallback has no volatility scale to size a safety margin by",
    )


def margin_gpus(safety_margin: float, scale: float | None) -> tuple[float, str]:
    """The GPUs ``safety_margin`` volatility units add, and why none when it cannot apply.

    Args:
        safety_margin: the pool's margin, in units of the series' volatility (>= 0).
        scale: the series' volatility in GPUs (the peak forecast's ``scale``), or None.
    """
    if safety_margin == 0:
        return 0.0, ""
    if scale is None:
        return 0.0, "the peak forecast carries no volatility scale (retrain to store it)"
    return safety_margin * scale, ""


def nodes_for_gpus(gpus: float, gpus_per_node: int, target_utilisation: float) -> int:
    """Return ``ceil(gpus / (gpus_per_node * target_utilisation))``.

    Args:
        gpus: GPUs demanded (values <= 0 need no nodes).
        gpus_per_node: GPUs on one node, >= 1.
        target_utilisation: the planned busy share of a node's GPUs, in (0, 1].
    """
    if gpus_per_node < 1 or not 0 < target_utilisation <= 1:
        raise ValueError(
            f"need gpus_per_node >= 1 and target_utilisation in (0, 1], got "
            f"{gpus_per_node} and {target_utilisation}"
        )
    return ceil_nodes(gpus / (gpus_per_node * target_utilisation))


def add_latency(nodes: int, latency: LatencyAdjustment) -> tuple[int, int]:
    """Add the call-chain adjustment to a node count.

    A pool that is not GPU-bound gets nothing: its GPUs idle while its services are
    slow, so more GPU nodes would cost money and fix nothing.

    Returns:
        The adjusted node count and the extra nodes actually applied.
    """
    applied = 0 if latency.not_gpu_bound else latency.extra_nodes
    return nodes + applied, applied


def _held(peak: PeakForecast, level: float) -> float | None:
    """The level the stored quantile at ``level`` was held at after an idle spell."""
    if peak.returning is None or peak.quantiles[level] != peak.returning:
        return None
    return peak.returning
