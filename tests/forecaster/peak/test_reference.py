"""The time-of-day reference: the buffers realised around this time of day last week."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.peak.reference import SEASONAL_MIN, seasonal_lags, seasonal_reference

DAY = 144  # 10-minute steps


def test_lags_cover_an_hour_either_side_of_each_day_back_to_a_week_and_only_realised() -> None:
    lags = seasonal_lags(DAY, lead=2)

    assert lags.min() == 2  # the newest origin whose 2-step peak is realised
    assert lags.max() == 7 * DAY + 6
    assert {DAY - 6, DAY, DAY + 6, 3 * DAY + 1} <= set(lags.tolist())
    assert not {DAY - 7, DAY + 7, 8 * DAY} & set(lags.tolist())


def test_a_daily_jump_is_provisioned_for_before_it_and_not_at_night() -> None:
    # Flat at 50 but for a jump to 60 at 10:00 every day, for one step.
    ds = pd.date_range("2024-05-01", periods=10 * DAY, freq="10min", tz="UTC")
    y = np.full(len(ds), 50.0)
    y[(ds.hour == 10) & (ds.minute == 0)] = 60.0
    bounds = seasonal_reference(y, lead=1, day=DAY, levels=(0.9, 0.95))
    before_jump = int(np.flatnonzero((ds.hour == 9) & (ds.minute == 50))[-1])
    night = int(np.flatnonzero((ds.hour == 3) & (ds.minute == 0))[-1])

    # At 09:50, 7 of the ~90 origins seen around that time were followed by the jump
    # (over 5 %, under 10 %): q0.95 covers it, q0.9 does not.
    assert bounds[before_jump].tolist() == [50.0, 60.0]
    assert bounds[night].tolist() == [50.0, 50.0]
    # A trailing-day quantile sees the jump once in 144 origins: no buffer at q0.95.
    day_before = y[before_jump - DAY : before_jump]
    headroom = np.maximum(np.r_[day_before[1:], y[before_jump]], 0) - day_before
    assert np.quantile(headroom, 0.95) == 0.0


def test_too_little_history_gives_no_bound() -> None:
    # After a day and a half, an origin has seen 6 origins of its last hour and 13 of
    # yesterday's: 19, fewer than SEASONAL_MIN; a day later 32.
    y = np.random.default_rng(0).normal(50.0, 1.0, 3 * DAY)
    assert SEASONAL_MIN == 20

    bounds = seasonal_reference(y, lead=1, day=DAY, levels=(0.9,))

    assert np.isnan(bounds[: 2 * DAY - 6, 0]).all()
    assert np.isfinite(bounds[2 * DAY + 6 :, 0]).all()
