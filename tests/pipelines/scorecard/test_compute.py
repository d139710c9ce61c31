"""The scorecard's arithmetic: a hand-worked case, the edges of coverage, and properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.exceptions import DataValidationError
from pipelines.scorecard.compute import align, score
from pipelines.scorecard.types import PlanChange, Window

T0 = datetime(2026, 3, 2, tzinfo=UTC)
STEP = timedelta(minutes=10)
LEAD = timedelta(minutes=20)
FAST = settings(max_examples=120, deadline=None)


def _series(values: list[float], start: datetime = T0) -> pd.Series:
    index = pd.date_range(start, periods=len(values), freq=STEP, tz="UTC")
    return pd.Series(values, index=index, dtype=np.float64)


def test_a_hand_worked_hour() -> None:
    # Six 10-min samples; 8 GPUs per node; 2 nodes existed throughout.
    demand = _series([10, 20, 30, 30, 20, 10])
    nodes = _series([2] * 6)
    # 3 nodes asked for at T0 - 20 min (in force from T0), 4 at T0 + 10 min (from T0 + 30).
    plan = [PlanChange(T0 - LEAD, 3), PlanChange(T0 + STEP, 4)]
    end = T0 + 6 * STEP
    day = score(
        demand,
        nodes,
        plan,
        gpus_per_node=8,
        lead_time=LEAD,
        step=STEP,
        end=end,
        windows=[Window.DAY],
    )[Window.DAY]

    # Actual: 16 GPUs; waiting 0, 4, 14, 14, 4, 0 GPUs for 1/6 h each.
    assert day.waiting_gpu_hours.actual == pytest.approx(36 / 6)
    # Plan: 3, 3, 3, 4, 4, 4 nodes = 24, 24, 24, 32, 32, 32 GPUs: waiting 0, 0, 6, 0, 0, 0.
    assert day.waiting_gpu_hours.plan == pytest.approx(6 / 6)
    assert day.waiting_gpu_hours_avoided == pytest.approx(5.0)
    assert day.node_hours.actual == pytest.approx(2.0)
    assert day.node_hours.plan == pytest.approx(21 / 6)
    assert day.node_hours_added == pytest.approx(1.5)
    assert day.samples == 6
    assert day.coverage == pytest.approx(1 / 24)
    assert (day.start, day.end) == (end - timedelta(days=1), end)


def test_a_recommendation_counts_only_one_lead_time_after_it_was_made() -> None:
    demand = _series([40, 40, 40])
    nodes = _series([1, 1, 1])
    # Made at T0: in force from T0 + 20 min, the third sample only.
    plan = [PlanChange(T0, 5)]
    rows = align(demand, nodes, plan, lead_time=LEAD, step=STEP, end=T0 + 3 * STEP)
    assert rows["planned_nodes"].isna().tolist() == [True, True, False]
    scored = score(
        demand, nodes, plan, gpus_per_node=8, lead_time=LEAD, step=STEP, end=T0 + 3 * STEP
    )
    assert scored[Window.DAY].samples == 1
    assert scored[Window.DAY].waiting_gpu_hours == (32 / 6, 0.0)


def test_a_plan_below_the_nodes_that_existed_changes_nothing() -> None:
    demand = _series([30, 50, 10])
    nodes = _series([4, 5, 3])
    plan = [PlanChange(T0 - LEAD, 0)]
    week = score(
        demand, nodes, plan, gpus_per_node=8, lead_time=LEAD, step=STEP, end=T0 + 3 * STEP
    )[Window.WEEK]
    assert week.waiting_gpu_hours_avoided == 0.0
    assert week.node_hours_added == 0.0
    assert week.waiting_gpu_hours.actual == pytest.approx(10 / 6)


def test_gaps_count_at_most_one_step_and_stale_nodes_are_unknown() -> None:
    # Demand at T0, T0+10 and (after a 2 h gap) T0+130 min; nodes only at T0.
    index = pd.DatetimeIndex([T0, T0 + STEP, T0 + 13 * STEP], tz="UTC")
    demand = pd.Series([8.0, 8.0, 8.0], index=index)
    nodes = pd.Series([1.0], index=pd.DatetimeIndex([T0], tz="UTC"))
    plan = [PlanChange(T0 - LEAD, 1)]
    end = T0 + 13 * STEP + timedelta(minutes=4)
    rows = align(demand, nodes, plan, lead_time=LEAD, step=STEP, end=end)
    assert rows["hours"].tolist() == pytest.approx([1 / 6, 1 / 6, 4 / 60])
    # The node sample at T0 is a step old at T0 + 10 min: not known there.
    assert rows["nodes"].isna().tolist() == [False, True, True]
    day = score(demand, nodes, plan, gpus_per_node=8, lead_time=LEAD, step=STEP, end=end)
    assert day[Window.DAY].samples == 1


def test_samples_outside_the_window_or_after_the_end_are_left_out() -> None:
    demand = _series([100.0] * 3, start=T0 - timedelta(days=2))
    late = _series([100.0], start=T0 + timedelta(hours=1))
    nodes = _series([0.0] * 3, start=T0 - timedelta(days=2))
    plan = [PlanChange(T0 - timedelta(days=3), 1)]
    both = pd.concat([demand, late])
    scored = score(both, nodes, plan, gpus_per_node=8, lead_time=LEAD, step=STEP, end=T0)
    assert scored[Window.DAY].samples == 0
    assert scored[Window.DAY].waiting_gpu_hours == (0.0, 0.0)
    assert scored[Window.WEEK].samples == 3


def test_no_recommendation_means_no_coverage() -> None:
    scored = score(
        _series([5, 6]), _series([1, 1]), [], gpus_per_node=8, lead_time=LEAD, step=STEP,
        end=T0 + 2 * STEP,
    )  # fmt: skip
    assert scored[Window.DAY].samples == 0
    assert scored[Window.DAY].coverage == 0.0


def test_naive_times_are_refused_with_the_fix() -> None:
    naive = pd.Series([1.0], index=pd.DatetimeIndex([datetime(2026, 1, 1)]))
    with pytest.raises(DataValidationError, match="tz-aware"):
        align(naive, _series([1]), [], lead_time=LEAD, step=STEP, end=T0)


# -- properties -------------------------------------------------------------------------

counts = st.integers(min_value=0, max_value=12)


@st.composite
def histories(draw: st.DrawFn) -> tuple[pd.Series, pd.Series, list[int], int]:
    n = draw(st.integers(min_value=1, max_value=60))
    demand = draw(st.lists(st.floats(0, 100, allow_nan=False), min_size=n, max_size=n))
    nodes = draw(st.lists(counts, min_size=n, max_size=n))
    planned = draw(st.lists(counts, min_size=n, max_size=n))
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    return _series(demand), _series([float(v) for v in nodes]), planned, gpus


def _plan(planned: list[int], lead: timedelta) -> list[PlanChange]:
    """Changes that put ``planned[i]`` in force at sample ``i``."""
    return [PlanChange(T0 + i * STEP - lead, nodes) for i, nodes in enumerate(planned)]


def _score(demand: pd.Series, nodes: pd.Series, plan: list[PlanChange], gpus: int) -> dict:
    end = T0 + len(demand) * STEP
    return score(demand, nodes, plan, gpus_per_node=gpus, lead_time=LEAD, step=STEP, end=end)


@FAST
@given(histories())
def test_a_plan_equal_to_what_happened_makes_no_difference(
    history: tuple[pd.Series, pd.Series, list[int], int],
) -> None:
    demand, nodes, _, gpus = history
    same = _plan([int(v) for v in nodes], LEAD)
    for window_score in _score(demand, nodes, same, gpus).values():
        assert window_score.waiting_gpu_hours.difference == 0.0
        assert window_score.node_hours.difference == 0.0
        assert window_score.samples == len(demand)


@FAST
@given(histories(), st.lists(counts, min_size=60, max_size=60))
def test_more_planned_nodes_never_wait_more_and_never_hold_fewer_nodes(
    history: tuple[pd.Series, pd.Series, list[int], int], extra: list[int]
) -> None:
    demand, nodes, planned, gpus = history
    less = _score(demand, nodes, _plan(planned, LEAD), gpus)
    more_nodes = [p + e for p, e in zip(planned, extra, strict=False)]
    more = _score(demand, nodes, _plan(more_nodes, LEAD), gpus)
    for window in Window:
        assert more[window].waiting_gpu_hours.plan <= less[window].waiting_gpu_hours.plan + 1e-9
        assert more[window].node_hours.plan >= less[window].node_hours.plan - 1e-9
        # Against reality: the plan never waits more and never holds fewer nodes.
        assert less[window].waiting_gpu_hours_avoided >= -1e-9
        assert less[window].node_hours_added >= -1e-9


@FAST
@given(histories())
def test_the_week_holds_the_day(history: tuple[pd.Series, pd.Series, list[int], int]) -> None:
    demand, nodes, planned, gpus = history
    scored = _score(demand, nodes, _plan(planned, LEAD), gpus)
    day, week = scored[Window.DAY], scored[Window.WEEK]
    assert week.samples >= day.samples
    assert week.waiting_gpu_hours.actual >= day.waiting_gpu_hours.actual - 1e-9
    assert 0.0 <= week.coverage <= day.coverage <= 1.0
