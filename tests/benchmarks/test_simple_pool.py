"""The simple forecasters of the headroom pool: what each one forecasts."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.simple_pool import pool

DAY = 4  # steps a day, so seasons fit in short arrays


@pytest.fixture(scope="module")
def members() -> dict[str, object]:
    return dict(pool(DAY))


def run(members: dict[str, object], name: str, y: list[float], horizon: int = 3) -> np.ndarray:
    member = members[name]
    assert callable(member)
    return np.asarray(member(np.asarray(y, dtype=np.float64), horizon))


def test_persistence_window_stats_and_blends(members: dict[str, object]) -> None:
    y = [1.0, 9.0, 2.0, 4.0]
    assert run(members, "persistence", y).tolist() == [4.0] * 3
    assert run(members, "mean3", y).tolist() == [5.0] * 3
    assert run(members, "median3", y).tolist() == [4.0] * 3
    # A quarter persistence, three quarters the window mean.
    assert run(members, "mean3~p0.25", y).tolist() == [0.25 * 4.0 + 0.75 * 5.0] * 3


def test_a_member_short_of_history_forecasts_nothing(members: dict[str, object]) -> None:
    assert np.isnan(run(members, "mean8", [1.0, 2.0])).all()
    assert np.isnan(run(members, "season_mean_week1", [1.0] * (7 * DAY - 1))).all()


def test_seasonal_members_repeat_and_move_with_the_day(members: dict[str, object]) -> None:
    day = [0.0, 10.0, 20.0, 30.0]
    y = day * 2 + [5.0]  # two days, then a level 5 above the day's first value
    assert run(members, "season_mean_day2", y).tolist() == [10.0, 20.0, 30.0]
    # The last value moved as the same hours moved a day ago: 5 + 10, 5 + 20, 5 + 30.
    assert run(members, "season_change_day1", y).tolist() == [15.0, 25.0, 35.0]


def test_ses_and_drift(members: dict[str, object]) -> None:
    flat = [3.0] * 50
    assert run(members, "ses0.3", flat) == pytest.approx([3.0] * 3)
    level = run(members, "ses0.5", [0.0, 0.0, 4.0])[0]
    assert level == pytest.approx(2.0)  # 0.5 * 4 + 0.25 * 0 + 0.25 * 0
    ramp = [float(v) for v in range(10)]
    assert run(members, "drift6", ramp).tolist() == [10.0, 11.0, 12.0]
