"""Exponential smoothing (additive Holt-Winters) with a damped trend and a daily season.

Details: docs/forecasting.md, "Notes from the code", `forecaster/models/ets.py`."""

from __future__ import annotations

import functools
import warnings
from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from forecaster.exceptions import ModelError, UpdateError
from forecaster.models.base import FloatArray, OnePassForecaster
from forecaster.models.residuals import residuals_at


@dataclass(frozen=True)
class SmoothingParams:
    """Frozen smoothing parameters and initial states of additive Holt-Winters."""

    alpha: float
    beta: float
    gamma: float
    phi: float
    level0: float
    trend0: float
    season0: FloatArray
    """Initial seasonal indices for the phases of steps ``0..m-1``; empty: no season."""


@dataclass(frozen=True)
class SmoothingState:
    """Level, trend and seasonal indices after the last observation."""

    level: float
    trend: float
    phi: float
    season: FloatArray
    """Seasonal index per phase; the next step ``j`` ahead uses ``season[(n - 1 + j) % m]``."""
    n: int
    params: SmoothingParams | None = None
    """The parameters the recursion ran with, kept so an update can continue it; None in
    states saved by older versions."""


def advance(state: SmoothingState, values: FloatArray) -> SmoothingState:
    """Continue the recursion of ``state`` over ``values`` (the observations after it).

    The parameters are the state's own: the result is the state the fit's recursion
    would have reached had it run over ``values`` too.

    Raises:
        UpdateError: when the state does not keep its parameters (an older version's)
            or a value is not finite.
    """
    params = state.params
    if params is None:
        raise UpdateError("smoothing state without its parameters (saved by an older version)")
    if not np.all(np.isfinite(values)):
        raise UpdateError("exponential smoothing needs finite values to update with")
    if len(values) == 0:
        return state
    m = len(state.season)
    # Phase p of the continuation is phase (n + p) % m of the state's indexing.
    offset = state.n % m if m else 0
    start = replace(
        params, level0=state.level, trend0=state.trend, season0=np.roll(state.season, -offset)
    )
    after, _ = smoothing_filter(values, start, range(0), 1)
    return SmoothingState(
        level=after.level,
        trend=after.trend,
        phi=after.phi,
        season=np.roll(after.season, offset),
        n=state.n + len(values),
        params=params,
    )


def newer_values(y: FloatArray, ds: pd.DatetimeIndex, last_ds: pd.Timestamp) -> FloatArray:
    """The values of ``y`` after ``last_ds``, which ``ds`` must hold (no gap to bridge).

    Raises:
        UpdateError: when ``ds`` does not hold ``last_ds``.
    """
    at = int(ds.searchsorted(last_ds))
    if at >= len(ds) or ds[at] != last_ds:
        raise UpdateError(f"the history does not hold the fit's last observation {last_ds}")
    return y[at + 1 :]


def smoothing_forecast(state: SmoothingState, h: int) -> FloatArray:
    """Return the ``h``-step point forecast of a smoothing state."""
    damp = np.cumsum(state.phi ** np.arange(1, h + 1))
    out = state.level + damp * state.trend
    m = len(state.season)
    if m:
        out = out + state.season[(state.n - 1 + np.arange(1, h + 1)) % m]
    return np.asarray(out, dtype=np.float64)


