"""Raw need: the forecast's peak over the lead time, in nodes, plus call-chain latency.

The window is ``[now, now + lead_time + step]``: a node requested now is useful only
after the lead time, and the extra step covers demand arriving during the first step
after it, so a burst due just after the nodes are ready is still provisioned for.
Capacity is sized for the window's *peak*: a node that is not there when the peak
arrives cannot be conjured in time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Final

from api.policy.types import DemandForecast, LatencyAdjustment

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
        at: when the peak is forecast to happen.
        by_level: the window peak of every quantile the forecast has, in GPUs.
        points: forecast points inside the window.
    """

    level: float
    value: float
    at: datetime
    by_level: Mapping[float, float]
    points: int


def window_end(now: datetime, lead_time: timedelta, step: timedelta) -> datetime:
    """Return the end of the decision window, ``now + lead_time + step``."""
    return now + lead_time + step


def peak_demand(forecast: DemandForecast, now: datetime, lead_time: timedelta) -> PeakDemand | None:
    """Return the forecast's peak over ``[now, now + lead_time + step]``.

    Args:
        forecast: quantile forecasts of the pool's demand in GPUs.
        now: the decision time (timezone-aware).
        lead_time: the pool's node lead time.

    Returns:
        The peak, or None when no forecast point falls in the window.
    """
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
    )


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
