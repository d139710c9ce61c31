"""The peak model's features: one column per name, trailing only."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.peak.features import feature_names, series_features
from forecaster.peak.frames import SeriesInput


def _item(y: np.ndarray) -> SeriesInput:
    ds = pd.date_range("2024-01-01", periods=len(y), freq="10min", tz="UTC")
    return SeriesInput("pool/demand_gpus", ds, y.astype(np.float64))


def test_one_column_per_name_and_one_row_per_origin() -> None:
    y = np.random.default_rng(2).poisson(20.0, 300).astype(np.float64)
    x, scale = series_features(_item(y), (1, 2), day=144)
    assert x.shape == (300, len(feature_names((1, 2))))
    assert scale.shape == (300,)
    assert len(set(feature_names((1, 2)))) == len(feature_names((1, 2)))


def test_features_never_read_the_future() -> None:
    rng = np.random.default_rng(5)
    y = np.cumsum(rng.normal(0.0, 3.0, 600)).clip(0)
    base, _ = series_features(_item(y), (1, 3), day=144)
    changed = y.copy()
    changed[400:] += rng.normal(0.0, 10.0, 200)
    moved, _ = series_features(_item(changed), (1, 3), day=144)
    np.testing.assert_array_equal(base[:400], moved[:400])
