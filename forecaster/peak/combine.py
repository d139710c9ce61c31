"""Online combination of quantile forecasts, weighted by their realised pinball loss.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/combine.py`."""

from __future__ import annotations

import numpy as np

from forecaster.peak.types import FloatArray


def pinball(peak: FloatArray, bound: FloatArray, level: float) -> FloatArray:
    """Return the pinball loss of ``bound`` as the ``level`` quantile of ``peak``, per row."""
    diff = np.asarray(peak, dtype=np.float64) - np.asarray(bound, dtype=np.float64)
    return np.asarray(np.maximum(level * diff, (level - 1.0) * diff))


TUNED_ETA = 100.0
"""Combination sharpness chosen on the tune window of ``benchmarks/peak_quantile.py``."""
TUNED_HALFLIFE = 144.0
"""Loss half-life in steps chosen with :data:`TUNED_ETA` on the same tune window."""


class DiscountedExperts:
    """The experts' weights, fed one realised set of losses at a time.

    ``weights()`` is the softmax of ``-eta`` times the discounted mean losses seen so
    far (equal before any). Feed :meth:`observe` only with losses of forecasts whose
    peak is realised: the caller owns the lead-time discipline. An expert's mean counts
    only the losses it had (one with no bound at an origin has a NaN loss there), so an
    expert known only part of the time (a reference that needs a week of history) does
    not stop the others learning; until it has a loss it has no weight.

    Args:
        eta: how sharply the weights follow the loss differences (0: always equal).
        halflife: observations after which a loss counts half.
        experts: how many experts are mixed.
    """

    def __init__(self, eta: float, halflife: float, experts: int = 2) -> None:
        if eta < 0.0 or halflife <= 0.0 or experts < 1:
            raise ValueError(
                f"need eta >= 0, halflife > 0 and experts >= 1; got {eta}, {halflife}, {experts}"
            )
        self.eta = eta
        self.decay = 0.5 ** (1.0 / halflife)
        self._seen = np.zeros(experts)
        self._losses = np.zeros(experts)

    def observe(self, losses: FloatArray) -> None:
        """Fold one realised set of losses (one per expert) in; NaN losses are skipped."""
        values = np.asarray(losses, dtype=np.float64)
        if values.shape != self._losses.shape:
            raise ValueError(f"need {len(self._losses)} losses, got {values.shape}")
        known = np.isfinite(values)
        self._seen = np.where(known, self.decay * self._seen + 1.0, self._seen)
        step = np.where(known, values - self._losses, 0.0) / np.maximum(self._seen, 1.0)
        self._losses += step

    def weights(self) -> FloatArray:
        """Return the experts' weights now (they sum to 1)."""
        seen = self._seen > 0.0
        if not seen.any():
            return np.full(len(self._losses), 1.0 / len(self._losses))
        # Shifted by the least loss so the exponentials never all underflow.
        excess = np.where(seen, self._losses - self._losses[seen].min(), 0.0)
        raw = np.where(seen, np.exp(-self.eta * excess), 0.0)
        return np.asarray(raw / raw.sum(), dtype=np.float64)


def mix(bounds: FloatArray, weights: FloatArray) -> float:
    """Return the weighted mean of the finite ``bounds`` (NaN when none is finite).

    Written as the first finite bound plus weighted differences, so experts that agree
    give exactly their common bound (a flat pool's bound stays exactly at demand).
    """
    finite = np.isfinite(bounds)
    if not finite.any():
        return float("nan")
    w = np.where(finite, weights, 0.0)
    if w.sum() <= 0.0:  # every finite expert's weight underflowed: trust them equally
        w = finite.astype(np.float64)
    first = bounds[np.argmax(finite)]
    spread = np.where(finite, bounds - first, 0.0)
    return float(first + np.dot(w, spread) / w.sum())


TUNED_SNAP = 1.0
"""Scale units within which a mixed bound above demand is set to demand where the
trailing-day reference is at or below demand (see :func:`snap_to_demand`). Chosen on the tune
window of ``benchmarks/peak_quantile.py``; the gated and ungated variants' scores are in
``docs/forecasting.md``."""


def snap_to_demand(
    bounds: FloatArray,
    demand: FloatArray,
    scale: FloatArray,
    reference: FloatArray,
    tolerance: float = TUNED_SNAP,
) -> FloatArray:
    """Return ``bounds``, those just above demand set to demand where demand is the quantile.

    Where the trailing-day ``reference`` is at or below demand (demand covers the level), a
    bound at most ``tolerance`` scale units above demand is set to demand; every other
    bound (NaN, at or below demand, or further above) is returned as it is.

    Args:
        bounds: the mixed bounds (peak units).
        demand: the series' current demand at each bound's origin.
        scale: the series' scale at each origin (the tolerance is in it).
        reference: the trailing-day reference bound at each origin (NaN: unknown).
        tolerance: how far above demand, in scale units, a bound is set to demand.
    """
    if tolerance < 0.0:
        raise ValueError(f"need tolerance >= 0; got {tolerance}")
    b = np.asarray(bounds, dtype=np.float64)
    d = np.asarray(demand, dtype=np.float64)
    above = b - d
    near = (above > 0.0) & (above <= tolerance * np.asarray(scale, dtype=np.float64))
    atom = np.asarray(reference, dtype=np.float64) <= d
    return np.asarray(np.where(near & atom, d, b), dtype=np.float64)
