"""The peak benchmark's coverage: plain, strict, and a bound at an atom of the peak."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.peak_quantile import calibrated, cell_scores
from forecaster.peak.types import LAST


def scores(peak: list[float], bound: list[float]) -> dict[str, float]:
    frame = pd.DataFrame({"peak": peak, "b": bound, LAST: np.zeros(len(peak))})
    return cell_scores(frame, 0.9, "b")


def test_a_bound_at_an_atom_is_the_quantile_it_is() -> None:
    # Flat pool: the peak equals demand (0) at 95 of 100 origins. A bound at demand
    # is the 0.9 quantile; it covers 0.95, so only the tie-aware rule calls it so.
    peak = [0.0] * 95 + [5.0] * 5
    at_demand = scores(peak, [0.0] * 100)
    assert at_demand["coverage"] == 0.95
    assert at_demand["coverage_strict"] == 0.0
    assert not calibrated(at_demand, 0.9, tie_aware=False)
    assert calibrated(at_demand, 0.9, tie_aware=True)


def test_a_bound_above_every_peak_over_covers_either_way() -> None:
    peak = [0.0] * 95 + [5.0] * 5
    above = scores(peak, [6.0] * 100)
    assert above["coverage"] == above["coverage_strict"] == 1.0
    assert not calibrated(above, 0.9, tie_aware=False)
    assert not calibrated(above, 0.9, tie_aware=True)


def test_without_ties_both_rules_agree() -> None:
    peak = list(np.arange(100.0))
    bound = [89.5] * 100  # 90 peaks under it, none equal
    s = scores(peak, bound)
    assert s["coverage"] == s["coverage_strict"] == 0.9
    assert calibrated(s, 0.9, tie_aware=False)
    assert calibrated(s, 0.9, tie_aware=True)
    low = scores(peak, [80.5] * 100)
    assert not calibrated(low, 0.9, tie_aware=False)
    assert not calibrated(low, 0.9, tie_aware=True)
