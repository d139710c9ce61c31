"""The guarded choice of one series in arrays is the frame-wide rule's, row for row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.models.guarded import ERROR, guarded_of, guarded_path
from forecaster.types import DS, MEAN, MODEL, STEP, UID

NAMES = ("persistence", "gbm", "global_gbm", "ets")


def member(name: str, rng: np.random.Generator, h: int) -> pd.DataFrame:
    errors = rng.gamma(2.0, 1.0, h)
    errors[rng.random(h) < 0.2] = np.nan
    if rng.random() < 0.1:
        errors[:] = np.nan  # a member without residuals
    mean = rng.normal(0.0, 1.0, h)
    mean[rng.random(h) < 0.05] = np.nan
    return pd.DataFrame(
        {
            UID: "pool/demand_gpus",
            DS: pd.date_range("2024-01-01", periods=h, freq="5min", tz="UTC"),
            STEP: np.arange(1, h + 1),
            MODEL: name,
            MEAN: mean,
            "q0.9": mean + 1.0,
            ERROR: errors,
        }
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_array_path_equals_guarded_of(seed: int) -> None:
    rng = np.random.default_rng(seed)
    h = int(rng.integers(1, 12))
    names = list(rng.permutation(NAMES)[: rng.integers(1, len(NAMES) + 1)])
    frames = [member(str(name), rng, h) for name in names]
    margin = float(rng.choice([0.0, 0.1, 0.5]))
    fast = guarded_path(frames, margin=margin)
    assert fast is not None
    pd.testing.assert_frame_equal(fast, guarded_of(frames, [UID], margin=margin))


def test_frames_of_several_series_or_steps_are_left_to_guarded_of() -> None:
    rng = np.random.default_rng(1)
    a, b = member("persistence", rng, 4), member("gbm", rng, 4)
    assert guarded_path([a, b.assign(**{UID: "other"})]) is None
    assert guarded_path([a, b.iloc[:3]]) is None
    assert guarded_path([a, a.copy()]) is None  # one member twice
