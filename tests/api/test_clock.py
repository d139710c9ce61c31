"""The process's one clock and the replay's window (issue #35)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api.clock import (
    REPLAY_AHEAD_STEPS,
    ReplayClock,
    decision_clock,
    from_another_clock,
    system_clock,
)

NEWEST = datetime(2025, 3, 30, 23, 55, tzinfo=UTC)
WALL = datetime(2026, 12, 6, 21, 0, tzinfo=UTC)
STEP = timedelta(minutes=5)


def test_the_replay_window_ends_a_few_data_steps_past_the_newest_sample() -> None:
    clock = ReplayClock(lambda: NEWEST, fallback=lambda: WALL)

    window = clock.window(STEP)

    assert window is not None
    assert window.now == NEWEST
    assert window.latest == NEWEST + REPLAY_AHEAD_STEPS * STEP
    assert "2025-03-31T00:10:00+00:00" in window.describe()
    assert "15 min" in window.describe()


def test_before_any_sample_there_is_no_replay_window_and_now_is_the_wall_clock() -> None:
    clock = ReplayClock(lambda: None, fallback=lambda: WALL)

    assert clock.window(STEP) is None
    assert clock() == WALL


def test_the_decision_clock_of_each_mode() -> None:
    assert decision_clock("system", lambda: NEWEST) is system_clock
    replay = decision_clock("replay", lambda: NEWEST)
    assert isinstance(replay, ReplayClock)
    assert replay() == NEWEST


def test_a_time_past_now_by_more_than_the_skew_is_another_clocks() -> None:
    skew = timedelta(minutes=5)

    assert from_another_clock(WALL, NEWEST, skew)
    assert not from_another_clock(NEWEST + skew, NEWEST, skew)
    assert not from_another_clock(NEWEST - timedelta(days=1), NEWEST, skew)
