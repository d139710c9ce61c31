"""Running one job: the history record around it and what follows it (docs/scheduler.md)."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

from forecaster.exceptions import WorkCancelled
from pipelines.config.settings import Settings
from pipelines.store.store import Store

if TYPE_CHECKING:
    # Imported late at run time: ``pipelines.jobs`` loads every job's dependencies
    # (MLflow, models), which ``foresight jobs`` and the CLI's start-up do not need.
    from pipelines.jobs.report import JobReport

logger = logging.getLogger(__name__)

DISPATCH_REF: Final = "pipelines.scheduler.dispatch:run_scheduled_job"
DEFAULT_RUNNER_REF: Final = "pipelines.jobs.registry:run_job"
RETRAIN: Final = "retrain"
"""The detail by which evaluate asks for a retraining."""
_SUCCESS: Final = ("ok", "partial")

JobRunner = Callable[[str, Settings], "JobReport"]
"""Runs a job by name: :func:`pipelines.jobs.registry.run_job` or a test's fake."""


class FollowUps(Protocol):
    """What the scheduler does after a run: start another job now."""

    def run_soon(self, name: str) -> None:
        """Make job ``name`` due at once (it still respects ``max_instances``)."""


@dataclass(frozen=True)
class JobContext:
    """Everything a job run needs in the leading process.

    Attributes:
        settings: the deployment's settings, handed to the runner.
        follow_ups: starts a job right away (forecast after train, train on retrain).
    """

    settings: Settings
    store: Store
    runner: JobRunner
    follow_ups: FollowUps


_contexts: dict[str, JobContext] = {}
_contexts_lock = threading.Lock()


def register(key: str, context: JobContext) -> None:
    """Make ``context`` reachable by the jobs stored with ``key``."""
    with _contexts_lock:
        _contexts[key] = context


def unregister(key: str) -> None:
    """Forget the context of ``key``; its jobs are skipped from now on."""
    with _contexts_lock:
        _contexts.pop(key, None)


def run_scheduled_job(key: str, name: str) -> None:
    """Run job ``name`` in the context registered under ``key`` (APScheduler's entry point).

    Args:
        key: the context key the leader stored with the job.
    """
    with _contexts_lock:
        context = _contexts.get(key)
    if context is None:
        logger.warning(
            "skipping job %r: it was scheduled by a scheduler that no longer leads here", name
        )
        return
    try:
        report = execute(context, name)
    except WorkCancelled:
        # The process is stopping (execute recorded the run as interrupted): no traceback.
        logger.warning("job %s stopped early: the process is stopping", name)
        return
    follow_up(context, report)


def execute(context: JobContext, name: str) -> JobReport:
    """Run one job, recording ``running`` first and the outcome last.

    A runner that raises produces a ``failed`` report (the exception is logged);
    a run interrupted by a ``BaseException`` (interpreter shutdown) is recorded
    ``interrupted`` before the exception propagates.
    """
    runs = context.store.job_runs
    started = datetime.now(UTC)
    run_id = runs.start(name, runner=runner_identity(), started_at=started)
    logger.info("job %s started (run %d)", name, run_id)
    try:
        report = context.runner(name, context.settings)
    except Exception as exc:
        logger.exception("job %s failed", name)
        from pipelines.jobs.report import JobReport

        report = JobReport(
            job=name,
            outcome="failed",
            summary=f"{type(exc).__name__}: {exc}",
            started_at=started,
            finished_at=datetime.now(UTC),
        )
    except BaseException:
        runs.finish(run_id, "interrupted", "the process stopped while the job was running")
        raise
    runs.finish(
        run_id,
        report.outcome,
        report.summary,
        finished_at=datetime.now(UTC),
        problems=report.problems,
        details=_json_ready(report.details),
    )
    logger.info("job %s finished: %s, %s", name, report.outcome, report.summary)
    return report


def follow_up(context: JobContext, report: JobReport) -> None:
    """Forecast right after a successful training; retrain when evaluate asks for it.

    ``evaluate`` sets ``details["retrain"]`` when the current champion degraded; the
    training then starts as its own scheduled job, so ``max_instances`` keeps it from
    overlapping another training.
    """
    if report.job == "train" and report.outcome in _SUCCESS:
        context.follow_ups.run_soon("forecast")
    if report.job != "evaluate" or not report.details.get(RETRAIN):
        return
    logger.info("evaluate flagged a degraded champion: training now")
    context.follow_ups.run_soon("train")


def default_runner(name: str, settings: Settings) -> JobReport:
    """Run a job through :func:`pipelines.jobs.registry.run_job`, imported on first use.

    The import is late so that the scheduler module loads (``foresight jobs``) without
    the jobs' heavier dependencies.
    """
    from apscheduler.util import ref_to_obj

    run_job: JobRunner = ref_to_obj(DEFAULT_RUNNER_REF)
    return run_job(name, settings)


def runner_identity() -> str:
    """``host:pid`` of this process, stored with each run to tell replicas apart."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _json_ready(details: dict[str, Any]) -> dict[str, Any]:
    """Keep details that JSON can hold; stringify the rest rather than fail the record."""
    return dict(json.loads(json.dumps(details, default=str)))
