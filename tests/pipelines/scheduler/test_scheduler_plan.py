"""The schedule built from settings: triggers, ids, crontab weekdays, bad config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from forecaster.exceptions import ConfigError
from pipelines.config.settings import load_settings
from pipelines.scheduler.plan import ScheduledJob, check_plan, crontab_trigger, default_plan, every

WEEKEND = [datetime(2025, 3, 1, 3, tzinfo=UTC), datetime(2025, 3, 2, 3, tzinfo=UTC)]


def test_default_plan_times_every_job_from_the_settings(tmp_path: Path) -> None:
    settings = load_settings(
        root=tmp_path,
        scheduler={
            "ingest_every_minutes": 3,
            "train_cron": "30 2 * * *",
            "forecast_every_minutes": 7,
            "evaluate_every_minutes": 11,
            "publish_every_minutes": 13,
        },
    )
    plan = {job.name: job for job in default_plan(settings)}
    assert list(plan) == ["ingest", "train", "forecast", "evaluate", "publish"]
    assert [job.id for job in plan.values()] == [f"foresight.{name}" for name in plan]
    minutes = {"ingest": 3, "forecast": 7, "evaluate": 11, "publish": 13}
    for name, every_minutes in minutes.items():
        trigger = plan[name].trigger
        assert isinstance(trigger, IntervalTrigger)
        assert trigger.interval == timedelta(minutes=every_minutes)
        assert trigger.timezone == UTC
    train = plan["train"].trigger
    assert isinstance(train, CronTrigger)
    assert train.timezone == UTC
    after = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    assert train.get_next_fire_time(None, after) == datetime(2025, 3, 2, 2, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("weekday", "expected"),
    [
        # 2025-03-02 is a Sunday; crontab's 0 and 7 are Sunday, APScheduler's 0 is Monday.
        ("0", [datetime(2025, 3, 2, 3, tzinfo=UTC)]),
        ("7", [datetime(2025, 3, 2, 3, tzinfo=UTC)]),
        ("sun", [datetime(2025, 3, 2, 3, tzinfo=UTC)]),
        ("1-2", [datetime(2025, 3, 3, 3, tzinfo=UTC), datetime(2025, 3, 4, 3, tzinfo=UTC)]),
        ("6,0", WEEKEND),
        ("5-7", [datetime(2025, 2, 28, 3, tzinfo=UTC), *WEEKEND]),
        ("*/3", [*WEEKEND, datetime(2025, 3, 5, 3, tzinfo=UTC)]),  # Sun, Wed, Sat
    ],
)
def test_crontab_weekdays_mean_what_they_mean_in_crontab(
    weekday: str, expected: list[datetime]
) -> None:
    trigger = crontab_trigger(f"0 3 * * {weekday}")
    fire = trigger.get_next_fire_time(None, datetime(2025, 2, 27, 12, tzinfo=UTC))  # a Thursday
    fires = []
    while fire is not None and fire <= expected[-1]:
        fires.append(fire)
        fire = trigger.get_next_fire_time(fire, fire + timedelta(seconds=1))
    assert fires == expected


@pytest.mark.parametrize("expression", ["0 3 * *", "61 3 * * *", "0 3 * * 8", "0 3 * * 5-1"])
def test_a_bad_crontab_is_a_config_error_naming_the_setting(expression: str) -> None:
    with pytest.raises(ConfigError, match=r"scheduler\.train_cron .*crontab"):
        crontab_trigger(expression)


def test_a_plan_with_a_job_twice_is_rejected() -> None:
    job = ScheduledJob("ingest", every(timedelta(minutes=1)))
    with pytest.raises(ConfigError, match="ingest"):
        check_plan([job, job])
