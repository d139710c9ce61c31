"""Online calibration: adaptive conformal inference (Gibbs & Candès, 2021) (docs/forecasting.md)."""

from __future__ import annotations

from collections import deque

import numpy as np

WINDOW = 288
"""Realised scores ACI's offset is the quantile of (two days at 10-min steps)."""
GAMMA = 0.002
"""ACI's default step size."""
TUNED_GAMMA = 0.005
"""ACI's step size in the served peak bound (:class:`forecaster.peak.online.OnlinePeak`),
chosen on every trace family's tune window of ``benchmarks/peak_quantile.py`` (the
evidence, and the choice of each leave-one-family-out fold: ``docs/forecasting.md``)."""


class AdaptiveConformal:
    """ACI for one series, lead and quantile, fed one step at a time.

    Call :meth:`issue` once per step to get the offset of the forecast made now, and
    :meth:`observe` once per step from step ``lead`` on with the score of the
    forecast made ``lead`` steps before (the oldest one still pending).

    Args:
        level: the nominal quantile ``tau`` in (0, 1).
        lead: steps between a forecast and its realisation.
        gamma: step size of the ``alpha`` update.
        window: most recent scores the offset is the quantile of.
    """

    def __init__(self, level: float, lead: int, gamma: float = GAMMA, window: int = WINDOW) -> None:
        if not 0.0 < level < 1.0:
            raise ValueError(f"level must be in (0, 1), got {level}")
        if lead < 1 or window < 1 or gamma < 0.0:
            raise ValueError(
                f"need lead >= 1, window >= 1, gamma >= 0; got {lead}, {window}, {gamma}"
            )
        self.level = level
        self.lead = lead
        self.gamma = gamma
        self.window = window
        self.alpha = 1.0 - level
        self._scores: deque[float] = deque(maxlen=window)
        self._issued: deque[float] = deque()

    def offset(self) -> float:
        """Return the current offset (0 until a score has been observed)."""
        if not self._scores:
            return 0.0
        target = 1.0 - self.alpha
        scores = np.fromiter(self._scores, dtype=np.float64)
        if target >= 1.0:
            return float(scores.max())
        if target <= 0.0:
            return float(scores.min())
        return float(np.quantile(scores, target))

    def issue(self) -> float:
        """Return the offset of the forecast made now and remember it until realised."""
        value = self.offset()
        self._issued.append(value)
        return value

    def observe(self, score: float) -> None:
        """Learn from the oldest pending forecast, whose score ``(peak - q) / scale`` is known.

        A NaN score (a peak over missing data) is skipped but still retires the forecast.

        Raises:
            RuntimeError: when no issued forecast is pending.
        """
        if not self._issued:
            raise RuntimeError("observe() called with no issued forecast pending")
        self.learn(score, self._issued.popleft())

    def learn(self, score: float, issued: float) -> None:
        """Learn from one realised forecast: its score and the offset it was issued with.

        :meth:`observe` calls it for the oldest pending forecast; a caller whose
        forecasts come due in another order (several steps ahead, stored forecasts)
        keeps the issued offsets itself. A NaN score is skipped.
        """
        if not np.isfinite(score):
            return
        miss = 1.0 if score > issued else 0.0
        self.alpha += self.gamma * ((1.0 - self.level) - miss)
        self._scores.append(float(score))


MIN_EXPECTED_MISSES = 5.0
"""Fewest misses a level must expect over the offset's window for ACI to calibrate it."""


def calibrates(level: float, window: int = WINDOW, min_misses: float = MIN_EXPECTED_MISSES) -> bool:
    """Whether ACI can calibrate ``level`` from ``window`` realised scores.

    Not when the window holds fewer than ``min_misses`` expected misses (the offset would
    jump with every burst): such levels serve the model's raw bound as their calibrated
    one. ``min_misses = 0`` calibrates every level.
    """
    return (1.0 - level) * window >= min_misses
