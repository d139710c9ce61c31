"""Where backtest windows are cut: rolling-origin and nested cutoff positions.

Details: docs/forecasting.md, "Notes from the code", `forecaster/cutoffs.py`."""

from __future__ import annotations

import math
from typing import Literal

from forecaster.exceptions import InsufficientHistoryError

WindowRoles = Literal["all", "selection", "heldout"]
"""Which windows of a nested plan a backtest fits (see :func:`nested_cutoffs`)."""

Refits = Literal["each", "first"]
"""Where a backtest fits a model: at ``each`` cutoff, or at a series' ``first`` cutoff
only, updated (not refitted) to the later ones."""


def rolling_origin_cutoffs(
    n_obs: int,
    *,
    horizon: int,
    n_windows: int,
    start_frac: float = 0.75,
    min_train: int = 2,
) -> list[int]:
    """Return cutoff positions spread evenly over the last part of a series.

    A cutoff is the 0-based position of the last training observation. The latest
    cutoff leaves exactly ``horizon`` observations after it; the earliest lies at the
    start of the last ``1 - start_frac`` of the series (or later, to leave
    ``min_train`` training observations); the others are evenly spaced between them.

    Raises:
        InsufficientHistoryError: when fewer than ``n_windows`` distinct cutoffs fit.
    """
    if horizon < 1 or n_windows < 1 or min_train < 1:
        raise ValueError("horizon, n_windows and min_train must all be >= 1")
    if not 0.0 <= start_frac < 1.0:
        raise ValueError(f"start_frac must be in [0, 1), got {start_frac}")
    last = n_obs - 1 - horizon
    first = max(math.ceil(start_frac * n_obs) - 1, min_train - 1)
    if last - first + 1 < n_windows:
        raise InsufficientHistoryError(
            f"a series of {n_obs} observations leaves {max(0, last - first + 1)} possible "
            f"cutoffs (from observation {first + 1}, after the shortest training span, to "
            f"{last + 1}, a {horizon}-step horizon before the end), fewer than the "
            f"{n_windows} backtest windows asked for. Use fewer windows (setting "
            "backtest_windows, FORESIGHT_BACKTEST_WINDOWS), a shorter horizon (settings "
            "horizon and horizons) or more history."
        )
    if n_windows == 1:
        return [last]
    span = last - first
    # Count back from the latest cutoff so the newest data is always scored.
    return [last - round((n_windows - 1 - i) * span / (n_windows - 1)) for i in range(n_windows)]


def nested_cutoffs(
    n_obs: int,
    *,
    horizon: int,
    n_selection: int,
    n_heldout: int,
    start_frac: float = 0.75,
    min_train: int = 2,
) -> tuple[list[int], list[int]]:
    """Return selection cutoffs and later held-out cutoffs that selection never sees.

    The held-out cutoffs are the last ``n_heldout`` of ``n_selection + n_heldout``
    rolling-origin cutoffs (:func:`rolling_origin_cutoffs`). The selection cutoffs are
    spread evenly from the start of the scored part of the series to the first held-out
    cutoff minus ``horizon``, so the last selection window's targets end at or before the
    first held-out cutoff: no observation after it enters selection, neither as training
    data nor as an actual scored.

    Raises:
        InsufficientHistoryError: when the windows do not fit.
    """
    if n_heldout < 1 or n_selection < 1:
        raise ValueError("n_selection and n_heldout must both be >= 1")
    spread = rolling_origin_cutoffs(
        n_obs,
        horizon=horizon,
        n_windows=n_selection + n_heldout,
        start_frac=start_frac,
        min_train=min_train,
    )
    heldout = spread[n_selection:]
    first = spread[0]
    last = heldout[0] - horizon
    if last - first + 1 < n_selection:
        raise InsufficientHistoryError(
            f"a series of {n_obs} observations leaves {max(0, last - first + 1)} selection "
            f"cutoffs between position {first} and {last} (the first held-out cutoff "
            f"{heldout[0]} minus horizon={horizon}), fewer than {n_selection}. Use fewer "
            "windows, a shorter horizon, a smaller start_frac or more history."
        )
    if n_selection == 1:
        return [last], heldout
    span = last - first
    selection = [
        last - round((n_selection - 1 - i) * span / (n_selection - 1)) for i in range(n_selection)
    ]
    return selection, heldout
