"""The time-of-day reference: the buffers realised around this time of day last week."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.peak_batch import seasonal_reference
from forecaster.peak.reference import (
    SEASONAL_MIN,
    seasonal_lags,
    seasonal_naive_bound,
    seasonal_naive_reference,
    trailing_reference,
)

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


def test_the_trailing_buffer_is_the_quantile_of_the_headroom_realised_over_the_last_day() -> None:
    rng = np.random.default_rng(5)
    y = 20.0 + np.cumsum(rng.normal(0, 1, 3 * 24))
    day, lead, levels = 24, 2, (0.5, 0.9)
    bounds = trailing_reference(y, lead, day, levels)

    for t in (day + lead, 40, len(y) - 1):
        # Origins s whose peak max(y[s+1 .. s+lead]) is known at t: s <= t - lead.
        seen = [
            max(y[s + 1 : s + lead + 1]) - y[s] for s in range(t - lead - day + 1, t - lead + 1)
        ]
        assert bounds[t] == pytest.approx(y[t] + np.quantile(seen, levels))
    assert np.isnan(bounds[: lead + day // 2 - 1]).all()  # under half a day realised: none


def test_the_trailing_buffer_never_reads_after_its_origin() -> None:
    rng = np.random.default_rng(6)
    y = 20.0 + np.cumsum(rng.normal(0, 1, 100))
    changed = y.copy()
    changed[61:] += 50.0

    before = trailing_reference(y, 3, 24, (0.9,))[:61]
    assert np.allclose(before, trailing_reference(changed, 3, 24, (0.9,))[:61], equal_nan=True)


def test_the_seasonal_reference_stepped_is_the_rolling_one_and_reads_only_the_past() -> None:
    rng = np.random.default_rng(3)
    n = 9 * DAY
    y = 50 + 10 * np.sin(2 * np.pi * np.arange(n) / DAY) + rng.gamma(2.0, 3.0, n)
    y[500:510] = np.nan  # a gap: the peaks over it are unknown
    levels = (0.5, 0.9)
    for lag in (DAY, 7 * DAY):
        rolled = seasonal_naive_reference(y, lag, 2, DAY, levels)
        stepped = np.array([seasonal_naive_bound(y, p, lag, 2, DAY, levels) for p in range(n)])
        np.testing.assert_allclose(stepped, rolled, rtol=1e-10, equal_nan=True)
        known = np.isfinite(rolled[:, 0])
        assert not known[: lag + DAY // 2].any()  # half a day of its errors first
        assert known[-DAY:].all()
        p = n - 50
        later = y.copy()
        later[p + 1 :] += 100.0
        np.testing.assert_array_equal(
            seasonal_naive_bound(later, p, lag, 2, DAY, levels),
            seasonal_naive_bound(y, p, lag, 2, DAY, levels),
        )
    with pytest.raises(ValueError, match="lag"):
        seasonal_naive_bound(y, 10, 1, 2, DAY, levels)


def test_a_level_that_repeats_daily_is_forecast_before_it_comes() -> None:
    ds = pd.date_range("2024-05-01", periods=4 * DAY, freq="10min", tz="UTC")
    y = np.where((ds.hour >= 8) & (ds.hour < 18), 60.0, 10.0)
    bounds = seasonal_naive_reference(y, DAY, 1, DAY, (0.9,))[:, 0]
    before = int(np.flatnonzero((ds.hour == 7) & (ds.minute == 50))[-1])
    assert y[before] == 10.0
    assert bounds[before] == 60.0  # yesterday's peak over the next 10 minutes, exactly
