"""The online peak layer run over a whole series at once: the benchmarks' batch columns.

Each function steps the same online piece the served bound steps one origin at a time
(:class:`forecaster.peak.calibration.AdaptiveConformal`,
:class:`forecaster.peak.combine.DiscountedExperts`,
:func:`forecaster.peak.reference.seasonal_bound`,
:func:`forecaster.peak.recovery.held_level`) over every origin of one series, so the
benchmarks (``peak_quantile.py``, ``peak_lofo.py``) score whole windows without
replaying the service.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from forecaster.peak.calibration import GAMMA, WINDOW, AdaptiveConformal
from forecaster.peak.combine import TUNED_ETA, TUNED_HALFLIFE, DiscountedExperts, mix, pinball
from forecaster.peak.recovery import ReturnRule, comes_back, return_levels
from forecaster.peak.reference import seasonal_bound, seasonal_lags
from forecaster.peak.types import FloatArray


def aci_offsets(
    scores: FloatArray, level: float, lead: int, gamma: float = GAMMA, window: int = WINDOW
) -> FloatArray:
    """Return the ACI offset issued at every step of a series of consecutive forecasts.

    ``scores[t]`` is ``(peak[t] - q[t]) / scale[t]`` of the forecast made at step ``t``;
    the offset at ``t`` uses only ``scores[: t - lead + 1]`` (the peaks realised by
    ``t``), exactly as :class:`AdaptiveConformal` fed live.
    """
    calibrator = AdaptiveConformal(level, lead, gamma=gamma, window=window)
    values = np.asarray(scores, dtype=np.float64)
    out = np.empty(len(values))
    for t in range(len(values)):
        if t >= lead:
            calibrator.observe(float(values[t - lead]))
        out[t] = calibrator.issue()
    return out


def calibrate(
    bound: FloatArray,
    peak: FloatArray,
    scale: FloatArray,
    level: float,
    lead: int,
    gamma: float = GAMMA,
    window: int = WINDOW,
) -> FloatArray:
    """Return ACI-calibrated bounds of consecutive forecasts of one series.

    Args:
        bound: the raw quantile forecasts (peak units), one per origin, in time order.
        peak: the realised peaks of the same origins (NaN where not realised yet).
        scale: the series' scale at each origin.
        level: the nominal quantile.
        lead: the lead time in steps.
        gamma: ACI step size.
        window: scores the offset is a quantile of.
    """
    scores = (np.asarray(peak) - np.asarray(bound)) / np.asarray(scale)
    return np.asarray(bound + aci_offsets(scores, level, lead, gamma, window) * scale)


def expert_weights(losses: FloatArray, lead: int, eta: float, halflife: float) -> FloatArray:
    """Return the experts' weights at every step from their per-origin losses.

    Args:
        losses: shape ``(origins, experts)``; row ``t`` holds the losses of the
            forecasts made at ``t`` (NaN where a peak is missing). The weights at ``t``
            use only rows ``: t - lead + 1``.
        lead: steps between a forecast and its realisation.
        eta: how sharply the weights follow the loss differences (0: always equal).
        halflife: steps after which a realised loss counts half.

    Returns:
        Shape ``(origins, experts)``, each row summing to 1.
    """
    if lead < 1:
        raise ValueError(f"need lead >= 1; got {lead}")
    values = np.asarray(losses, dtype=np.float64)
    experts = DiscountedExperts(eta, halflife, values.shape[1])
    out = np.empty(values.shape)
    for t in range(len(values)):
        s = t - lead  # the newest origin whose peak is realised by t
        if s >= 0:
            experts.observe(values[s])
        out[t] = experts.weights()
    return out


def combine_bounds(
    experts: Sequence[FloatArray],
    peak: FloatArray,
    scale: FloatArray,
    level: float,
    lead: int,
    eta: float = TUNED_ETA,
    halflife: float = TUNED_HALFLIFE,
) -> FloatArray:
    """Return the online combination of experts' bounds of consecutive origins of one series.

    Args:
        experts: each expert's bounds (peak units), one per origin, in time order (NaN
            where it has none: the others share its weight there).
        peak: the realised peaks (NaN where not realised yet).
        scale: the series' scale at each origin (losses are divided by it).
        level: the quantile level the bounds aim at.
        lead: the lead time in steps.
        eta: sharpness of the weights (see :func:`expert_weights`).
        halflife: steps after which a realised loss counts half.
    """
    bounds = np.column_stack([np.asarray(e, dtype=np.float64) for e in experts])
    s = np.asarray(scale, dtype=np.float64)
    losses = np.column_stack([pinball(peak, b, level) / s for b in bounds.T])
    weights = expert_weights(losses, lead, eta, halflife)
    return np.array([mix(b, w) for b, w in zip(bounds, weights, strict=True)])


def seasonal_reference(y: FloatArray, lead: int, day: int, levels: Sequence[float]) -> FloatArray:
    """:func:`seasonal_bound` at every origin of ``y``, shape ``(origin, level)``."""
    values = np.asarray(y, dtype=np.float64)
    lags = seasonal_lags(day, lead)
    rows = [seasonal_bound(values, p, lags, lead, levels) for p in range(len(values))]
    return np.array(rows).reshape(len(values), len(levels))


def held_levels(y: FloatArray, rule: ReturnRule) -> FloatArray:
    """:func:`held_level` at every position of ``y`` (NaN where the bound is not held)."""
    levels = return_levels(y, rule)
    for p in np.flatnonzero(np.isfinite(levels)):
        if not comes_back(y, int(p), rule):
            levels[p] = math.nan
    return levels
