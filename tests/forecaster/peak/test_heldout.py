"""The peak model on held-out windows: fitted before the first cutoff, scored after it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.peak.heldout import BUFFER, heldout_forecasts, peak_losses
from forecaster.peak.model import PeakQuantileForecaster
from forecaster.types import DS, UID, Y

FAST = {"max_iter": 20, "min_samples_leaf": 40}


def _prototype(**params: float) -> PeakQuantileForecaster:
    return PeakQuantileForecaster(lead_steps=(1, 2), quantiles=(0.5, 0.9), **{**FAST, **params})


def _starts(fleet: pd.DataFrame, share: float = 0.8) -> dict[str, pd.Timestamp]:
    first, last = fleet[DS].min(), fleet[DS].max()
    cutoff = pd.Timestamp(first + (last - first) * share).floor("10min")
    return {str(uid): cutoff for uid in fleet[UID].unique()}


def test_forecasts_start_at_each_series_cutoff_and_the_fit_sees_nothing_after_the_first(
    fleet: pd.DataFrame,
) -> None:
    starts = _starts(fleet)
    later = dict(starts, **{"small/demand_gpus": starts["small/demand_gpus"] + pd.Timedelta("2h")})
    made = heldout_forecasts(_prototype(), fleet, later)

    assert made.groupby(UID)[DS].min().to_dict() == {
        uid: when for uid, when in later.items() if uid.endswith("demand_gpus")
    }
    # Another future after the cutoff: the forecast made at the cutoff is unchanged.
    cutoff = starts["big/demand_gpus"]
    changed = fleet.copy()
    changed.loc[changed[DS] > cutoff, Y] *= 3.0
    again = heldout_forecasts(_prototype(), changed, later)
    at_cutoff = made[made[DS] == cutoff].reset_index(drop=True)
    pd.testing.assert_frame_equal(at_cutoff, again[again[DS] == cutoff].reset_index(drop=True))


def test_losses_score_every_method_and_the_buffer_on_the_same_origins(
    fleet: pd.DataFrame,
) -> None:
    starts = _starts(fleet)
    good = heldout_forecasts(_prototype(), fleet, starts)
    flat = heldout_forecasts(_prototype(clip_scaled=0.0), fleet, starts)  # no headroom at all

    losses = peak_losses(fleet, {"good": good, "flat": flat}, (0.5, 0.9))

    assert set(losses["method"]) == {"good", "flat", BUFFER}
    assert losses.groupby(["lead", "level"])["n_origins"].nunique().eq(1).all()
    at = losses.set_index(["lead", "level", "method"])["pinball"]
    for lead in (1, 2):
        assert at[(lead, 0.9, "flat")] > at[(lead, 0.9, "good")]
        assert at[(lead, 0.9, "flat")] > at[(lead, 0.9, BUFFER)]


def test_the_losses_are_hand_checkable_on_a_tiny_series() -> None:
    ds = pd.date_range("2024-01-01", periods=6 * 24, freq="1h", tz="UTC")
    y = np.tile([0.0, 2.0], 3 * 24).astype(float)
    frame = pd.DataFrame({UID: "p/demand_gpus", DS: ds, Y: y})
    origins = ds[-10:-1]  # the last origin's 1-step peak is not realised yet
    at = frame.set_index(DS).loc[origins, Y].to_numpy()
    bound = pd.DataFrame(
        {UID: "p/demand_gpus", DS: origins, "lead": 1, "q0.9": at + 2.0}
    )  # always 2 above: exact where y rises, 4 above where it falls

    losses = peak_losses(frame, {"plus2": bound}, (0.9,)).set_index("method")

    assert losses.loc["plus2", "n_origins"] == len(origins)
    peak = np.r_[at[1:], y[-1]]
    scale = 2.0  # the mean absolute step of the alternating series
    expected = np.mean(0.1 * (at + 2.0 - peak)) / scale
    assert losses.loc["plus2", "pinball"] == pytest.approx(expected)