def smoothing_filter(
    y: FloatArray, params: SmoothingParams, origins: range, horizon: int
) -> tuple[SmoothingState, FloatArray]:
    """Run the additive recursion over ``y`` with frozen parameters.

    The recursion keeps only what the origins' forecasts need (level and trend at each
    origin, every seasonal index as written); the forecasts are then formed for all
    origins at once, with the same arithmetic as :func:`smoothing_forecast` from each
    origin's state (a state and a forecast per origin was most of the filter's cost).

    Returns:
        The state after the last value and the forecasts from each origin in
        ``origins`` (indices of the last value seen), shape ``(len(origins), horizon)``.
    """
    alpha, beta, gamma, phi = params.alpha, params.beta, params.gamma, params.phi
    level, trend = params.level0, params.trend0
    season = params.season0.astype(np.float64, copy=True)
    m = len(season)
    n = len(y)
    # Seasonal index written at step t, at position m + t; the initial indices of
    # phase p sit at position p (as if written at step p - m).
    written = np.concatenate([season, np.zeros(n if m else 0)])
    start = origins.start if len(origins) else n
    stop = min(origins.stop, n)
    levels = np.zeros(max(0, stop - start))
    trends = np.zeros(max(0, stop - start))
    for t, value in enumerate(y.tolist()):
        prior = level + phi * trend
        s = season[t % m] if m else 0.0
        new_level = alpha * (value - s) + (1.0 - alpha) * prior
        trend = beta * (new_level - level) + (1.0 - beta) * phi * trend
        if m:
            season[t % m] = written[m + t] = gamma * (value - prior) + (1.0 - gamma) * s
        level = new_level
        if start <= t < stop:
            levels[t - start] = level
            trends[t - start] = trend
    forecasts = np.full((len(origins), horizon), np.nan)
    if stop > start:
        steps = np.arange(1, horizon + 1)
        damp = np.cumsum(phi**steps)
        made = levels[:, None] + damp[None, :] * trends[:, None]
        if m:
            # From origin t, step j uses phase (t + j) % m as it stood at t: last
            # written at step t + j - m * ceil(j / m).
            at = np.arange(start, stop)[:, None]
            made = made + written[m + at + steps - m * -(-steps // m)]
        forecasts[: stop - start] = made
    return SmoothingState(level=level, trend=trend, phi=phi, season=season, n=n), forecasts


def estimate_params(
    y: FloatArray, trend: bool, damped: bool, season_length: int
) -> SmoothingParams:
    """Estimate Holt-Winters parameters with statsmodels, simplifying on failure.

    Tries the requested specification, then without the season, then a simple level.
    A constant series needs no optimiser: its level is the value.

    Raises:
        ModelError: when even the simple level cannot be estimated.
    """
    if not np.all(np.isfinite(y)):
        raise ModelError(
            "exponential smoothing needs finite values; clean the frame (fill gaps) first"
        )
    if np.ptp(y) == 0.0:
        return SmoothingParams(1.0, 0.0, 0.0, 1.0, float(y[0]), 0.0, np.zeros(0))
    specs: list[tuple[bool, int]] = [(trend, season_length)]
    if season_length:
        specs.append((trend, 0))
    if trend:
        specs.append((False, 0))
    last: Exception | None = None
    for use_trend, m in specs:
        try:
            return _statsmodels_params(y, use_trend, damped and use_trend, m)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError) as exc:
            last = exc
    raise ModelError(
        f"exponential smoothing failed on {len(y)} observations even as a simple level: {last}"
    ) from last


def _statsmodels_params(y: FloatArray, trend: bool, damped: bool, m: int) -> SmoothingParams:
    model = _params_only_holt_winters()(
        y,
        trend="add" if trend else None,
        damped_trend=damped,
        seasonal="add" if m else None,
        seasonal_periods=m or None,
        # The heuristic start avoids optimising m initial seasonal indices (5x faster).
        initialization_method="heuristic" if m else "estimated",
    )
    with warnings.catch_warnings():
        # Convergence warnings are common on flat or zero-heavy series; the result is
        # checked for finiteness below, which is what matters for forecasting.
        warnings.simplefilter("ignore")
        # No brute-force grid for the optimiser's starting point: it was 90 % of the fit
        # (0.37 s vs 0.025 s on 13 days of 5-min data) and reached the same sum of
        # squared errors on the benchmark's series.
        estimates: _Estimates = model.fit(use_brute=False)
    p = estimates.params

    def get(key: str, default: float) -> float:
        value = p.get(key, default)
        return default if value is None or not np.isfinite(value) else float(value)

    # The initial trend as statsmodels' results report it: damped by phi, then divided
    # by phi again (the same value up to rounding; kept so the estimates are identical).
    raw_phi = _as_float(p.get("damping_trend")) if damped else 1.0
    damped_trend0 = _as_float(p.get("initial_trend")) * raw_phi if trend else np.nan
    initial_trend = damped_trend0 / raw_phi if raw_phi > 0 else 0.0
    params = SmoothingParams(
        alpha=get("smoothing_level", 1.0),
        beta=get("smoothing_trend", 0.0) if trend else 0.0,
        gamma=get("smoothing_seasonal", 0.0) if m else 0.0,
        phi=get("damping_trend", 1.0) if damped else 1.0,
        level0=_as_float(p.get("initial_level")),
        trend0=initial_trend if trend and np.isfinite(initial_trend) else 0.0,
        season0=np.asarray(p["initial_seasons"], dtype=np.float64) if m else np.zeros(0),
    )
    if not (np.isfinite(params.level0) and np.all(np.isfinite(params.season0))):
        raise ValueError("statsmodels returned non-finite initial states")
    return params


def _as_float(value: Any) -> float:
    """A float64 as statsmodels stores it (``None`` becomes NaN)."""
    return float(np.float64(np.nan if value is None else value))


@dataclass
class _Estimates:
    """What :func:`_params_only_holt_winters`' ``fit`` returns: the estimates only."""

    params: dict[str, Any]
    _results: Any = field(default_factory=SimpleNamespace)  # fit sets mle_retvals on it


@functools.cache
def _params_only_holt_winters() -> type[Any]:
    """statsmodels' Holt-Winters whose ``fit`` stops once the parameters are estimated."""
    from statsmodels.tsa.holtwinters import ExponentialSmoothing as _HoltWinters

    class _ParamsOnlyHoltWinters(_HoltWinters):  # type: ignore[misc]
        def _predict(self, h: int | None = None, **estimates: Any) -> _Estimates:
            return _Estimates(params=estimates)

    return _ParamsOnlyHoltWinters


def calibration_split(n: int, horizon: int, window: int) -> tuple[int, range]:
    """Return the prefix length for parameter estimation and the calibration origins.

    Origins are the last ``window`` positions from which a full ``horizon`` can still be
    scored, capped at half of what is left after the horizon so the prefix keeps at
    least the other half.
    """
    n_origins = max(1, min(window, (n - horizon) // 2))
    last_origin = n - horizon - 1
    first_origin = last_origin - n_origins + 1
    return first_origin + 1, range(first_origin, last_origin + 1)


def mean_abs(residuals: FloatArray) -> float:
    """Mean absolute residual ignoring NaN (``inf`` when there is none)."""
    finite = np.abs(residuals[np.isfinite(residuals)])
    return float(finite.mean()) if finite.size else float("inf")


class SmoothingFamily(OnePassForecaster):
    """Candidates estimated on a prefix, the one with the least calibration error kept.

    The history (its last ``max_history`` values) is split by :func:`calibration_split`;
    each candidate of :meth:`_candidates` is estimated on the prefix and forecasts from
    the calibration origins after it, and the first with the least mean absolute
    residual is the fit. Subclasses store ``max_history`` and ``calibration_window``.
    """

    max_history: int
    calibration_window: int

    def min_history(self) -> int:
        """Return the horizon plus a few points: one calibration window and a prefix."""
        return self.horizon + 8

    def _fit_and_calibrate(self, y: FloatArray, ds: pd.DatetimeIndex) -> tuple[Any, FloatArray]:
        y = y[-self.max_history :]
        prefix, origins = calibration_split(len(y), self.horizon, self.calibration_window)
        best: tuple[float, Any, FloatArray] | None = None
        for state, residuals in self._candidates(y, prefix, origins):
            score = mean_abs(residuals)
            if best is None or score < best[0]:
                best = (score, state, residuals)
        assert best is not None  # every family yields at least one candidate
        return best[1], best[2]

    @abstractmethod
    def _candidates(
        self, y: FloatArray, prefix: int, origins: range
    ) -> Iterator[tuple[Any, FloatArray]]:
        """Yield each candidate's state and calibration residuals, preferred first."""


class ExponentialSmoothing(SmoothingFamily):
    """Additive Holt-Winters: level, optional damped trend, optional daily season.

    Args:
        season_length: steps in one season (288 = a day of 5-min steps); the season is
            dropped when the estimation prefix holds fewer than two seasons; 0 disables.
        trend: whether to model a trend.
        damped_trend: whether the trend is damped (recommended: undamped trends
            overshoot on persistent load series).
        max_history: only the last this many observations are used (4 weeks of 5 min).
        calibration_window: how many recent origins provide out-of-sample residuals.
        select: when true, also try the specification without trend and/or season and
            keep the one with the least mean absolute error on the calibration origins
            (an out-of-sample AutoETS over the additive family).
        horizon: steps ahead the intervals are calibrated for.
    """

    name = "ets"

    def __init__(
        self,
        *,
        season_length: int = 288,
        trend: bool = True,
        damped_trend: bool = True,
        max_history: int = 8064,
        calibration_window: int = 576,
        select: bool = True,
        horizon: int = 36,
        alias: str | None = None,
    ) -> None:
        super().__init__(horizon=horizon, alias=alias)
        self.season_length = season_length
        self.trend = trend
        self.damped_trend = damped_trend
        self.max_history = max_history
        self.calibration_window = calibration_window
        self.select = select

    def _candidates(
        self, y: FloatArray, prefix: int, origins: range
    ) -> Iterator[tuple[SmoothingState, FloatArray]]:
        m = self.season_length if 0 < 2 * self.season_length <= prefix else 0
        trend = self.trend and prefix >= 10
        specs = [(trend, m)]
        if self.select:
            specs += [(t, s) for t in {trend, False} for s in {m, 0} if (t, s) != (trend, m)]
        for use_trend, season in specs:
            params = estimate_params(y[:prefix], use_trend, self.damped_trend, season)
            state, forecasts = smoothing_filter(y, params, origins, self.horizon)
            yield replace(state, params=params), residuals_at(y, origins, forecasts)

    def _update_state(
        self, state: Any, y: FloatArray, ds: pd.DatetimeIndex, last_ds: pd.Timestamp
    ) -> Any:
        """Continue the fit's recursion over the observations after its last one."""
        if not isinstance(state, SmoothingState):
            raise UpdateError(f"expected a SmoothingState, got {type(state).__name__}")
        return advance(state, newer_values(y, ds, last_ds))

    def _predict_series(self, state: Any, h: int) -> FloatArray:
        if not isinstance(state, SmoothingState):
            raise TypeError(f"expected a SmoothingState, got {type(state).__name__}")
        return smoothing_forecast(state, h)
