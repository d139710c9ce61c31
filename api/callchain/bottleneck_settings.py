"""The knobs of the call-chain analysis (:func:`~api.callchain.bottleneck.analyse`), defaults.

Details: docs/api.md, "Notes from the code", `api/callchain/bottleneck_settings.py`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

DEFAULT_BASELINE_FACTOR: Final = 2.0
"""k: without an SLO a service is slow above k x its baseline (``callchain.baseline_factor``)."""

DEFAULT_GPU_IDLE_BELOW: Final = 40.0
"""GPU utilisation (0-100) under which a pool gets no nodes for latency."""

DEFAULT_SETTLE: Final = timedelta(seconds=5)
"""How long after arrival a span is folded in (its relatives have arrived by then)."""

DEFAULT_MAX_SERVICES: Final = 100
"""Distinct service names per window by default (call chains feeding GPU pools have
tens; a name per request id or pod is a sender's bug)."""


@dataclass(frozen=True)
class BottleneckSettings:
    """The knobs of the analysis (:mod:`api.callchain.bottleneck` states the rules).

    Attributes:
        baseline_factor: k; without an SLO a service is slow above k x its baseline,
            and its own work is slow above k x its usual own p95.
        gain: the share of the relative excess turned into extra nodes.
        max_fraction: the most extra nodes per decision, as a share of current nodes.
        near_fraction: a downstream service at or above this share of its threshold is
            scaled with the culprit upstream of it.
        gpu_idle_below: GPU utilisation (0-100) under which a slow pool is not GPU-bound.
        min_calls: fewer calls in the window than this and a service is not judged.
        baseline_half_life: the half-life of the baseline's moving average.
        baseline_min_updates: updates before a baseline is used to judge.
        own_floor_ms: the usual own p95 is counted as at least this when judging own
            work, so a 1 ms proxy taking 3 ms is not an incident.
        recent_window: own work is also judged over this latest part of the window
            (its p95 turns when 5 % of the recent calls are slow, not 5 % of the
            window's), given 5 x ``min_calls`` calls there; the caller passes those
            statistics as ``recent``.
    """

    baseline_factor: float = DEFAULT_BASELINE_FACTOR
    gain: float = 0.5
    max_fraction: float = 1.0
    near_fraction: float = 0.8
    gpu_idle_below: float = DEFAULT_GPU_IDLE_BELOW
    min_calls: int = 20
    baseline_half_life: timedelta = timedelta(hours=1)
    baseline_min_updates: int = 5
    own_floor_ms: float = 5.0
    recent_window: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        if not self.baseline_factor > 1:
            raise ValueError(f"baseline_factor must be > 1, got {self.baseline_factor}")
        if not self.gain > 0 or not self.max_fraction > 0:
            raise ValueError("gain and max_fraction must be > 0")
        if not 0 < self.near_fraction <= 1:
            raise ValueError(f"near_fraction must be in (0, 1], got {self.near_fraction}")
        if self.min_calls < 1 or self.baseline_min_updates < 1:
            raise ValueError("min_calls and baseline_min_updates must be >= 1")
        if not self.own_floor_ms >= 0:
            raise ValueError(f"own_floor_ms must be >= 0, got {self.own_floor_ms}")
