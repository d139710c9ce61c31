"""The boosting families' path interpolation: all rows at once, equal to np.interp's."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.models.boosting import interpolate_changes


@pytest.mark.parametrize("seed", range(40))
def test_rows_at_once_equal_numpy_interp_row_by_row(seed: int) -> None:
    rng = np.random.default_rng(seed)
    anchors = tuple(sorted(rng.choice(np.arange(1, 80), size=rng.integers(1, 9), replace=False)))
    h = int(rng.integers(1, 100))  # before, between and past the anchors
    changes = rng.normal(size=(int(rng.integers(1, 30)), len(anchors))) * 10 ** rng.uniform(-5, 5)
    odd = rng.uniform(size=changes.shape)
    changes[odd < 0.05] = np.nan
    changes[(odd > 0.05) & (odd < 0.08)] = np.inf
    changes[(odd > 0.08) & (odd < 0.1)] = -np.inf
    got = interpolate_changes(anchors, changes, h)
    xs = np.asarray([0, *anchors], dtype=np.float64)
    steps = np.arange(1, h + 1, dtype=np.float64)
    want = np.stack([np.interp(steps, xs, np.r_[0.0, row]) for row in changes])
    assert got.shape == want.shape
    assert np.array_equal(got, want, equal_nan=True)  # bit for bit, not approximately
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_one_row_and_no_rows() -> None:
    one = interpolate_changes((1, 3), np.array([1.0, 4.0]), 4)
    assert np.array_equal(one, [1.0, 2.5, 4.0, 4.0])
    assert interpolate_changes((1, 3), np.zeros((0, 2)), 4).shape == (0, 4)
