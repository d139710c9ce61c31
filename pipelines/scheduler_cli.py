"""``foresight scheduler`` (run the jobs in the foreground) and ``foresight jobs`` (show them)."""

from __future__ import annotations

import logging
import signal
import threading
from datetime import datetime
from types import FrameType

from rich.table import Table
from rich.text import Text

from pipelines.cli_support import ConfigOption, cli_errors, cli_settings, console
from pipelines.scheduler import default_plan, job_statuses, start_scheduler
from pipelines.scheduler.status import JobStatus
from pipelines.store import open_store

logger = logging.getLogger(__name__)

_OUTCOME_STYLE = {
    "ok": "green",
    "partial": "yellow",
    "skipped": "dim",
    "failed": "red",
    "interrupted": "red",
    "running": "cyan",
}


def scheduler_command(config: ConfigOption = None) -> None:
    """Run the scheduled jobs in the foreground (one leader among replicas); Ctrl-C stops."""
    with cli_errors():
        settings = cli_settings(config)
        store = open_store(settings.store_url)
        stop = threading.Event()

        def request_stop(signum: int, _frame: FrameType | None) -> None:
            logger.info("received %s: stopping", signal.Signals(signum).name)
            stop.set()

        previous = {
            signum: signal.signal(signum, request_stop)
            for signum in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            running = start_scheduler(settings, store)
            console.print(
                f"Scheduler started on {store.url}; it runs jobs while it leads "
                "(Ctrl-C stops, letting running jobs finish).",
                soft_wrap=True,
            )
            try:
                stop.wait()
            finally:
                running.stop()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            store.close()
        console.print("Scheduler stopped.")


def jobs_command(config: ConfigOption = None) -> None:
    """List the scheduled jobs: trigger, last run and its outcome, next run."""
    with cli_errors():
        settings = cli_settings(config)
        with open_store(settings.store_url) as store:
            statuses = job_statuses(store, default_plan(settings))
        console.print(jobs_table(statuses))
        if not any(status.scheduled for status in statuses):
            console.print(
                "[yellow]No scheduler has stored these jobs yet:[/] start one with "
                "`foresight scheduler` (next runs appear once it leads).",
                soft_wrap=True,
            )


def jobs_table(statuses: list[JobStatus]) -> Table:
    """A rich table of job statuses (one row per job)."""
    table = Table(title="Scheduled jobs")
    table.add_column("job", no_wrap=True)
    # Dates never wrap (a date split over two lines misreads at 80 columns); the
    # trigger and summary text give way instead.
    for column in ("trigger", "last run (UTC)", "outcome", "summary", "next run (UTC)"):
        table.add_column(column, overflow="fold", no_wrap=column.endswith("(UTC)"))
    for status in statuses:
        last = status.last_run
        outcome = last.outcome if last else "never ran"
        style = _OUTCOME_STYLE.get(outcome, "dim")
        # Text cells: triggers and summaries contain brackets rich would read as markup.
        table.add_row(
            Text(status.id),
            Text(status.trigger),
            _when(last.started_at) if last else "-",
            Text(outcome, style=style),
            Text(last.summary if last else ""),
            _when(status.next_run) if status.scheduled else "not scheduled",
        )
    return table


def _when(moment: datetime | None) -> str:
    return "paused" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")
