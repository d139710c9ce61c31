"""The analog family: the moves that followed the stretches most like the present."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from forecaster.models.analog import Analog
from forecaster.models.naive import Persistence

DAY = 48  # 30-min steps, as the conftest frames


def _ramps(days: int, rng: np.random.Generator) -> np.ndarray:
    """A quiet night, then a ramp up at a random hour each day: a shape, not a clock."""
    out = []
    for _ in range(days):
        start = int(rng.integers(10, 20))
        day = np.full(DAY, 5.0)
        day[start : start + 12] = 5.0 + 4.0 * np.arange(12)
        day[start + 12 :] = 49.0
        out.append(day + rng.normal(0.0, 0.5, DAY))
    return np.concatenate(out)


def test_a_ramp_seen_from_its_start_is_followed(
    make_frame: Callable[[dict[str, np.ndarray]], pd.DataFrame],
) -> None:
    rng = np.random.default_rng(5)
    y = _ramps(12, rng)
    # Cut the last day 3 steps into its ramp: persistence holds, the analogs climb.
    start = int(np.argmax(np.diff(y[-DAY:]) > 2.0))
    cut = len(y) - DAY + start + 3
    frame = make_frame({"pool/demand": y[:cut]})
    truth = y[cut : cut + 6]
    analog = Analog(pattern=8, neighbours=5, horizon=6).fit(frame).predict(6)
    persistence = Persistence(horizon=6).fit(frame).predict(6)
    analog_error = np.abs(analog["mean"].to_numpy() - truth).mean()
    persistence_error = np.abs(persistence["mean"].to_numpy() - truth).mean()
    assert analog_error < 0.3 * persistence_error


def test_calibration_forecasts_are_those_of_a_fit_ending_at_their_origin(
    make_frame: Callable[[dict[str, np.ndarray]], pd.DataFrame],
) -> None:
    rng = np.random.default_rng(11)
    y = np.cumsum(rng.normal(0.0, 1.0, 10 * DAY))  # crosses zero: no clipping
    # Every stretch a neighbour: the median of all of them moves with any one stretch
    # too many (one whose following steps end after the origin), whatever its distance.
    model = Analog(pattern=8, neighbours=10_000, calibration=20, stride=3, horizon=6)
    residuals = model.fit(make_frame({"s": y})).fits_["s"].residuals
    origins = len(y) - 2 - 3 * np.arange(20)[::-1]
    steps = np.arange(1, 7)
    for row in (0, 7, 13):
        o = int(origins[row])
        alone = model.fit(make_frame({"s": y[: o + 1]})).predict(6)["mean"].to_numpy()
        np.testing.assert_allclose(y[o + steps] - residuals[row], alone)


def test_a_constant_series_forecasts_the_constant(
    make_frame: Callable[[dict[str, np.ndarray]], pd.DataFrame],
) -> None:
    frame = make_frame({"flat": np.full(6 * DAY, 7.0)})
    out = Analog(pattern=12, neighbours=10, horizon=6).fit(frame).predict(6)
    np.testing.assert_allclose(out["mean"].to_numpy(), 7.0)


def test_a_gap_in_the_present_stretch_means_no_change(
    make_frame: Callable[[dict[str, np.ndarray]], pd.DataFrame],
) -> None:
    y = _ramps(8, np.random.default_rng(2))
    y[-3] = np.nan
    out = Analog(pattern=8, neighbours=5, horizon=6).fit(make_frame({"s": y})).predict(6)
    np.testing.assert_allclose(out["mean"].to_numpy(), y[-1])


def test_stretches_with_gaps_are_never_neighbours(
    make_frame: Callable[[dict[str, np.ndarray]], pd.DataFrame],
) -> None:
    y = _ramps(8, np.random.default_rng(3))
    y[100:140] = np.nan
    out = Analog(pattern=8, neighbours=5, horizon=6).fit(make_frame({"s": y})).predict(6)
    assert np.isfinite(out["mean"].to_numpy()).all()


def test_past_the_horizon_the_last_move_is_held(
    make_frame: Callable[[dict[str, np.ndarray]], pd.DataFrame],
) -> None:
    y = _ramps(8, np.random.default_rng(4))
    out = Analog(pattern=8, neighbours=5, horizon=6).fit(make_frame({"s": y})).predict(9)
    mean = out["mean"].to_numpy()
    np.testing.assert_allclose(mean[6:], mean[5])


def test_bad_hyperparameters_are_refused() -> None:
    with pytest.raises(ValueError, match="pattern, neighbours"):
        Analog(pattern=0)


def test_of_equally_close_stretches_the_most_recent_are_the_neighbours(
    make_frame: Callable[[dict[str, np.ndarray]], pd.DataFrame],
) -> None:
    # Early on, four steps at 0 then four at 5, again and again: every flat stretch of
    # four was followed by a jump (+5 or -5). Lately, flat for good. Every flat stretch
    # is at distance 0 from the flat present; the recent ones say "no change".
    early = np.tile(np.r_[np.zeros(4), np.full(4, 5.0)], 40)
    y = np.r_[early, np.zeros(60)]
    out = Analog(pattern=4, neighbours=5, horizon=2).fit(make_frame({"s": y})).predict(2)
    np.testing.assert_array_equal(out["mean"].to_numpy(), 0.0)
