"""The quantity the scale decision needs: the demand peak over the lead time.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/target.py`."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from forecaster.peak.types import FloatArray


def lead_peak(y: FloatArray, lead: int) -> FloatArray:
    """Return ``max(y[t+1 .. t+lead])`` for every origin ``t`` (NaN where not yet known).

    The last ``lead`` origins have no complete future and get NaN; a NaN inside the
    window makes that origin's peak NaN too (a peak over a gap is not known).

    Raises:
        ValueError: when ``lead`` is not a positive number of steps.
    """
    if lead < 1:
        raise ValueError(f"lead must be a positive number of steps, got {lead}")
    values = np.asarray(y, dtype=np.float64)
    out = np.full(len(values), np.nan)
    if len(values) <= lead:
        return out
    windows = sliding_window_view(values[1:], lead)  # row t holds y[t+1 .. t+lead]
    out[: len(windows)] = windows.max(axis=1)  # NaN propagates, as documented
    return out


def lead_headroom(y: FloatArray, lead: int) -> FloatArray:
    """Return ``max(y[t+1 .. t+lead]) - y[t]`` for every origin (NaN where unknown)."""
    values = np.asarray(y, dtype=np.float64)
    return lead_peak(values, lead) - values
