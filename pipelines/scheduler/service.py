"""The scheduler: APScheduler jobs on the store's database, started only by the leader.

Details: docs/scheduler.md, "Notes from the code", `pipelines/scheduler/service.py`."""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers import SchedulerNotRunningError
from apscheduler.schedulers.background import BackgroundScheduler

from pipelines.config.settings import Settings
from pipelines.errors import StoreError
from pipelines.scheduler import dispatch
from pipelines.scheduler.dispatch import DISPATCH_REF, JobContext, JobRunner
from pipelines.scheduler.election import LeaderElector
from pipelines.scheduler.leader import LeaderLock, lock_for
from pipelines.scheduler.plan import JOB_ID_PREFIX, ScheduledJob, check_plan, default_plan, job_id
from pipelines.store.store import Store

logger = logging.getLogger(__name__)

JOBS_TABLE: Final = "apscheduler_jobs"
DEFAULT_POLL_SECONDS: Final = 5.0


def job_options(settings: Settings) -> dict[str, Any]:
    """The options every job gets: one instance at a time, coalesced, with misfire grace.

    APScheduler rejects a grace of 0 (``None`` would mean "no limit"), so 0 becomes 1 s.
    """
    return {
        "max_instances": 1,
        "coalesce": True,
        "misfire_grace_time": max(settings.scheduler.misfire_grace_seconds, 1),
    }


def build_scheduler(settings: Settings, store: Store, *, workers: int) -> BackgroundScheduler:
    """A UTC ``BackgroundScheduler`` with its job store on ``store``'s engine (not started)."""
    return BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(engine=store.engine, tablename=JOBS_TABLE)},
        executors={"default": ThreadPoolExecutor(max_workers=max(workers, 1))},
        job_defaults=job_options(settings),
        timezone=UTC,
    )


