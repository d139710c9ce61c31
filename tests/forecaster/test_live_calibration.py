"""Online calibration of served quantiles: ACI replayed over realised stored forecasts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.live_calibration import calibrate_series, replay

Q90 = 1.2815515655446004  # the 0.9 quantile of N(0, 1)


def stream(n: int, shift_after: int | None = None, seed: int = 5) -> tuple[np.ndarray, ...]:
    """Forecasts issued every step for 3 steps ahead: scores y - q of a N(0,1) q0.9."""
    rng = np.random.default_rng(seed)
    issued = np.repeat(np.arange(n), 3)
    realised = issued + np.tile([1, 2, 3], n)
    scores = rng.normal(size=3 * n) - Q90
    if shift_after is not None:
        scores[issued >= shift_after] += 1.5  # demand drifts above what the model knows
    return issued, realised, scores


def test_a_calibrated_model_keeps_its_coverage_and_an_offset_near_zero() -> None:
    issued, realised, scores = stream(4000)
    result = replay(issued, realised, scores, 0.9)
    assert result.forecasts == 12000
    assert abs(result.live_coverage - 0.9) < 0.02
    assert abs(result.calibrated_coverage - 0.9) < 0.02
    assert abs(result.offset) < 0.3


def test_under_drift_the_offset_restores_the_nominal_coverage() -> None:
    issued, realised, scores = stream(4000, shift_after=1000)
    result = replay(issued, realised, scores, 0.9)
    assert result.live_coverage < 0.75  # raw bounds miss far too often after the drift
    assert abs(result.calibrated_coverage - 0.9) < 0.03
    assert result.offset > 1.0


def test_no_offset_is_issued_from_an_actual_that_came_later() -> None:
    issued, _, scores = stream(500, shift_after=0)
    late = np.full(len(issued), 10_000)  # every actual arrives after the last forecast
    result = replay(issued, late, scores, 0.9)
    assert result.calibrated_coverage == result.live_coverage  # every issued offset was 0
    assert result.offset > 1.0  # learned only once the actuals came


def test_mismatched_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="as long as each other"):
        replay([1, 2], [2, 3], [0.1], 0.9)


def test_calibrate_series_replays_each_series_and_stored_level() -> None:
    issued, realised, scores = stream(300, shift_after=0)
    start = pd.Timestamp("2025-03-01", tz="UTC")
    step = pd.Timedelta(minutes=5)
    frame = pd.DataFrame(
        {
            "unique_id": "pool/demand_gpus",
            "generated_at": start + issued * step,
            "ds": start + realised * step,
            "y": scores + 10.0,
            "q0.9": 10.0,
        }
    )
    out = calibrate_series(frame, (0.9, 0.95), issued="generated_at")
    assert set(out) == {"pool/demand_gpus"}
    assert set(out["pool/demand_gpus"]) == {0.9}  # no q0.95 column: left out
    got, expected = out["pool/demand_gpus"][0.9], replay(issued, realised, scores, 0.9)
    assert got.forecasts == expected.forecasts
    assert got.calibrated_coverage == expected.calibrated_coverage
    assert got.offset == pytest.approx(expected.offset)  # y - q rounds differently
