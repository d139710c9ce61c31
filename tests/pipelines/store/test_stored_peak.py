"""A stored peak row becomes the policy's bound with the volatility scale it was made in."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd

from forecaster.peak.types import SCALE
from pipelines.store.peak_forecasts import LAST, LEAD, ORIGIN, RETURN
from pipelines.store.stored_peak import stored_peak

STEP = timedelta(minutes=10)


def rows(scale: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            ORIGIN: [pd.Timestamp("2024-05-01 12:00", tz="UTC")],
            LEAD: [1],
            LAST: [40.0],
            "q0.9": [52.0],
            SCALE: [scale],
            RETURN: [np.nan],
        }
    )


def test_the_rows_scale_is_the_peak_forecasts_scale() -> None:
    peak, why = stored_peak(rows(3.5), STEP, STEP, 0.9)
    assert why == ""
    assert peak is not None
    assert peak.scale == 3.5


def test_a_row_without_a_usable_scale_gives_none() -> None:
    for bad in (np.nan, 0.0):
        peak, _ = stored_peak(rows(bad), STEP, STEP, 0.9)
        assert peak is not None
        assert peak.scale is None