class _Leadership:
    """What this process does while it leads: one APScheduler instance and its context."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        plan: Sequence[ScheduledJob],
        runner: JobRunner,
    ) -> None:
        self._settings = settings
        self._store = store
        self._plan = tuple(plan)
        self._runner = runner
        self._scheduler: BackgroundScheduler | None = None
        self._key: str | None = None
        self._guard = threading.Lock()

    @property
    def scheduler(self) -> BackgroundScheduler | None:
        """The APScheduler instance while leading, else None."""
        return self._scheduler

    def elected(self) -> None:
        """Mark orphaned runs, then schedule the plan and start running jobs."""
        interrupted = self._store.job_runs.mark_interrupted()
        if interrupted:
            logger.warning("marked %d job runs of a previous leader as interrupted", interrupted)
        scheduler = build_scheduler(self._settings, self._store, workers=len(self._plan))
        key = uuid.uuid4().hex
        dispatch.register(key, JobContext(self._settings, self._store, self._runner, self))
        try:
            # Paused: jobs stored by a previous leader must not fire before they are re-added.
            scheduler.start(paused=True)
            self._schedule(scheduler, key)
            scheduler.resume()
        except BaseException:
            dispatch.unregister(key)
            if scheduler.running:
                scheduler.shutdown(wait=False)
            raise
        with self._guard:
            self._scheduler, self._key = scheduler, key
        self._record(lambda: self._store.leader.claim(dispatch.runner_identity()))
        for job in scheduler.get_jobs():
            logger.info("job %s (%s): next run %s", job.id, job.trigger, job.next_run_time)

    def demoted(self, *, wait: bool = False) -> None:
        """Stop starting jobs; runs in progress finish (``wait``: wait for them)."""
        with self._guard:
            scheduler, key = self._scheduler, self._key
            self._scheduler = self._key = None
        if scheduler is not None:
            with contextlib.suppress(SchedulerNotRunningError):
                scheduler.shutdown(wait=wait)
        if key is not None:
            dispatch.unregister(key)
            self._record(lambda: self._store.leader.release(dispatch.runner_identity()))

    def _record(self, write: Callable[[], None]) -> None:
        # Who leads is for operators to read; failing to write it must not stop the jobs.
        try:
            write()
        except StoreError as exc:
            logger.warning("could not record the scheduler leader: %s", exc)

    def run_soon(self, name: str) -> None:
        """Make job ``name`` due now (``max_instances`` still applies)."""
        with self._guard:
            scheduler = self._scheduler
        if scheduler is None:
            logger.warning("not leading any more: %s will run at its next scheduled time", name)
            return
        try:
            scheduler.modify_job(job_id(name), next_run_time=datetime.now(UTC))
        except (JobLookupError, SchedulerNotRunningError) as exc:
            logger.warning("cannot start %s now: %s", name, exc)

    def _schedule(self, scheduler: BackgroundScheduler, key: str) -> None:
        stored = {job.id: job for job in scheduler.get_jobs()}
        options = job_options(self._settings)
        for planned in self._plan:
            previous = stored.pop(planned.id, None)
            extra: dict[str, Any] = {}
            # Keep a persisted next run time when the schedule is unchanged, so a run
            # missed while no leader was up still fires within the misfire grace.
            if (
                previous is not None
                and previous.next_run_time is not None
                and str(previous.trigger) == str(planned.trigger)
            ):
                extra["next_run_time"] = previous.next_run_time
            scheduler.add_job(
                DISPATCH_REF,
                trigger=planned.trigger,
                args=(key, planned.name),
                id=planned.id,
                name=planned.name,
                replace_existing=True,
                **options,
                **extra,
            )
        for stale in stored.values():
            if stale.id.startswith(JOB_ID_PREFIX):
                logger.info("removing job %s: no longer in the plan", stale.id)
                scheduler.remove_job(stale.id)


class RunningScheduler:
    """A scheduler taking part in the leader election; stop it with :meth:`stop`."""

    def __init__(self, elector: LeaderElector, leadership: _Leadership) -> None:
        self._elector = elector
        self._leadership = leadership

    @property
    def is_leader(self) -> bool:
        """Whether this process leads (runs the jobs) right now."""
        return self._elector.is_leader

    def wait_until_leader(self, timeout: float | None = None) -> bool:
        """Block until this process leads, or ``timeout`` seconds pass; True if it leads."""
        return self._elector.wait_until_leader(timeout)

    def next_run_times(self) -> dict[str, datetime | None]:
        """The next run of each job by id, while leading (empty otherwise)."""
        scheduler = self._leadership.scheduler
        if scheduler is None:
            return {}
        return {job.id: job.next_run_time for job in scheduler.get_jobs()}

    def run_soon(self, name: str) -> None:
        """Make job ``name`` due now, if this process leads."""
        self._leadership.run_soon(name)

    def stop(self, timeout: float | None = None) -> None:
        """Stop the election and, when leading, the jobs (runs in progress finish first)."""
        self._elector.stop(timeout)


def start_scheduler(
    settings: Settings,
    store: Store,
    *,
    plan: Sequence[ScheduledJob] | None = None,
    runner: JobRunner | None = None,
    lock: LeaderLock | None = None,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
) -> RunningScheduler:
    """Join the leader election and run the scheduled jobs while leading.

    Returns at once; election and jobs run in background threads.

    Args:
        settings: the deployment's settings (timings, and what the jobs receive).
        store: the open store: job store, run history and leader lock live in its
            database.
        plan: the jobs and their triggers; default :func:`default_plan` (settings).
        runner: runs a job by name; default ``pipelines.jobs.registry.run_job``.
        lock: the leader lock; default :func:`lock_for` the store.
        poll_seconds: how often followers try to lead and the leader checks its lock.

    Raises:
        ConfigError: the plan is invalid (e.g. a bad ``train_cron``).
    """
    jobs = tuple(plan) if plan is not None else default_plan(settings)
    check_plan(jobs)
    leadership = _Leadership(settings, store, jobs, runner or dispatch.default_runner)
    elector = LeaderElector(
        lock or lock_for(store),
        leadership.elected,
        lambda: leadership.demoted(wait=True),
        poll_seconds=poll_seconds,
    )
    elector.start()
    return RunningScheduler(elector, leadership)
