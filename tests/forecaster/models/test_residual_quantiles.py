"""Interval offsets from calibration residuals: per-column quantiles of finite values."""

from __future__ import annotations

import numpy as np
import pytest

from forecaster.models.residuals import column_quantiles, residual_quantiles

LEVELS = (0.05, 0.5, 0.9, 0.95)


def _reference(residuals: np.ndarray, h: int) -> np.ndarray:
    """np.quantile column by column, the definition the vectorised version must match."""
    horizon = residuals.shape[1]
    out = np.zeros((len(LEVELS), h))
    for k in range(h):
        col = residuals[:, min(k, horizon - 1)]
        col = col[np.isfinite(col)]
        if col.size:
            widen = np.sqrt((k + 1) / horizon) if k >= horizon else 1.0
            out[:, k] = np.quantile(col, LEVELS) * widen
    return out


@pytest.mark.parametrize("seed", range(20))
def test_offsets_match_numpy_quantiles_of_the_finite_residuals(seed: int) -> None:
    rng = np.random.default_rng(seed)
    residuals = rng.normal(size=(int(rng.integers(1, 40)), int(rng.integers(1, 30))))
    residuals[rng.random(residuals.shape) < 0.3] = np.nan
    residuals[rng.random(residuals.shape) < 0.05] = np.inf
    residuals[:, 0] = np.nan  # a step with nothing to calibrate on
    h = int(rng.integers(1, 50))
    got = residual_quantiles(residuals, h, LEVELS)
    np.testing.assert_allclose(got, _reference(residuals, h), rtol=1e-12, atol=1e-12)
    assert (got[:, 0] == 0.0).all()


def test_column_quantiles_of_a_known_column() -> None:
    values = np.array([[4.0, np.nan], [1.0, np.nan], [3.0, 7.0], [2.0, np.nan]])
    got = column_quantiles(values, np.array([0.0, 0.5, 1.0]))
    np.testing.assert_allclose(got, [[1.0, 7.0], [2.5, 7.0], [4.0, 7.0]])


def test_no_residuals_give_zero_offsets() -> None:
    assert not residual_quantiles(np.empty((0, 3)), 5, LEVELS).any()
    assert not residual_quantiles(np.empty(0), 5, LEVELS).any()
