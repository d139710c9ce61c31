"""ACI and the peak target: learns only from realised peaks, restores coverage under drift."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.peak_batch import aci_offsets, calibrate
from forecaster.peak.calibration import AdaptiveConformal, calibrates
from forecaster.peak.target import lead_headroom, lead_peak


def test_lead_peak_is_the_max_of_the_next_steps() -> None:
    y = np.array([1.0, 5.0, 2.0, 3.0, 0.0])
    np.testing.assert_array_equal(lead_peak(y, 2)[:3], [5.0, 3.0, 3.0])
    assert np.isnan(lead_peak(y, 2)[3:]).all()
    np.testing.assert_array_equal(lead_headroom(y, 1)[:4], [4.0, -3.0, 1.0, -3.0])
    with pytest.raises(ValueError, match="lead"):
        lead_peak(y, 0)


def test_offsets_use_only_realised_scores() -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(size=400)
    lead = 3
    base = aci_offsets(scores, 0.9, lead, gamma=0.05, window=50)
    changed = scores.copy()
    changed[200:] += 100.0  # a forecast at 200 is realised only at 203
    moved = aci_offsets(changed, 0.9, lead, gamma=0.05, window=50)
    np.testing.assert_array_equal(base[: 200 + lead], moved[: 200 + lead])
    assert moved[200 + lead + 1] != base[200 + lead + 1]


def test_aci_restores_coverage_under_drift() -> None:
    rng = np.random.default_rng(42)
    n, level = 4000, 0.9
    # The raw q0.9 was right for noise sd 1; the noise then grows to sd 3.
    sd = np.where(np.arange(n) < 500, 1.0, 3.0)
    peak = rng.normal(0.0, sd)
    raw = np.full(n, 1.2816)
    scale = np.ones(n)
    bound = calibrate(raw, peak, scale, level, lead=2, gamma=0.01, window=200)
    late = slice(1500, n)
    raw_cov = np.mean(peak[late] <= raw[late])
    aci_cov = np.mean(peak[late] <= bound[late])
    assert raw_cov < 0.7
    assert abs(aci_cov - level) < 0.03
    assert abs(aci_cov - level) < abs(raw_cov - level)


def test_calibrated_bound_stays_put_when_already_calibrated() -> None:
    rng = np.random.default_rng(5)
    peak = rng.normal(size=3000)
    raw = np.full(3000, 1.6449)  # the exact q0.95
    bound = calibrate(raw, peak, np.ones(3000), 0.95, lead=1, gamma=0.005, window=300)
    assert abs(np.mean(peak[500:] <= bound[500:]) - 0.95) < 0.02
    assert abs(np.median(bound[500:]) - 1.6449) < 0.3


def test_online_protocol_is_checked() -> None:
    aci = AdaptiveConformal(0.9, lead=1)
    assert aci.issue() == 0.0  # nothing realised yet: no correction
    aci.observe(2.0)
    with pytest.raises(RuntimeError, match="no issued forecast"):
        aci.observe(1.0)
    with pytest.raises(ValueError, match="level"):
        AdaptiveConformal(1.0, lead=1)


@pytest.mark.parametrize(
    ("level", "window", "expected"),
    [
        (0.9, 288, True),
        (0.98, 288, True),
        (0.99, 288, False),
        (0.999, 288, False),
        (0.99, 600, True),
    ],
)
def test_aci_calibrates_only_levels_that_expect_enough_misses(
    level: float, window: int, expected: bool
) -> None:
    # At least 5 misses expected over the window: 0.98 of 288 expects 5.76, 0.99 2.88.
    assert calibrates(level, window) is expected
