"""The history of scheduled job runs, for ``foresight jobs`` and for operators (docs/jobs.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal, cast

from sqlalchemy import CursorResult, func, select, update

from pipelines.store.engine import Database
from pipelines.store.schema import JobRunRow, as_utc

RunOutcome = Literal["running", "ok", "partial", "failed", "skipped", "interrupted"]
"""A job's outcome (``ok``, ``partial``, ``failed``, ``skipped``) or a run's state."""

RUNNING: Final = "running"
MAX_SUMMARY_CHARS: Final = 2_000
MAX_RUNNER_CHARS: Final = 200


@dataclass(frozen=True)
class JobRun:
    """One run of a job as stored."""

    id: int
    job: str
    started_at: datetime
    finished_at: datetime | None
    outcome: RunOutcome
    summary: str
    runner: str
    problems: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


class JobRunRepository:
    """Record job runs as they start and finish, and read the latest ones back."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def start(self, job: str, *, runner: str, started_at: datetime | None = None) -> int:
        """Record that ``job`` started and return the run's id.

        Args:
            runner: who runs it (host and pid), to tell replicas apart.
            started_at: when it started (tz-aware); default now.
        """
        row = JobRunRow(
            job=job,
            started_at=as_utc(started_at or datetime.now(UTC)),
            finished_at=None,
            outcome=RUNNING,
            summary="",
            problems={},
            details={},
            runner=runner[:MAX_RUNNER_CHARS],
        )
        with self._db.transaction("record a job start") as session:
            session.add(row)
            session.flush()
            return row.id

    def finish(
        self,
        run_id: int,
        outcome: RunOutcome,
        summary: str,
        *,
        finished_at: datetime | None = None,
        problems: Mapping[str, str] | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Record the final outcome of a started run.

        Args:
            run_id: the id :meth:`start` returned.
            finished_at: when it finished (tz-aware); default now.
            problems: per series (or target) what went wrong.
            details: JSON-ready numbers worth keeping.
        """
        statement = (
            update(JobRunRow)
            .where(JobRunRow.id == run_id)
            .values(
                outcome=outcome,
                summary=summary[:MAX_SUMMARY_CHARS],
                finished_at=as_utc(finished_at or datetime.now(UTC)),
                problems={str(key): str(value) for key, value in (problems or {}).items()},
                details=dict(details or {}),
            )
            .execution_options(synchronize_session=False)
        )
        with self._db.transaction("record a job outcome") as session:
            session.execute(statement)

    def mark_interrupted(self, *, now: datetime | None = None) -> int:
        """Close every run still ``running`` as ``interrupted`` and return how many.

        Only the scheduler leader runs jobs, so when a new leader takes over, runs
        left ``running`` belong to a process that died or lost leadership; a run that
        does finish later overwrites this with its real outcome.
        """
        statement = (
            update(JobRunRow)
            .where(JobRunRow.outcome == RUNNING)
            .values(
                outcome="interrupted",
                finished_at=as_utc(now or datetime.now(UTC)),
                summary="the process running it stopped before it finished",
            )
            .execution_options(synchronize_session=False)
        )
        with self._db.transaction("mark interrupted job runs") as session:
            result = cast(CursorResult[Any], session.execute(statement))
            return int(result.rowcount)

    def latest(self) -> dict[str, JobRun]:
        """Return the most recent run of every job that ever ran, by job name."""
        newest = select(func.max(JobRunRow.id)).group_by(JobRunRow.job)
        statement = select(JobRunRow).where(JobRunRow.id.in_(newest))
        with self._db.transaction("read the latest job runs") as session:
            return {row.job: _run(row) for row in session.scalars(statement)}

    def history(self, job: str | None = None, *, limit: int = 50) -> list[JobRun]:
        """Return the most recent runs, newest first, of one job or of all."""
        statement = select(JobRunRow).order_by(JobRunRow.id.desc()).limit(limit)
        if job is not None:
            statement = statement.where(JobRunRow.job == job)
        with self._db.transaction("read job runs") as session:
            return [_run(row) for row in session.scalars(statement)]


def _run(row: JobRunRow) -> JobRun:
    outcome: Any = row.outcome
    return JobRun(
        id=row.id,
        job=row.job,
        started_at=row.started_at,
        finished_at=row.finished_at,
        outcome=outcome,
        summary=row.summary,
        runner=row.runner,
        problems=dict(row.problems),
        details=dict(row.details),
    )
