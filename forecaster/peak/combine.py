"""Online combination of two quantile forecasts, weighted by their realised pinball loss.

Per series, lead and quantile ``tau`` the peak forecaster's bound and a reference
bound (the trailing-day empirical quantile: persistence + k sd) are mixed convexly,

    bound_t = w_t * model_t + (1 - w_t) * reference_t,
    w_t = 1 / (1 + exp(-eta * (R_t - M_t))),

where ``M_t`` and ``R_t`` are the exponentially discounted mean pinball losses (in
the series' scale units) of the two experts over the forecasts *already realised*
at ``t``: a forecast made at ``s`` for lead ``L`` is scored only from ``s + L`` on.
This is exponentially weighted averaging of two experts with a discounted loss, so
it tracks the better one where one is better for a while (the model on volatile
series, the reference on a pool whose demand stays flat). Pinball loss is convex,
so the mix never loses more than the weighted average of the two experts' losses.
Until anything is realised the weight is 1/2.
"""

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
    """The model's weight, fed one realised pair of losses at a time.

    ``weight()`` is ``1 / (1 + exp(-eta * (R - M)))`` of the discounted mean losses seen
    so far (1/2 before any). Feed :meth:`observe` only with losses of forecasts whose
    peak is realised: the caller owns the lead-time discipline.

    Args:
        eta: how sharply the weight follows the loss difference (0: always 1/2).
        halflife: observations after which a loss counts half.
    """

    def __init__(self, eta: float, halflife: float) -> None:
        if eta < 0.0 or halflife <= 0.0:
            raise ValueError(f"need eta >= 0 and halflife > 0; got {eta}, {halflife}")
        self.eta = eta
        self.decay = 0.5 ** (1.0 / halflife)
        self._seen = 0.0
        self._model = 0.0
        self._reference = 0.0

    def observe(self, loss_model: float, loss_reference: float) -> None:
        """Fold one realised pair of losses in; a pair with a NaN is skipped."""
        if not (np.isfinite(loss_model) and np.isfinite(loss_reference)):
            return
        self._seen = self.decay * self._seen + 1.0
        self._model += (loss_model - self._model) / self._seen
        self._reference += (loss_reference - self._reference) / self._seen

    def weight(self) -> float:
        """Return the model's weight now."""
        if self._seen == 0.0:
            return 0.5
        return float(1.0 / (1.0 + np.exp(-self.eta * (self._reference - self._model))))


def expert_weights(
    loss_model: FloatArray, loss_reference: FloatArray, lead: int, eta: float, halflife: float
) -> FloatArray:
    """Return the model's weight at every step from the experts' per-origin losses.

    ``loss_*[t]`` is the loss of the forecast made at ``t`` (NaN where its peak is
    missing); the weight at ``t`` uses only ``loss_*[: t - lead + 1]``.

    Args:
        loss_model: per-origin losses of the model, in scale units.
        loss_reference: per-origin losses of the reference, same unit.
        lead: steps between a forecast and its realisation.
        eta: how sharply the weight follows the loss difference (0: always 1/2).
        halflife: steps after which a realised loss counts half.
    """
    if lead < 1:
        raise ValueError(f"need lead >= 1; got {lead}")
    experts = DiscountedExperts(eta, halflife)
    lm = np.asarray(loss_model, dtype=np.float64)
    lr = np.asarray(loss_reference, dtype=np.float64)
    out = np.full(len(lm), 0.5)
    for t in range(len(lm)):
        s = t - lead  # the newest origin whose peak is realised by t
        if s >= 0:
            experts.observe(float(lm[s]), float(lr[s]))
        out[t] = experts.weight()
    return out


def combine_bounds(
    model: FloatArray,
    reference: FloatArray,
    peak: FloatArray,
    scale: FloatArray,
    level: float,
    lead: int,
    eta: float = TUNED_ETA,
    halflife: float = TUNED_HALFLIFE,
) -> FloatArray:
    """Return the online combination of two bounds of consecutive origins of one series.

    Args:
        model: the model's bounds (peak units), one per origin, in time order.
        reference: the reference's bounds of the same origins (NaN: the model alone).
        peak: the realised peaks (NaN where not realised yet).
        scale: the series' scale at each origin (losses are divided by it).
        level: the quantile level both bounds aim at.
        lead: the lead time in steps.
        eta: sharpness of the weight (see :func:`expert_weights`).
        halflife: steps after which a realised loss counts half.
    """
    m = np.asarray(model, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    s = np.asarray(scale, dtype=np.float64)
    weights = expert_weights(
        pinball(peak, m, level) / s, pinball(peak, r, level) / s, lead, eta, halflife
    )
    mixed = weights * m + (1.0 - weights) * r
    return np.asarray(np.where(np.isfinite(r), mixed, m))
