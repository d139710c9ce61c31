"""The return-from-idle rule: the level demand had before an idle spell, held after it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchmarks.peak_batch import held_levels
from forecaster.peak.online import OnlinePeak, day_rule, steps_per_day
from forecaster.peak.recovery import (
    MIN_RETURNS,
    ReturnRule,
    comes_back,
    held_level,
    return_level,
    return_levels,
)
from forecaster.peak.serving import RETURN_LEVEL
from forecaster.types import DS, UID, Y
from tests.forecaster.peak.serving import serve_frame

RULE = ReturnRule(idle=3, hold=6, before=6)
STEP = pd.Timedelta(minutes=10)


def interrupted(busy: float = 600.0, back: float = 200.0, zeros: int = 12) -> np.ndarray:
    """A busy pool, an outage at zero, and the first step of its work coming back."""
    before = busy + np.arange(12) % 3  # the hour before the outage peaks at busy + 2
    return np.concatenate([before, np.zeros(zeros), [back]])


@pytest.mark.parametrize("minutes", [1, 5, 10, 15, 60])
def test_the_served_rule_is_the_rule_of_the_series_step(minutes: int) -> None:
    step = pd.Timedelta(minutes=minutes)
    rule = day_rule(steps_per_day(step))
    assert rule == ReturnRule.on_step(step)
    assert (rule.idle, rule.hold) == (-(-30 // minutes), -(-60 // minutes))


def test_the_level_before_the_idle_spell_is_expected_back() -> None:
    y = interrupted()
    assert return_level(y, len(y) - 1, RULE) == 602.0


def test_the_level_is_held_for_the_hold_then_dropped() -> None:
    y = np.concatenate([interrupted(), [300.0, 350.0, 400.0, 450.0, 500.0, 550.0]])
    first = len(y) - 6
    levels = [return_level(y, p, RULE) for p in range(first - 1, len(y))]
    assert levels[:6] == [602.0] * 6  # the return and the five steps after it
    assert math.isnan(levels[6])  # the seventh step above zero: the hold is over


@pytest.mark.parametrize(
    ("y", "why"),
    [
        (interrupted(zeros=2), "two steps at zero are a gap between jobs, not idleness"),
        (interrupted(back=700.0), "demand already above the level before"),
        (np.concatenate([[np.nan] * 3, np.zeros(5), [10.0]]), "nothing known before"),
        (np.concatenate([np.zeros(5), [10.0]]), "the series starts idle"),
        (np.concatenate([interrupted()[:-1], [0.0]]), "still idle"),
        (np.concatenate([[600.0] * 6, [np.nan], np.zeros(4), [10.0]]), "a gap before"),
        (np.concatenate([[600.0] * 6, np.zeros(2), [np.nan], np.zeros(2), [10.0]]), "gap"),
    ],
)
def test_the_rule_is_silent_where_it_has_no_case(y: np.ndarray, why: str) -> None:
    assert math.isnan(return_level(y, len(y) - 1, RULE)), why


def test_only_the_past_is_read() -> None:
    y = interrupted()
    p = len(y) - 1
    later = np.concatenate([y, [1e6, 0.0, 0.0]])
    assert return_level(later, p, RULE) == return_level(y, p, RULE)


def test_the_rule_in_steps_of_the_series() -> None:
    assert ReturnRule.on_step(STEP) == ReturnRule(idle=3, hold=6, before=6, evidence=1008)
    assert ReturnRule.on_step(pd.Timedelta(minutes=5)) == ReturnRule(
        idle=6, hold=12, before=12, evidence=2016
    )
    assert ReturnRule.on_step(pd.Timedelta(hours=2)) == ReturnRule(
        idle=1, hold=1, before=1, evidence=84
    )
    with pytest.raises(ValueError, match="positive"):
        ReturnRule.on_step(pd.Timedelta(0))
    with pytest.raises(ValueError, match=">= 1 step"):
        ReturnRule(idle=0, hold=6, before=6)
    with pytest.raises(ValueError, match=">= 1 step"):
        ReturnRule(idle=3, hold=6, before=6, evidence=0)


def bounds_at_return() -> np.ndarray:
    y = np.concatenate([np.full(300, 500.0), interrupted()])
    levels = (0.1, 0.5, 0.9)
    state = OnlinePeak(levels, 1, 144)
    raw = np.array([0.0, 5.0, 10.0])
    for p in range(len(y)):
        bounds = state.step(y, p, y[p] + raw, 1.0)
    return bounds


def test_the_served_bound_holds_the_level_from_the_median_up() -> None:
    held = bounds_at_return()
    # Demand came back at 200 with raw bounds up to 210: the median and q0.9 are
    # raised to the 602 it had before; the low quantile is not.
    np.testing.assert_allclose(held[1:], [602.0, 602.0])
    assert held[0] < 602.0


def test_the_served_frame_says_which_level_it_held() -> None:
    y = np.concatenate([np.full(300, 500.0), interrupted()])
    ds = pd.date_range("2024-05-01", periods=len(y), freq=STEP, tz="UTC")
    history = pd.DataFrame({UID: "p/demand_gpus", DS: ds, Y: y})
    fresh = pd.DataFrame(
        {UID: ["p/demand_gpus"], DS: [ds[-1]], "lead": [1], "last": [y[-1]], "scale": [1.0]}
        | {"q0.5": [y[-1] + 5.0], "q0.9": [y[-1] + 10.0]}
    )
    served = serve_frame(fresh, history, fresh.iloc[:0], STEP)
    assert served[RETURN_LEVEL].iloc[0] == 602.0
    assert served["q0.5"].iloc[0] == 602.0
    assert served["q0.9"].iloc[0] == 602.0
    assert served["raw_q0.9"].iloc[0] == y[-1] + 10.0
    calm = serve_frame(fresh.assign(**{DS: [ds[-2]]}), history, fresh.iloc[:0], STEP)
    assert math.isnan(calm[RETURN_LEVEL].iloc[0])


def test_every_positions_level_at_once() -> None:
    y = np.concatenate([interrupted(), [300.0, 700.0, 0.0]])
    levels = return_levels(y, RULE)
    expected = [return_level(y, p, RULE) for p in range(len(y))]
    np.testing.assert_array_equal(levels, expected)
    assert np.isfinite(levels).sum() == 2  # the return and the step after; 700 is above


JUDGED = ReturnRule(idle=3, hold=6, before=6, evidence=500)


def returns(reached: int, missed: int) -> np.ndarray:
    """Idle spells, each followed by a return that reaches the level before it or not."""
    busy = np.full(6, 100.0)
    came_back = np.concatenate([np.zeros(4), [50.0, 100.0], np.full(4, 100.0)])
    flickered = np.concatenate([np.zeros(4), [30.0, 20.0, 40.0, 30.0, 20.0, 10.0, 20.0]])
    spells = [came_back] * reached + [flickered] * missed
    return np.concatenate([busy, *[np.concatenate([s, busy]) for s in spells]])


def test_a_series_whose_returns_mostly_fall_short_is_not_held() -> None:
    y = np.concatenate([returns(reached=2, missed=4), interrupted(busy=100.0, back=20.0)])
    p = len(y) - 1
    assert return_level(y, p, JUDGED) == 102.0
    assert not comes_back(y, p, JUDGED)
    assert math.isnan(held_level(y, p, JUDGED))


def test_a_series_whose_returns_mostly_come_back_is_held() -> None:
    y = np.concatenate([returns(reached=4, missed=2), interrupted(busy=100.0, back=20.0)])
    p = len(y) - 1
    assert comes_back(y, p, JUDGED)
    assert held_level(y, p, JUDGED) == 102.0


def test_too_few_returns_to_judge_keep_the_rule() -> None:
    y = np.concatenate([returns(reached=0, missed=MIN_RETURNS - 1), interrupted(busy=100.0)])
    assert comes_back(y, len(y) - 1, JUDGED)


def test_returns_older_than_the_evidence_window_are_not_counted() -> None:
    short = ReturnRule(idle=3, hold=6, before=6, evidence=30)
    y = np.concatenate([returns(reached=0, missed=6), np.full(40, 100.0), interrupted(100.0, 20.0)])
    p = len(y) - 1
    assert not comes_back(y, p, JUDGED)
    assert comes_back(y, p, short)
    assert held_level(y, p, short) == 102.0


def test_the_judgement_reads_only_the_window_before_the_origin() -> None:
    y = np.concatenate([returns(reached=2, missed=4), interrupted(busy=100.0, back=20.0)])
    p = len(y) - 1
    later = np.concatenate([y, returns(reached=9, missed=0)])
    assert comes_back(later, p, JUDGED) == comes_back(y, p, JUDGED)
    assert not comes_back(y, p, JUDGED)
    # Returns that all came back, placed just before the window, change nothing.
    gap = np.full(JUDGED.evidence + 1 - len(y), 100.0)
    earlier = np.concatenate([returns(reached=9, missed=0), gap, y])
    assert not comes_back(earlier, len(earlier) - 1, JUDGED)
    assert comes_back(earlier, len(earlier) - 1, ReturnRule(3, 6, 6, evidence=700))


def test_every_positions_held_level_at_once() -> None:
    y = np.concatenate([returns(reached=2, missed=4), interrupted(busy=100.0, back=20.0)])
    y = np.concatenate([returns(reached=0, missed=0), y, [30.0, 0.0]])
    expected = [held_level(y, p, JUDGED) for p in range(len(y))]
    np.testing.assert_array_equal(held_levels(y, JUDGED), expected)
    assert np.isfinite(return_levels(y, JUDGED)[len(y) - 3])  # the rule speaks there
    assert math.isnan(held_levels(y, JUDGED)[len(y) - 3])  # but this series is not held


def served_after(history: np.ndarray) -> tuple[np.ndarray, float]:
    """The bounds at the return after ``history``, and the level the rule holds there."""
    y = np.concatenate([np.full(300, 100.0), history, interrupted(busy=100.0, back=20.0)])
    state = OnlinePeak((0.1, 0.5, 0.9), 1, 144)
    raw = np.array([0.0, 5.0, 10.0])
    for p in range(len(y)):
        bounds = state.step(y, p, y[p] + raw, 1.0)
    return bounds, held_level(y, len(y) - 1, day_rule(144))


def test_the_served_bound_is_held_only_where_returns_mostly_come_back() -> None:
    bounds, held = served_after(returns(reached=1, missed=5))
    assert math.isnan(held)
    assert bounds[1] < 102.0
    bounds, held = served_after(returns(reached=5, missed=1))
    assert held == 102.0
    assert bounds[1] == 102.0
