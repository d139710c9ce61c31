"""The online loop's seasonal references, computed for all origins at once, are the
ones stepping origin by origin computes."""

from __future__ import annotations

import math

import numpy as np

from forecaster.peak.online import OnlinePeak, issue
from forecaster.peak.reference import seasonal_bound, seasonal_lags, time_of_day_columns

DAY = 48
LEVELS = (0.5, 0.9, 0.99)


def stepped(state: OnlinePeak, y: np.ndarray, start: int, raw: np.ndarray, scale: np.ndarray):
    out = np.empty((len(raw), len(state.levels)))
    for i, (row, s) in enumerate(zip(raw, scale, strict=True)):
        unit = float(s) if math.isfinite(s) and s > 0 else 1.0
        out[i] = state.step(y, start + i, row, unit)
    return out


def test_issue_with_the_vectorised_seasonal_columns_equals_stepping() -> None:
    rng = np.random.default_rng(11)
    n = 10 * DAY
    t = np.arange(n)
    y = 40 + 15 * np.sin(2 * np.pi * t / DAY) + rng.gamma(2.0, 3.0, n)
    y[rng.random(n) < 0.03] = np.nan  # missing actuals
    start = n - 2 * DAY
    raw = y[start:, None] + np.array(LEVELS)[None, :] * 10 + rng.normal(0, 2, (n - start, 1))
    raw[rng.random(n - start) < 0.05] = np.nan  # origins with no forecast
    scale = np.full(n - start, 3.0)
    for lead in (2, 6):
        fast = issue(OnlinePeak(LEVELS, lead, DAY), y, start, raw, scale)
        slow = stepped(OnlinePeak(LEVELS, lead, DAY), y, start, raw, scale)
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=1e-9)


def test_the_seasonal_columns_read_nothing_after_the_last_origin() -> None:
    rng = np.random.default_rng(5)
    y = rng.gamma(2.0, 3.0, 9 * DAY)
    state = OnlinePeak(LEVELS, 3, DAY)
    start, count = 8 * DAY, DAY // 2
    before = state.seasonal_columns(y, start, count)
    changed = y.copy()
    changed[start + count :] = 1e6
    np.testing.assert_array_equal(before, state.seasonal_columns(changed, start, count))


def test_the_time_of_day_columns_are_the_reference_bound_at_each_origin() -> None:
    rng = np.random.default_rng(2)
    y = rng.gamma(2.0, 3.0, 9 * DAY)
    y[rng.random(len(y)) < 0.05] = np.nan
    levels = np.array(LEVELS)
    for lead in (1, 4):
        lags = seasonal_lags(DAY, lead)
        start = 2 * DAY  # early origins: too few headrooms known, NaN
        got = time_of_day_columns(y, start, lags, lead, levels)
        want = np.array([seasonal_bound(y, p, lags, lead, levels) for p in range(start, len(y))])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        assert np.isnan(got).any()
        assert np.isfinite(got).any()
