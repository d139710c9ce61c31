"""Reference policies: naive forecast + k standard deviations, reactive floor (hand-checked)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError
from pipelines.simulate import History, simulate
from pipelines.simulate.reference import ReferencePolicy


class Recorder:
    def __init__(self, inner: ReferencePolicy) -> None:
        self.inner = inner
        self.answers: list[int] = []

    def reset(self) -> None:
        self.inner.reset()
        self.answers = []

    def decide(self, history: History) -> int:
        answer = self.inner.decide(history)
        self.answers.append(answer)
        return answer


def answers(policy: ReferencePolicy, values, pool, series, lead_minutes=5) -> list[int]:
    recorder = Recorder(policy)
    simulate(series(values), pool(lead_minutes=lead_minutes), recorder)
    return recorder.answers


def test_persistence_with_k_zero_is_the_demand_now_in_nodes(series, pool):
    values = [8.0, 20.0, 3.0, 16.0, 17.0]
    # Step 2: the forecast is 3 GPUs (1 node) but 12 GPUs of step 1 still wait (one node
    # was ready for 20): the floor, ceil((12 + 3) / 8) = 2, wins.
    assert answers(ReferencePolicy("persistence", 0.0), values, pool, series) == [1, 3, 2, 2, 3]


def test_persistence_adds_k_standard_deviations_of_the_lead_time_changes(series, pool):
    values = [10.0, 20.0, 10.0, 20.0]
    # Lead 5 min = 1 step; at step 3 the 1-step changes are +10, -10, +10: sd = 9.428...
    # 20 + 2 x 9.428 = 38.86 GPUs = 5 nodes of 8.
    got = answers(
        ReferencePolicy("persistence", 2.0, window=timedelta(hours=1)), values, pool, series
    )
    assert got[3] == 5
    sd = np.std([10.0, -10.0, 10.0])
    assert got[3] == int(np.ceil((20.0 + 2.0 * sd) / 8.0))


def test_the_error_window_is_bounded(series, pool):
    values = [0.0, 80.0] + [40.0] * 10
    policy = ReferencePolicy("persistence", 3.0, window=timedelta(minutes=15))
    # After the burst leaves the 3-step window, the changes are all 0: no margin.
    assert answers(policy, values, pool, series)[-1] == 5


def test_seasonal_naive_repeats_the_peak_one_season_back(series, pool):
    # A "season" of 4 steps (20 min), lead 5 min: forecast = max of the values one season
    # before steps t+1 and t+2; k = 0.
    values = [0.0, 64.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    policy = ReferencePolicy("seasonal_naive", 0.0, season=timedelta(minutes=20))
    got = answers(policy, values, pool, series)
    # Under a season seen: the floor only (step 2: the 64 GPUs of step 1 still wait).
    assert got[:4] == [0, 8, 8, 0]
    assert got[4] == 8  # step 5 is one season after the 64 of step 1
    assert got[6] == 0


def test_the_floor_covers_a_backlog(series, pool):
    policy = ReferencePolicy("persistence", 0.0)
    # Nodes asked for at step 0 arrive at step 1 (lead one step); the burst waits.
    recorder = Recorder(policy)
    result = simulate(series([0.0, 0.0, 100.0, 0.0, 0.0]), pool(lead_minutes=5), recorder)
    assert result.frame["backlog_gpus"].iloc[2] == 100.0
    assert recorder.answers[3] == 13  # 100 GPUs still waiting: ceil(100 / 8)


def test_prehistory_gives_the_errors_from_the_first_step(series, pool):
    demand = series([40.0] * 3)
    pre = pd.Series(
        [0.0, 80.0, 0.0], index=demand.index[0] - pd.Timedelta(minutes=5) * np.array([3, 2, 1])
    )
    got = answers(ReferencePolicy("persistence", 1.0, prehistory=pre), [40.0] * 3, pool, series)
    assert got[0] > 5
    with pytest.raises(DataValidationError, match="one step"):
        answers(
            ReferencePolicy("persistence", 1.0, prehistory=pre.shift(freq="1h")),
            [1.0, 1.0],
            pool,
            series,
        )


@pytest.mark.parametrize(
    "kwargs", [{"base": "mean"}, {"k": -1.0}, {"k": float("nan")}, {"window": timedelta(0)}]
)
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError, match="must be"):
        ReferencePolicy(**kwargs)
