"""What ``foresight jobs`` shows: each job's trigger, last run and next run (docs/scheduler.md)."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Column, Float, LargeBinary, MetaData, Table, Unicode, inspect, select

from pipelines.scheduler.plan import JOB_ID_PREFIX, ScheduledJob, describe_trigger
from pipelines.scheduler.service import JOBS_TABLE
from pipelines.store.job_runs import JobRun
from pipelines.store.store import Store

# The columns of APScheduler's job table that are read here (APScheduler owns it).
_JOBS = Table(
    JOBS_TABLE,
    MetaData(),
    Column("id", Unicode(191), primary_key=True),
    Column("next_run_time", Float(25)),
    Column("job_state", LargeBinary, nullable=False),
)


@dataclass(frozen=True)
class JobStatus:
    """One row of ``foresight jobs``.

    Attributes:
        id: the job store id (``foresight.<name>``).
        trigger: when it fires, as the leader stored it (or as configured here
            when no leader has stored it yet).
        scheduled: whether a leader has stored the job.
        next_run: the next run time; None when not scheduled or paused.
        last_run: the most recent run, or None if it never ran.
    """

    id: str
    name: str
    trigger: str
    scheduled: bool
    next_run: datetime | None
    last_run: JobRun | None


@dataclass(frozen=True)
class _StoredJob:
    name: str
    trigger: str
    next_run: datetime | None


def job_statuses(store: Store, plan: Sequence[ScheduledJob]) -> list[JobStatus]:
    """Merge the configured plan, the stored jobs and the latest runs, plan order first."""
    stored = _stored_jobs(store)
    latest = store.job_runs.latest()
    statuses: list[JobStatus] = []
    for planned in plan:
        found = stored.pop(planned.id, None)
        statuses.append(
            JobStatus(
                id=planned.id,
                name=planned.name,
                trigger=found.trigger if found else describe_trigger(planned.trigger),
                scheduled=found is not None,
                next_run=found.next_run if found else None,
                last_run=latest.get(planned.name),
            )
        )
    for identifier, found in sorted(stored.items()):
        statuses.append(
            JobStatus(
                id=identifier,
                name=found.name,
                trigger=found.trigger,
                scheduled=True,
                next_run=found.next_run,
                last_run=latest.get(found.name),
            )
        )
    return statuses


def _stored_jobs(store: Store) -> dict[str, _StoredJob]:
    with store.database.errors("read the scheduled jobs"), store.engine.connect() as connection:
        if not inspect(connection).has_table(JOBS_TABLE):
            return {}
        rows = connection.execute(
            select(_JOBS.c.id, _JOBS.c.next_run_time, _JOBS.c.job_state).where(
                _JOBS.c.id.startswith(JOB_ID_PREFIX)
            )
        ).all()
    jobs: dict[str, _StoredJob] = {}
    for identifier, next_run, state in rows:
        name, trigger = _describe(identifier, state)
        when = None if next_run is None else datetime.fromtimestamp(next_run, UTC)
        jobs[identifier] = _StoredJob(name=name, trigger=trigger, next_run=when)
    return jobs


def _describe(identifier: str, state: bytes) -> tuple[str, str]:
    """The name and trigger of a stored job; its id alone if the state cannot be read."""
    fallback = identifier.removeprefix(JOB_ID_PREFIX)
    try:
        # APScheduler's own pickled job state, written by our leader into our database.
        job_state = pickle.loads(state)
        return str(job_state.get("name") or fallback), describe_trigger(job_state["trigger"])
    except Exception:
        return fallback, "(unreadable: written by another APScheduler version?)"
