"""The twin's figures beside the replay's: relative differences and step agreement."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from pipelines.simulate.engine import simulate
from pipelines.simulate.types import History, SimPool
from pipelines.twin.compare import FIGURES, agreement, compare

STEP = timedelta(minutes=10)
POOL = SimPool(8, 0, 40, timedelta(minutes=20), 2.0, STEP)


class _Fixed:
    def __init__(self, nodes: int) -> None:
        self.nodes = nodes

    def reset(self) -> None:
        """Nothing to forget."""

    def decide(self, history: History) -> int:
        return self.nodes


def _demand() -> pd.Series:
    index = pd.date_range("2025-03-03", periods=48, freq=STEP, tz="UTC")
    return pd.Series(np.random.default_rng(3).uniform(40, 120, 48), index=index)


def test_compare_gives_each_figure_and_the_twin_relative_to_the_replay() -> None:
    small = simulate(_demand(), POOL, _Fixed(10), initial_nodes=10)
    large = simulate(_demand(), POOL, _Fixed(12), initial_nodes=10)
    rows = {row["figure"]: row for row in compare(large, small)}
    assert list(rows) == list(FIGURES)
    hours = rows["node_hours"]
    assert hours["twin"] == large.node_hours
    assert hours["replay"] == small.node_hours
    assert hours["relative_difference"] == pytest.approx(large.node_hours / small.node_hours - 1)
    same = compare(small, small)
    assert all(row["relative_difference"] == 0.0 for row in same)


def test_a_figure_zero_in_the_replay_and_not_in_the_twin_is_infinitely_apart() -> None:
    idle = simulate(_demand() * 0, POOL, _Fixed(0), initial_nodes=0)
    busy = simulate(_demand(), POOL, _Fixed(0), initial_nodes=0)
    waiting = {row["figure"]: row for row in compare(busy, idle)}["waiting_gpu_hours"]
    assert math.isinf(float(waiting["relative_difference"]))


def test_agreement_is_the_share_of_common_steps_with_equal_nodes() -> None:
    index = pd.date_range("2025-03-03", periods=4, freq=STEP, tz="UTC")
    twin = pd.Series([3, 4, 5, 6], index=index)
    replay = pd.Series([3, 4, 4], index=index[:3])
    assert agreement(twin, replay) == pytest.approx(2 / 3)
    assert math.isnan(agreement(twin, pd.Series(dtype=float)))
