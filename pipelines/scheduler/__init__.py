"""The scheduler: APScheduler jobs on the store's database, run by one leader.

:func:`start_scheduler` joins the leader election and, while this process leads,
runs ingest, train, forecast, evaluate and publish on their schedules, recording
every run in the store (``store.job_runs``). ``foresight scheduler`` runs it in the
foreground and ``foresight jobs`` shows what ran and what is next.
"""

from pipelines.scheduler.plan import ScheduledJob, crontab_trigger, default_plan, every, job_id
from pipelines.scheduler.service import RunningScheduler, start_scheduler
from pipelines.scheduler.status import JobStatus, job_statuses

__all__ = [
    "JobStatus",
    "RunningScheduler",
    "ScheduledJob",
    "crontab_trigger",
    "default_plan",
    "every",
    "job_id",
    "job_statuses",
    "start_scheduler",
]
