"""The exponential smoothing shortcuts give exactly what the slow paths give.

Two shortcuts make ETS (and MSTL, which uses the same estimator and filter) cheaper:
the parameters are taken from statsmodels' optimiser without its in-sample pass, and
the filter forms every calibration origin's forecast at once. Both must leave the
forecasts unchanged, bit for bit: these tests rebuild the slow paths (statsmodels'
public ``fit`` and a state-then-forecast loop) and compare.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from statsmodels.tsa.holtwinters import ExponentialSmoothing as HoltWinters

from forecaster.models.ets import (
    SmoothingParams,
    SmoothingState,
    estimate_params,
    smoothing_filter,
    smoothing_forecast,
)

DAY = 48


def _series(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    bursts = np.where(rng.random(n) < 0.03, rng.uniform(10.0, 40.0, n), 0.0)
    trend = 0.01 * t
    return 50.0 + trend + 15.0 * np.sin(2 * np.pi * t / DAY) + rng.normal(0, 2, n) + bursts


def _public_fit(y: np.ndarray, trend: bool, damped: bool, m: int) -> SmoothingParams:
    """The parameters as statsmodels' public ``fit`` results report them."""
    model = HoltWinters(
        y,
        trend="add" if trend else None,
        damped_trend=damped,
        seasonal="add" if m else None,
        seasonal_periods=m or None,
        initialization_method="heuristic" if m else "estimated",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = model.fit(use_brute=False).params

    def get(key: str, default: float) -> float:
        value = p.get(key, default)
        return default if value is None or not np.isfinite(value) else float(value)

    return SmoothingParams(
        alpha=get("smoothing_level", 1.0),
        beta=get("smoothing_trend", 0.0) if trend else 0.0,
        gamma=get("smoothing_seasonal", 0.0) if m else 0.0,
        phi=get("damping_trend", 1.0) if damped else 1.0,
        level0=float(p["initial_level"]),
        trend0=get("initial_trend", 0.0) if trend else 0.0,
        season0=np.asarray(p["initial_seasons"], dtype=np.float64) if m else np.zeros(0),
    )


@pytest.mark.parametrize(
    ("trend", "damped", "m"),
    [(True, True, DAY), (False, False, DAY), (True, True, 0), (True, False, 0), (False, False, 0)],
)
@pytest.mark.parametrize("seed", [1, 2])
def test_estimates_equal_statsmodels_public_fit(
    trend: bool, damped: bool, m: int, seed: int
) -> None:
    y = _series(12 * DAY, seed)
    mine = estimate_params(y, trend, damped, m)
    theirs = _public_fit(y, trend, damped, m)
    for name in ("alpha", "beta", "gamma", "phi", "level0", "trend0"):
        assert getattr(mine, name) == getattr(theirs, name), name
    np.testing.assert_array_equal(mine.season0, theirs.season0)


def _filter_one_origin_at_a_time(
    y: np.ndarray, params: SmoothingParams, origins: range, horizon: int
) -> tuple[SmoothingState, np.ndarray]:
    """The recursion with a state and a forecast built at every origin (the slow path)."""
    level, trend, phi = params.level0, params.trend0, params.phi
    season = params.season0.copy()
    m = len(season)
    forecasts = np.full((len(origins), horizon), np.nan)
    for t, value in enumerate(y.tolist()):
        prior = level + phi * trend
        s = season[t % m] if m else 0.0
        new_level = params.alpha * (value - s) + (1.0 - params.alpha) * prior
        trend = params.beta * (new_level - level) + (1.0 - params.beta) * phi * trend
        if m:
            season[t % m] = params.gamma * (value - prior) + (1.0 - params.gamma) * s
        level = new_level
        if t in origins:
            now = SmoothingState(level=level, trend=trend, phi=phi, season=season.copy(), n=t + 1)
            forecasts[t - origins.start] = smoothing_forecast(now, horizon)
    return SmoothingState(level, trend, phi, season, len(y)), forecasts


@pytest.mark.parametrize("m", [0, 7, DAY])
@pytest.mark.parametrize("horizon", [6, 2 * DAY + 5])  # shorter and longer than a season
def test_filter_forecasts_equal_a_state_per_origin(m: int, horizon: int) -> None:
    rng = np.random.default_rng(3)
    y = _series(10 * DAY, seed=4)
    params = SmoothingParams(0.3, 0.05, 0.2, 0.97, 50.0, 0.1, rng.normal(0, 5, m))
    origins = range(6 * DAY, len(y) + 3)  # the last origins lie past the end: NaN rows
    state, forecasts = smoothing_filter(y, params, origins, horizon)
    want_state, want = _filter_one_origin_at_a_time(y, params, origins, horizon)
    np.testing.assert_array_equal(forecasts, want)
    assert np.isnan(forecasts[-3:]).all()
    assert (state.level, state.trend, state.n) == (want_state.level, want_state.trend, len(y))
    np.testing.assert_array_equal(state.season, want_state.season)
    # The parameters (the prototype's season0) are never modified by the filter.
    assert params.season0 is not state.season
