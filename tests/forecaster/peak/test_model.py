"""PeakQuantileForecaster: the estimator contract, non-crossing, no look-ahead, new series."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError, NotFittedError
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.peak.types import LAST, LEAD, SCALE
from tests.forecaster.peak.fleet import make_fleet

FAST = {"max_iter": 15, "max_leaf_nodes": 7, "min_samples_leaf": 20}


def small_model(**kw: object) -> PeakQuantileForecaster:
    params = {"lead_steps": (1, 2), "quantiles": (0.5, 0.9, 0.95), **FAST, **kw}
    return PeakQuantileForecaster(**params)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def fitted(fleet: pd.DataFrame) -> PeakQuantileForecaster:
    return small_model().fit(fleet)


def test_init_only_stores_params_and_fit_returns_self(fleet: pd.DataFrame) -> None:
    model = small_model(random_state=3)
    assert not [k for k in vars(model) if k.endswith("_")]
    assert model.get_params()["random_state"] == 3
    assert model.fit(fleet) is model
    learned = {k for k in vars(model) if k.endswith("_")}
    assert {"models_", "step_", "feature_names_", "n_train_rows_"} <= learned
    # One model per lead and quantile for the whole fleet, not per series.
    assert len(model.models_) == 2 * 3
    assert sorted(model.series_) == ["big/demand_gpus", "mid/demand_gpus", "small/demand_gpus"]
    clone = PeakQuantileForecaster(**model.get_params())
    assert clone.get_params() == model.get_params()


def test_predict_before_fit_raises(fleet: pd.DataFrame) -> None:
    with pytest.raises(NotFittedError, match="call fit"):
        small_model().predict_peak(fleet)


def test_same_seed_same_forecast(fleet: pd.DataFrame, fitted: PeakQuantileForecaster) -> None:
    again = small_model().fit(fleet)
    pd.testing.assert_frame_equal(again.predict_peak(fleet), fitted.predict_peak(fleet))


def test_forecast_frame_shape(fleet: pd.DataFrame, fitted: PeakQuantileForecaster) -> None:
    out = fitted.predict_peak(fleet)
    assert list(out.columns) == ["unique_id", "ds", LEAD, LAST, SCALE, "q0.5", "q0.9", "q0.95"]
    assert len(out) == 3 * 2  # the last origin of each series, each lead
    assert (out["ds"] == fleet["ds"].max()).all()
    assert (out[SCALE] > 0).all()
    # A series with nothing at or after ``since`` gives no rows, not an error.
    empty = fitted.predict_peak(fleet, since=fleet["ds"].max() + pd.Timedelta(days=1))
    assert empty.empty
    assert list(empty.columns) == list(out.columns)


def test_quantiles_never_cross(fleet: pd.DataFrame, fitted: PeakQuantileForecaster) -> None:
    out = fitted.predict_peak(fleet, since=fleet["ds"].min())
    values = out[["q0.5", "q0.9", "q0.95"]].to_numpy()
    assert (np.diff(values, axis=1) >= 0).all()
    # Nor across leads: the peak over 2 steps is at least the peak over 1.
    wide = out.pivot_table(index=["unique_id", "ds"], columns=LEAD, values="q0.9")
    assert (wide[2] >= wide[1]).all()
    assert (out[["q0.5", "q0.9", "q0.95"]].to_numpy() >= 0).all()  # demand never < 0


def test_no_look_ahead(fleet: pd.DataFrame, fitted: PeakQuantileForecaster) -> None:
    origin = fleet["ds"].min() + pd.Timedelta(days=3)
    changed = fleet.copy()
    later = changed["ds"] > origin
    rng = np.random.default_rng(1)
    changed.loc[later, "y"] = rng.uniform(0, 1000, int(later.sum()))
    before = fitted.predict_peak(fleet, since=origin)
    after = fitted.predict_peak(changed, since=origin)
    at = before["ds"] == origin
    pd.testing.assert_frame_equal(
        before[at].reset_index(drop=True), after[after["ds"] == origin].reset_index(drop=True)
    )
    # The data after the origin does change later forecasts, so the check can fail.
    assert not before[~at][["q0.9"]].equals(after[after["ds"] != origin][["q0.9"]])


def test_new_short_series_borrows_the_fleet_model(fitted: PeakQuantileForecaster) -> None:
    new = make_fleet({"fresh": 30.0}, days=0.5, seed=7, start="2024-01-05")
    out = fitted.predict_peak(new, since=new["ds"].min())
    assert set(out["unique_id"]) == {"fresh/demand_gpus"}
    assert len(out) == 2 * 72
    assert np.isfinite(out[["q0.5", "q0.9", "q0.95"]].to_numpy()).all()
    headroom = out["q0.95"] - out[LAST]
    # Scaled to the new pool: buffers in its own units, not the 400-GPU pool's.
    assert headroom.median() < 30.0


def test_global_fit_covers_pools_of_every_size(fleet: pd.DataFrame) -> None:
    model = small_model(quantiles=(0.9,)).fit(
        fleet[fleet["ds"] < fleet["ds"].min() + pd.Timedelta(days=4)]
    )
    out = model.predict_peak(fleet, since=fleet["ds"].min() + pd.Timedelta(days=4))
    out = out[out[LEAD] == 1]
    peaks = []
    for uid, group in out.groupby("unique_id"):
        series = fleet[fleet["unique_id"] == uid].set_index("ds")["y"]
        realised = series.shift(-1).reindex(group["ds"]).to_numpy()
        ok = np.isfinite(realised)
        peaks.append(float(np.mean(realised[ok] <= group["q0.9"].to_numpy()[ok])))
    # Out of sample on every pool, big or small: roughly the nominal 0.9, not 0.5 or 1.
    assert all(0.75 <= p <= 1.0 for p in peaks), peaks


def test_bad_input_is_named(fleet: pd.DataFrame) -> None:
    with pytest.raises(DataValidationError, match="lacks columns"):
        small_model().fit(fleet.rename(columns={"y": "value"}))
    with pytest.raises(DataValidationError, match="no target series"):
        small_model(targets=("queue_gpus",)).fit(fleet)
    with pytest.raises(ValueError, match="quantiles"):
        small_model(quantiles=(0.9, 1.5)).fit(fleet)
    with pytest.raises(ValueError, match="lead_steps"):
        small_model(lead_steps=(0,)).fit(fleet)
    mixed = pd.concat([fleet, make_fleet({"nab": 5.0}).assign(ds=lambda f: f["ds"].dt.floor("D"))])
    with pytest.raises(DataValidationError):
        small_model().fit(mixed)


def _idle_pool(ds: pd.Series, jobs: bool) -> pd.DataFrame:
    """A pool with no demand, or two short 8-GPU jobs: its scale sits at the floor."""
    stamps = pd.DatetimeIndex(ds.unique()).sort_values()
    demand = np.zeros(len(stamps))
    if jobs:
        demand[200:203] = 8.0
        demand[500:502] = 8.0
    return pd.DataFrame({"unique_id": "idle/demand_gpus", "ds": stamps, "y": demand})


def test_an_idle_pool_does_not_steer_the_fleet(fleet: pd.DataFrame) -> None:
    # Two short jobs on an idle pool are a few rows of tens of scale units (the target
    # clip) and must count as a few rows, no more: weighted by scale over the pool's
    # median scale they weighed ~1e9 each and the busy pools' bounds followed them.
    cutoff = fleet["ds"].min() + pd.Timedelta(days=4)
    buffers = []
    for jobs in (False, True):
        frame = pd.concat([fleet, _idle_pool(fleet["ds"], jobs)], ignore_index=True)
        model = small_model(quantiles=(0.9,)).fit(frame[frame["ds"] < cutoff])
        out = model.predict_peak(fleet, since=cutoff)
        buffers.append((out["q0.9"] - out[LAST]).groupby(out["unique_id"]).mean())
    change = (buffers[1] - buffers[0]).abs() / buffers[0].abs()
    assert (change < 0.1).all(), change.to_dict()
