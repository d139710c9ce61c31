"""A fleet frame: the series one global peak model learns from, and the leads it serves.

Details: docs/forecasting.md, "Notes from the code", `forecaster/peak/fleet.py`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta

import numpy as np
import pandas as pd

from forecaster.peak.types import DEFAULT_TARGETS
from forecaster.types import DS, UID, SeriesId, Y


def fleet_frame(frame: pd.DataFrame, targets: Sequence[str] = DEFAULT_TARGETS) -> pd.DataFrame:
    """Return a validated long frame as the peak model takes it.

    Args:
        frame: long frame ``unique_id, ds, y`` (e.g. a training's history); the model
            picks the target series and their pools' covariates out of it.
        targets: signals the model forecasts (default ``demand_gpus``).

    Returns:
        A copy with ``unique_id`` as str, ``ds`` in UTC, ``y`` as float and the target
        series clipped at zero.
    """
    ids = frame[UID].astype(str).to_numpy()
    ds = pd.DatetimeIndex(frame[DS])
    out = pd.DataFrame(
        {
            UID: ids,
            DS: ds.tz_localize("UTC") if ds.tz is None else ds.tz_convert("UTC"),
            Y: frame[Y].to_numpy(dtype=np.float64),
        }
    )
    wanted = set(targets)
    target = SeriesId.split(pd.Series(ids))[1].isin(wanted).to_numpy()
    out.loc[target, Y] = out.loc[target, Y].clip(lower=0.0)
    return out


def lead_steps(lead_time: timedelta, step: timedelta) -> int:
    """A lead time in whole steps, rounded *up* (at least 1).

    Rounding up never lets capacity work before it could: a 7-minute lead on a 5-minute
    step is 2 steps. The replay simulator rounds the same way.

    Raises:
        ValueError: ``step`` is not positive.
    """
    if step <= timedelta(0):
        raise ValueError(f"step must be positive, got {step}")
    return max(1, -(-lead_time // step))


def pool_leads(lead_times: Iterable[timedelta], step: timedelta) -> tuple[int, ...]:
    """The distinct lead steps of pools with these lead times, ascending."""
    return tuple(sorted({lead_steps(lead, step) for lead in lead_times}))
