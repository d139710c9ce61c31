"""Small seeded synthetic frames shared by the model tests.

Steps are 30 minutes so a day is 48 steps: small seasons keep every fit fast.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

STEP = pd.Timedelta(minutes=30)
DAY = 48
START = pd.Timestamp("2024-03-01", tz="UTC")

FrameFactory = Callable[[dict[str, np.ndarray]], pd.DataFrame]


def _series_frame(values: dict[str, np.ndarray]) -> pd.DataFrame:
    parts = [
        pd.DataFrame(
            {
                "unique_id": uid,
                "ds": pd.date_range(START, periods=len(y), freq=STEP),
                "y": np.asarray(y, dtype=np.float64),
            }
        )
        for uid, y in values.items()
    ]
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="session")
def make_frame() -> FrameFactory:
    """Build a long frame ``unique_id, ds, y`` at a 30-min step from arrays by id."""
    return _series_frame


@pytest.fixture(scope="session")
def two_series() -> pd.DataFrame:
    """10 days at 30 min: a daily cycle with noise, and a zero-heavy bursty queue."""
    rng = np.random.default_rng(7)
    n = 10 * DAY
    t = np.arange(n)
    cycle = 50.0 + 20.0 * np.sin(2 * np.pi * t / DAY) + rng.normal(0.0, 2.0, n)
    bursts = np.where(rng.random(n) < 0.3, rng.gamma(2.0, 5.0, n), 0.0)
    return _series_frame({"pool-a/allocated_gpus": cycle, "pool-b/queue_gpus": bursts})
