"""The peak-quantile forecaster in the replay: past only, its own series, shared fits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError
from forecaster.types import DS, UID, Y
from pipelines.config.pools import PoolConfig
from pipelines.simulate.engine import simulate
from pipelines.simulate.foresight import ForesightPolicy
from pipelines.simulate.peak import ModelCache, PeakReplayForecaster
from pipelines.simulate.replay_forecast import PointForecast
from pipelines.simulate.types import History
from tests.forecaster.peak.serving import served_bounds

STEP = pd.Timedelta(minutes=10)
START = pd.Timestamp("2024-05-01", tz="UTC")
DAYS = 5
LEVELS = (0.5, 0.9, 0.95)
SMALL = {"max_iter": 15, "min_samples_leaf": 20, "max_rows": 4000, "max_bins": 32}


def fleet(seed: int = 0, pools: int = 3) -> pd.DataFrame:
    """Pools with a daily cycle, random bursts and a queue that leads the bursts."""
    rng = np.random.default_rng(seed)
    n = DAYS * 144
    ds = pd.date_range(START, periods=n, freq=STEP)
    rows = []
    for k in range(pools):
        cycle = 40 + 20 * np.sin(2 * np.pi * np.arange(n) / 144 + k)
        queue = rng.gamma(1.0, 4.0, n)
        bursts = np.convolve(rng.binomial(1, 0.03, n) * rng.gamma(2.0, 10.0, n), np.ones(3))[:n]
        demand = np.maximum(cycle + bursts + queue + rng.normal(0, 2, n), 0.0)
        rows.append(pd.DataFrame({UID: f"p{k}/demand_gpus", DS: ds, Y: demand}))
        rows.append(pd.DataFrame({UID: f"p{k}/pending_gpus", DS: ds, Y: queue}))
    return pd.concat(rows, ignore_index=True)


def replay_of(frame: pd.DataFrame, uid: str = "p0/demand_gpus") -> pd.Series:
    rows = frame[(frame[UID] == uid) & (frame[DS] >= START + timedelta(days=3))]
    return pd.Series(rows[Y].to_numpy(), index=pd.DatetimeIndex(rows[DS]), name=uid)


def pool(quantile: float = 0.9) -> PoolConfig:
    return PoolConfig(
        name="p0",
        node_group_id="p0-ng",
        gpus_per_node=8,
        max_nodes=40,
        lead_time=timedelta(minutes=20),
        quantile=quantile,
        target_utilisation=1.0,
    )


class Recorder:
    """Wraps a replay forecaster and keeps every bound it returned, by step."""

    def __init__(self, inner: PeakReplayForecaster) -> None:
        self.inner = inner
        self.bounds: list[dict[float, float]] = []

    def forecast(self, history: History, horizon: int, levels: Sequence[float]) -> PointForecast:
        made = self.inner.forecast(history, horizon, levels)
        self.bounds.append({q: float(v[0]) for q, v in made.quantiles.items()})
        return made


def replay(frame: pd.DataFrame, quantile: float = 0.9, **kwargs: object) -> Recorder:
    recorder = Recorder(
        PeakReplayForecaster(frame, "p0/demand_gpus", LEVELS, params=SMALL, **kwargs)
    )  # type: ignore[arg-type]
    config = pool(quantile)
    simulate(replay_of(frame), config, ForesightPolicy(config, recorder))
    return recorder


def test_changing_the_future_of_every_series_leaves_earlier_forecasts_unchanged():
    base = fleet()
    cut = START + timedelta(days=3, hours=30)  # mid-day of the second replayed day
    changed = base.copy()
    later = changed[DS] > cut
    changed.loc[later, Y] = changed.loc[later, Y] * 3.0 + 50.0  # every series, covariates too
    before, after = replay(base), replay(changed)
    steps = int((cut - (START + timedelta(days=3))) / STEP) + 1
    assert before.bounds[:steps] == after.bounds[:steps]
    # The perturbation is real: later forecasts differ, so the check above could fail.
    assert before.bounds[steps:] != after.bounds[steps:]


def test_bounds_never_cross_and_cover_about_their_level():
    frame = fleet(seed=3)
    recorder = PeakReplayForecaster(frame, "p0/demand_gpus", LEVELS, params=SMALL)
    config = pool(0.9)
    demand = replay_of(frame)
    made: list[dict[float, float]] = []

    class All:
        def forecast(self, history: History, horizon: int, levels: Sequence[float]):  # type: ignore[no-untyped-def]
            out = recorder.forecast(history, horizon, LEVELS)
            made.append({q: float(v[0]) for q, v in out.quantiles.items()})
            return out

    simulate(demand, config, ForesightPolicy(config, All()))
    values = np.array([[m[q] for q in LEVELS] for m in made])
    assert (np.diff(values, axis=1) >= -1e-9).all()
    lead = config.lead_time // STEP
    y = demand.to_numpy()
    peaks = np.array([y[t + 1 : t + 1 + lead].max() for t in range(len(y) - lead)])
    coverage = (peaks <= values[: len(peaks), 1]).mean()
    assert 0.8 <= coverage <= 0.98  # nominal 0.9, calibrated online


def test_the_fleet_must_hold_the_replayed_series():
    frame = fleet()
    other = PeakReplayForecaster(frame, "p1/demand_gpus", LEVELS, params=SMALL)
    config = pool()
    with pytest.raises(DataValidationError, match="replay's demand"):
        simulate(replay_of(frame), config, ForesightPolicy(config, other))
    with pytest.raises(DataValidationError, match="no series"):
        PeakReplayForecaster(frame, "nope/demand_gpus", LEVELS)


def test_an_unfitted_level_is_refused():
    frame = fleet()
    config = pool(quantile=0.8)
    forecaster = PeakReplayForecaster(frame, "p0/demand_gpus", LEVELS, params=SMALL)
    with pytest.raises(ValueError, match=r"0\.8"):
        simulate(replay_of(frame), config, ForesightPolicy(config, forecaster))


def test_a_quantile_sweep_fits_each_day_once_and_pools_share_the_fits():
    frame = fleet()
    models: ModelCache = {}
    first = PeakReplayForecaster(frame, "p0/demand_gpus", LEVELS, params=SMALL, models=models)
    for q in (0.5, 0.9):
        config = pool(q)
        simulate(replay_of(frame), config, ForesightPolicy(config, first))
    fitted = len(models)
    assert fitted == 3  # the warm-up day and the two replayed days
    second = PeakReplayForecaster(frame, "p1/demand_gpus", LEVELS, params=SMALL, models=models)
    config = pool(0.9)
    simulate(replay_of(frame, "p1/demand_gpus"), config, ForesightPolicy(config, second))
    assert len(models) == fitted


def test_without_a_fit_the_reference_or_persistence_answers():
    frame = fleet()
    late = frame[frame[DS] >= START + timedelta(days=2, hours=20)]  # too little to fit at first
    recorder = replay(late.reset_index(drop=True))
    assert all(np.isfinite(b[0.9]) for b in recorder.bounds)


def test_forecasters_with_other_levels_sharing_the_cache_get_their_own_fits():
    frame = fleet()
    models: ModelCache = {}
    config = pool(0.9)
    for levels in (LEVELS, (0.9, 0.99)):
        forecaster = PeakReplayForecaster(
            frame, "p0/demand_gpus", levels, params=SMALL, models=models
        )
        simulate(replay_of(frame), config, ForesightPolicy(config, forecaster))
    assert len(models) == 6  # three days for each set of levels


def test_the_replay_provisions_the_peak_as_serving_does_without_a_utilisation_margin():
    frame = fleet()
    models: ModelCache = {}
    desired = {}
    for utilisation in (0.5, 1.0):
        config = pool(0.9).model_copy(update={"target_utilisation": utilisation})
        forecaster = PeakReplayForecaster(
            frame, "p0/demand_gpus", LEVELS, params=SMALL, models=models
        )
        policy = ForesightPolicy(config, forecaster)
        result = simulate(replay_of(frame), config, policy)
        desired[utilisation] = result.frame["desired_nodes"].to_numpy()
        assert policy.last is not None
        assert "of the demand peak over the next 20 min" in policy.last.explanation.summary

    np.testing.assert_array_equal(desired[0.5], desired[1.0])


def test_the_replay_issues_the_bound_the_forecast_job_would_serve():
    frame = fleet()
    recorder = replay(frame)
    forecaster = recorder.inner
    series = frame[frame[UID] == "p0/demand_gpus"].sort_values(DS)
    ds, y = pd.DatetimeIndex(series[DS]), series[Y].to_numpy()
    lead = 2  # 20 min at 10 min
    first = int(ds.searchsorted(START + timedelta(days=3)))
    for p in (first + 5, first + 150):  # one origin of each replayed day
        # What the forecast job would have stored at every origin: the model's raw bounds.
        made = [forecaster._raw_bounds(i, lead) for i in range(p + 1)]
        raw = np.array([bounds for bounds, _ in made])
        scale = np.array([s for _, s in made])
        served = served_bounds(ds[: p + 1], y[: p + 1], raw, scale, LEVELS, lead, step=STEP)
        assert recorder.bounds[p - first][0.9] == pytest.approx(served[LEVELS.index(0.9)])


def test_aci_leaves_the_levels_its_window_cannot_calibrate_unless_told():
    # Default: ACI calibrates q0.9 but not q0.995 (under 5 misses expected in 288 scores);
    # min_misses=0 calibrates both. Only the q0.995 bounds may differ.
    frame = fleet()
    models: ModelCache = {}
    levels = (0.9, 0.995)
    default = PeakReplayForecaster(frame, "p0/demand_gpus", levels, params=SMALL, models=models)
    every = PeakReplayForecaster(
        frame, "p0/demand_gpus", levels, params=SMALL, models=models, min_misses=0.0
    )
    series = frame[frame[UID] == "p0/demand_gpus"].sort_values(DS)
    first = int(pd.DatetimeIndex(series[DS]).searchsorted(START + timedelta(days=3)))
    positions = range(first + 100, first + 140)
    a = np.array([default._bounds(p, 2) for p in positions])
    b = np.array([every._bounds(p, 2) for p in positions])
    np.testing.assert_array_equal(a[:, 0], b[:, 0])
    assert not np.allclose(a[:, 1], b[:, 1])


def test_a_safety_margin_past_the_top_quantile_reaches_lower_waiting_at_higher_cost():
    frame = fleet(seed=2)
    models: ModelCache = {}
    forecaster = PeakReplayForecaster(frame, "p0/demand_gpus", LEVELS, params=SMALL, models=models)
    results = {}
    for margin in (0.0, 4.0):
        config = pool(0.95).model_copy(update={"safety_margin": margin})
        policy = ForesightPolicy(config, forecaster)
        results[margin] = simulate(replay_of(frame), config, policy)
        assert policy.last is not None
        if margin:  # the served words say what the margin added
            assert "a safety margin of 4 x the demand's recent volatility" in (
                policy.last.explanation.summary
            )

    assert results[4.0].waiting_gpu_hours < results[0.0].waiting_gpu_hours
    assert results[4.0].gpu_hours_provisioned > results[0.0].gpu_hours_provisioned


class Scales(Recorder):
    """Keeps the scale every replayed peak forecast carried."""

    def __init__(self, inner: PeakReplayForecaster) -> None:
        super().__init__(inner)
        self.scales: list[float | None] = []

    def forecast(self, history: History, horizon: int, levels: Sequence[float]) -> PointForecast:
        made = super().forecast(history, horizon, levels)
        self.scales.append(made.scale)
        return made


def test_the_replayed_peak_forecast_carries_the_models_scale():
    frame = fleet(seed=1)
    recorder = Scales(PeakReplayForecaster(frame, "p0/demand_gpus", LEVELS, params=SMALL))
    config = pool(0.9)
    simulate(replay_of(frame), config, ForesightPolicy(config, recorder))
    assert recorder.scales
    assert all(s is not None and s > 0 for s in recorder.scales)
