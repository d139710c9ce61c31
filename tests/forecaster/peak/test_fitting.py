"""The training's peak fit: a model on the fleet, or a reason and no model."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from forecaster.peak.fitting import fit_peak
from forecaster.peak.fleet import fleet_frame, lead_steps, pool_leads
from forecaster.peak.types import LEAD
from forecaster.types import quantile_column

SMALL = {"max_iter": 20, "min_samples_leaf": 20}


def test_fit_peak_fits_every_lead_and_level_on_the_fleet(fleet: pd.DataFrame) -> None:
    fit = fit_peak(fleet, leads=(3, 1, 3), levels=(0.95, 0.9), params=SMALL)

    assert fit.model is not None
    assert fit.reason == ""
    assert fit.leads == (1, 3)
    assert fit.levels == (0.9, 0.95)
    made = fit.model.predict_peak(fleet)
    assert sorted(made[LEAD].unique()) == [1, 3]
    assert set(made["unique_id"]) == {"big/demand_gpus", "mid/demand_gpus", "small/demand_gpus"}
    assert (made[quantile_column(0.95)] >= made[quantile_column(0.9)]).all()
    assert "leads [1, 3]" in fit.describe()


def test_too_little_history_gives_no_model_and_says_why(fleet: pd.DataFrame) -> None:
    short = fleet.groupby("unique_id").head(30)

    fit = fit_peak(short, leads=(2,), levels=(0.9,))

    assert fit.model is None
    assert "realised lead-2 peaks" in fit.reason
    assert fit.describe().startswith("no peak model: ")


def test_no_leads_or_no_demand_gives_no_model(fleet: pd.DataFrame) -> None:
    assert "no pool lead time" in fit_peak(fleet, leads=(), levels=(0.9,)).reason
    queues = fleet[fleet["unique_id"].str.endswith("/pending_gpus")]
    assert "no target series" in fit_peak(queues, leads=(1,), levels=(0.9,)).reason


def test_fleet_frame_is_utc_with_demand_clipped_and_other_series_untouched() -> None:
    ds = pd.date_range("2025-01-01", periods=3, freq="5min")
    frame = pd.DataFrame(
        {
            "unique_id": ["p/demand_gpus"] * 3 + ["p/gpu_util"] * 3,
            "ds": list(ds) * 2,
            "y": [-1.0, 2.0, 3.0, -5.0, 1.0, 2.0],
        }
    )

    out = fleet_frame(frame)

    assert str(pd.DatetimeIndex(out["ds"]).tz) == "UTC"
    np.testing.assert_array_equal(out["y"], [0.0, 2.0, 3.0, -5.0, 1.0, 2.0])


@pytest.mark.parametrize(
    ("lead", "step", "expected"),
    [("10min", "5min", 2), ("7min", "5min", 2), ("1min", "5min", 1), ("15min", "5min", 3)],
)
def test_lead_steps_round_up(lead: str, step: str, expected: int) -> None:
    assert lead_steps(pd.Timedelta(lead), pd.Timedelta(step)) == expected


def test_pool_leads_are_distinct_and_sorted() -> None:
    leads = [timedelta(minutes=m) for m in (15, 10, 10, 7)]
    assert pool_leads(leads, timedelta(minutes=5)) == (2, 3)
