"""Test-only entry points to :mod:`forecaster.peak.serving`: one series' bounds, one frame.

Production calls :func:`~forecaster.peak.serving.serve_states` (the forecast job keeps
its states between runs); the tests check the same code path through these two
wrappers, which used to live in the package (#39: only tests called them).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from forecaster.peak.online import WARMUP
from forecaster.peak.serving import _stepped, serve_states
from forecaster.peak.types import FloatArray


def served_bounds(
    ds: pd.DatetimeIndex,
    y: FloatArray,
    raw: FloatArray,
    scale: FloatArray,
    levels: Sequence[float],
    lead: int,
    *,
    step: pd.Timedelta,
    warmup: pd.Timedelta = WARMUP,
) -> FloatArray:
    """Return the bounds issued at the last origin of a series, per level.

    Args:
        ds: the series' regular grid, ending at the origin.
        y: its values (NaN where missing).
        raw: the model's raw bounds, one row per position and a column per level
            (NaN where no forecast was made at that origin).
        scale: the series' scale per position (NaN where unknown: no forecast).
        levels: the levels of ``raw``'s columns, increasing.
        lead: the lead in steps.
        step: the grid's step.
        warmup: as :func:`forecaster.peak.online.anchor`.

    Raises:
        ValueError: the arrays disagree in length, or the grid is empty.
    """
    state = _stepped(ds, y, raw, scale, tuple(levels), lead, step, warmup, None)
    return state.bounds


def serve_frame(
    fresh: pd.DataFrame,
    history: pd.DataFrame,
    earlier: pd.DataFrame,
    step: pd.Timedelta,
    *,
    warmup: pd.Timedelta = WARMUP,
) -> pd.DataFrame:
    """Return the served peak forecasts of a fresh raw peak frame, built from scratch.

    :func:`~forecaster.peak.serving.serve_states` without earlier states.
    """
    return serve_states(fresh, history, earlier, step, warmup=warmup)[0]
