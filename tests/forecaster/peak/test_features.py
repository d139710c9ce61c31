"""Point-mass features for flat pools: trailing only, and what they say on a known series."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.peak.features import (
    FLAT_FEATURES,
    HISTORY_LEVELS,
    feature_names,
    history_names,
    series_features,
)
from forecaster.peak.frames import SeriesInput


def _item(y: np.ndarray) -> SeriesInput:
    ds = pd.date_range("2024-01-01", periods=len(y), freq="10min", tz="UTC")
    return SeriesInput("pool/demand_gpus", ds, y.astype(np.float64))


def test_flat_features_are_appended_and_named() -> None:
    # Longer than the 12-step change feature; the known part is at the end.
    y = np.r_[np.full(20, 5.0), [7.0, 7.0, 6.0, 6.0, 6.0]]
    x, _ = series_features(_item(y), (1,), day=4, flat=True)
    names = feature_names((1,), flat=True)
    assert names[-3:] == list(FLAT_FEATURES)
    assert x.shape[1] == len(names) == len(feature_names((1,))) + 3
    since = x[:, names.index("since_change")]
    np.testing.assert_array_equal(since[20:], [0.0, 1.0, 0.0, 1.0, 2.0])
    no_rise = x[:, names.index("no_rise_share")]
    # changes at 18..21: 0, 0, +2, 0 -> three of four did not rise
    assert no_rise[21] == 0.75
    flat_short = x[:, names.index("flat_share_short")]
    assert flat_short[19] == 1.0
    assert flat_short[20] < 1.0


def test_flat_features_never_read_the_future() -> None:
    rng = np.random.default_rng(3)
    y = np.round(rng.normal(50.0, 2.0, 400).clip(0)) * (rng.random(400) < 0.3)
    y = np.cumsum(y) % 97.0
    base, _ = series_features(_item(y), (1, 2), day=144, flat=True)
    changed = y.copy()
    changed[300:] += rng.normal(0.0, 10.0, 100)
    moved, _ = series_features(_item(changed), (1, 2), day=144, flat=True)
    np.testing.assert_array_equal(base[:300], moved[:300])


def test_history_features_are_the_realised_headroom_quantiles() -> None:
    # Lead 1: realised headroom of origin s is y[s+1] - y[s], known from s + 1 on.
    y = np.r_[np.full(10, 5.0), [7.0, 7.0, 6.0, 9.0, 9.0, 9.0]]
    day = 4
    x, s = series_features(_item(y), (1,), day=day, history=True)
    names = feature_names((1,), history=True)
    assert names[-len(history_names(1)) :] == history_names(1)
    assert x.shape[1] == len(names) == len(feature_names((1,))) + len(history_names(1))
    # At t = 14 the realised headrooms of origins 10..13 are 0, -1, 3, 0.
    t = 14
    known = np.array([0.0, -1.0, 3.0, 0.0])
    for q in HISTORY_LEVELS:
        got = x[t, names.index(f"headroom_1_q{q:g}")] * s[t]
        assert got == pytest.approx(np.quantile(known, q))
    assert x[t, names.index("headroom_1_flat")] == 0.75
    assert x[t, names.index("headroom_1_max")] * s[t] == pytest.approx(3.0)


def test_history_features_never_read_the_future() -> None:
    rng = np.random.default_rng(5)
    y = np.cumsum(rng.normal(0.0, 3.0, 600)).clip(0)
    base, _ = series_features(_item(y), (1, 3), day=144, history=True)
    changed = y.copy()
    changed[400:] += rng.normal(0.0, 10.0, 200)
    moved, _ = series_features(_item(changed), (1, 3), day=144, history=True)
    np.testing.assert_array_equal(base[:400], moved[:400])
