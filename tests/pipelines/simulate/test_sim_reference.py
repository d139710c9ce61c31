"""Reference forecasts (naive + k sd), hand-checked, replayed through the policy chain."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError
from pipelines.simulate.engine import simulate
from pipelines.simulate.reference import ReferenceForecaster, reference_policy
from pipelines.simulate.types import History


class Peaks:
    """Holds one node and records the reference's peak over the decision window."""

    def __init__(self, forecaster: ReferenceForecaster) -> None:
        self.forecaster = forecaster
        self.peaks: list[float] = []

    def reset(self) -> None:
        self.peaks = []

    def decide(self, history: History) -> int:
        lead = history.pool.lead_steps
        made = self.forecaster.forecast(history, lead + 1, (0.9,))
        self.peaks.append(float(made.quantiles[0.9].max()))
        return 1


def peaks(forecaster: ReferenceForecaster, values, pool, series) -> list[float]:
    recorder = Peaks(forecaster)
    simulate(series(values), pool(lead_minutes=5), recorder)
    return recorder.peaks


def test_persistence_with_k_zero_is_the_demand_now(series, pool):
    values = [8.0, 20.0, 3.0, 16.0, 17.0]
    assert peaks(ReferenceForecaster("persistence", 0.0), values, pool, series) == values


def test_persistence_adds_k_standard_deviations_of_the_lead_time_changes(series, pool):
    values = [10.0, 20.0, 10.0, 20.0]
    # Lead 5 min = 1 step; at step 3 the 1-step changes are +10, -10, +10.
    got = peaks(
        ReferenceForecaster("persistence", 2.0, window=timedelta(hours=1)), values, pool, series
    )
    assert got[3] == pytest.approx(20.0 + 2.0 * np.std([10.0, -10.0, 10.0]))


def test_the_error_window_is_bounded(series, pool):
    values = [0.0, 80.0] + [40.0] * 10
    forecaster = ReferenceForecaster("persistence", 3.0, window=timedelta(minutes=15))
    # After the burst leaves the 3-step window, the changes are all 0: no margin.
    assert peaks(forecaster, values, pool, series)[-1] == pytest.approx(40.0)


def test_seasonal_naive_repeats_the_peak_one_season_back(series, pool):
    # A season of 4 steps (20 min), lead 5 min: the peak of the values one season before
    # steps t+1 and t+2; under a season seen, persistence.
    values = [0.0, 64.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    forecaster = ReferenceForecaster("seasonal_naive", 0.0, season=timedelta(minutes=20))
    got = peaks(forecaster, values, pool, series)
    assert got[:4] == [0.0, 64.0, 0.0, 0.0]
    assert got[4] == 64.0  # step 5 is one season after the 64 of step 1
    assert got[6] == 0.0


def test_the_reference_goes_through_the_policy_chain(series, pool):
    """The floor covers a backlog, and a scale-down waits for the stabilisation window."""
    policy = reference_policy(pool(lead_minutes=5), "persistence", 0.0)
    answers: list[int] = []

    class Recorder:
        def reset(self) -> None:
            policy.reset()

        def decide(self, history: History) -> int:
            answers.append(policy.decide(history))
            return answers[-1]

    result = simulate(series([0.0, 0.0, 100.0, 0.0, 0.0, 0.0]), pool(lead_minutes=5), Recorder())
    assert result.frame["backlog_gpus"].iloc[2] == 100.0
    # Step 2: 100 GPUs at the pool's target utilisation 0.8: ceil(100 / 6.4) = 16 nodes.
    assert answers[2] == 16
    # The naive formula alone would drop to the floor (13 nodes for the 100 GPUs still
    # waiting) and then to 0; the chain's stabilisation holds the nodes for its window.
    assert answers[3] == 16
    assert answers[4] == 16
    assert policy.terms["stabilisation"] >= 2


def test_prehistory_gives_the_errors_from_the_first_step(series, pool):
    demand = series([40.0] * 3)
    pre = pd.Series(
        [0.0, 80.0, 0.0], index=demand.index[0] - pd.Timedelta(minutes=5) * np.array([3, 2, 1])
    )
    got = peaks(ReferenceForecaster("persistence", 1.0, prehistory=pre), [40.0] * 3, pool, series)
    assert got[0] > 40.0
    with pytest.raises(DataValidationError, match="one step"):
        peaks(
            ReferenceForecaster("persistence", 1.0, prehistory=pre.shift(freq="1h")),
            [1.0, 1.0],
            pool,
            series,
        )


@pytest.mark.parametrize(
    "kwargs", [{"base": "mean"}, {"k": -1.0}, {"k": float("nan")}, {"window": timedelta(0)}]
)
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError, match="must be"):
        ReferenceForecaster(**kwargs)
