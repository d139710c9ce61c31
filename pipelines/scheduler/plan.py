"""Which jobs run when: the schedule built from ``Settings.scheduler`` (docs/scheduler.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any, Final

from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from forecaster.exceptions import ConfigError
from pipelines.config.settings import Settings

JOB_ID_PREFIX: Final = "foresight."
_CRON_DAYS: Final = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@dataclass(frozen=True)
class ScheduledJob:
    """One job of the plan.

    Attributes:
        name: the job's name, passed to the job runner (``ingest``, ``train``...).
        trigger: when it fires (an APScheduler trigger, UTC).
    """

    name: str
    trigger: Any

    @property
    def id(self) -> str:
        """The stable id of the job in the job store (``foresight.<name>``)."""
        return job_id(self.name)


def job_id(name: str) -> str:
    """Return the job store id of the job called ``name``."""
    return f"{JOB_ID_PREFIX}{name}"


def every(interval: timedelta) -> IntervalTrigger:
    """An interval trigger in UTC."""
    return IntervalTrigger(seconds=interval.total_seconds(), timezone=UTC)


def crontab_trigger(expression: str) -> CronTrigger:
    """Build a UTC trigger from a five-field crontab expression, with crontab's weekdays.

    APScheduler 3 numbers weekdays from Monday = 0, crontab from Sunday = 0 (and 7);
    numeric weekdays are translated to names so ``0 3 * * 0`` runs on Sundays as in
    crontab.

    Raises:
        ConfigError: the expression is not a valid crontab expression.
    """
    fields = expression.split()
    try:
        if len(fields) != 5:
            raise ValueError(f"it has {len(fields)} fields, expected 5")
        fields[4] = _crontab_weekdays(fields[4])
        return CronTrigger.from_crontab(" ".join(fields), timezone=UTC)
    except ValueError as exc:
        raise ConfigError(
            f"scheduler.train_cron {expression!r} is not a crontab expression ({exc}); use five "
            "fields 'minute hour day month weekday' in UTC, e.g. '0 3 * * *' for 03:00 daily"
        ) from exc


def default_plan(settings: Settings) -> tuple[ScheduledJob, ...]:
    """The five jobs of a deployment, timed by ``settings.scheduler``."""
    timing = settings.scheduler
    return (
        ScheduledJob("ingest", every(timedelta(minutes=timing.ingest_every_minutes))),
        ScheduledJob("train", crontab_trigger(timing.train_cron)),
        ScheduledJob("forecast", every(timedelta(minutes=timing.forecast_every_minutes))),
        ScheduledJob("evaluate", every(timedelta(minutes=timing.evaluate_every_minutes))),
        ScheduledJob("publish", every(timedelta(minutes=timing.publish_every_minutes))),
    )


def describe_trigger(trigger: Any) -> str:
    """A short human description: ``every 0:05:00`` or ``cron 0 3 * * * UTC``."""
    if isinstance(trigger, IntervalTrigger):
        return f"every {trigger.interval}"
    if isinstance(trigger, CronTrigger):
        fields = {field.name: str(field) for field in trigger.fields}
        crontab = " ".join(
            fields[name] for name in ("minute", "hour", "day", "month", "day_of_week")
        )
        return f"cron {crontab} {trigger.timezone}"
    return str(trigger)


def check_plan(plan: Sequence[ScheduledJob]) -> None:
    """Reject a plan with duplicate job names.

    Raises:
        ConfigError: two jobs share a name (and so an id).
    """
    names = [job.name for job in plan]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"the scheduler plan lists {duplicates} more than once; keep one each")


def _crontab_weekdays(field: str) -> str:
    """Translate crontab's numeric weekdays into names APScheduler reads the same way."""
    if not any(character.isdigit() for character in field):
        return field
    days: set[int] = set()
    for part in field.split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step <= 0:
            raise ValueError(f"weekday step {step_text!r} must be positive")
        if span == "*":
            first, last = 0, 6
        elif "-" in span:
            low, high = span.split("-", 1)
            first, last = _weekday(low), _weekday(high)
            # "5-7" (Friday to Sunday) is valid crontab; 7 is Sunday at the end.
            last = 7 if high.strip() == "7" else last
        else:
            first = last = _weekday(span)
            if step_text:
                last = 6
        if first > last:
            raise ValueError(f"weekday range {span!r} runs backwards")
        days.update(day % 7 for day in range(first, last + 1, step))
    return ",".join(_CRON_DAYS[day] for day in sorted(days))


def _weekday(token: str) -> int:
    token = token.strip().lower()
    if token.isdigit():
        value = int(token)
        if not 0 <= value <= 7:
            raise ValueError(f"weekday {token} is outside 0-7")
        return value % 7
    if token[:3] in _CRON_DAYS:
        return _CRON_DAYS.index(token[:3])
    raise ValueError(f"weekday {token!r} is neither 0-7 nor a day name")
