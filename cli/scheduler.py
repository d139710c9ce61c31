"""``foresight scheduler`` (run the jobs in the foreground) and ``foresight jobs`` (show them)."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Mapping
from datetime import datetime
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from cli.support import ConfigOption, cli_errors, cli_settings, console, publish_mode
from forecaster.exceptions import ConfigError

if TYPE_CHECKING:
    from api.clock import ClockMode
    from api.settings import AppSettings
    from pipelines.jobs.publish import Publisher, PublishMode
    from pipelines.scheduler.status import JobStatus
    from pipelines.store.leader import Leader
    from pipelines.store.outbox import Status
    from pipelines.store.store import Store

logger = logging.getLogger(__name__)

_OUTCOME_STYLE = {
    "ok": "green",
    "partial": "yellow",
    "skipped": "dim",
    "failed": "red",
    "interrupted": "red",
    "running": "cyan",
}


def scheduler_command(
    config: ConfigOption = None,
    clock: Annotated[
        str,
        typer.Option(
            "--clock",
            help="'system' (wall time) or 'replay' (as of the newest stored sample): the "
            "clock forecast, evaluate and publish date their results by; use the clock "
            "the API serves with.",
        ),
    ] = "system",
) -> None:
    """Run the scheduled jobs in the foreground (one leader among replicas); Ctrl-C stops."""
    from api.publish_runner import store_clock
    from pipelines.jobs.publish import publishing_runner
    from pipelines.scheduler.clocked import clocked_runner
    from pipelines.scheduler.dispatch import default_runner
    from pipelines.scheduler.service import start_scheduler
    from pipelines.store.store import open_store

    with cli_errors():
        if clock not in ("system", "replay"):
            raise ConfigError(f"--clock must be 'system' or 'replay', not {clock!r}")
        mode: ClockMode = "replay" if clock == "replay" else "system"
        settings = cli_settings(config)
        # One clock: forecasts are stamped, evaluations dated and recommendations
        # published at the time the API decides by.
        runner = publishing_runner(
            lambda: _publisher(settings, mode),
            clocked_runner(store_clock(settings, mode), default_runner, replay=mode == "replay"),
            mode=publish_mode(settings),
        )
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
            running = start_scheduler(settings, store, runner=runner)
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


def _publisher(settings: AppSettings, clock: ClockMode) -> Publisher:
    """Publish with a recommendation service of its own per run, on the ``clock`` clock."""
    from api.publishing import publish_once, publishing_service

    def publish(store: Store, *, mode: PublishMode, now: datetime | None = None) -> object:
        service = publishing_service(settings, store, clock=clock)
        return publish_once(settings, store, mode=mode, now=now, service=service)

    return publish


def jobs_command(config: ConfigOption = None) -> None:
    """Show the scheduler's leader and each job: trigger, last run, where, outcome, next."""
    from pipelines.scheduler.plan import default_plan
    from pipelines.scheduler.status import job_statuses
    from pipelines.store.store import open_store

    with cli_errors():
        settings = cli_settings(config)
        with open_store(settings.store_url) as store:
            statuses = job_statuses(store, default_plan(settings))
            outbox = store.outbox.counts()
            leader = store.leader.current()
        console.print(leader_line(leader), soft_wrap=True)
        console.print(jobs_table(statuses))
        for line in run_lines(statuses):
            console.print(line, soft_wrap=True)
        _print_outbox(outbox)
        if not any(status.scheduled for status in statuses):
            console.print(
                "[yellow]No scheduler has stored these jobs yet:[/] start one with "
                "`foresight scheduler` (next runs appear once it leads).",
                soft_wrap=True,
            )


def leader_line(leader: Leader | None) -> Text:
    """Which process leads the scheduler and since when, or that none has recorded itself."""
    if leader is None:
        return Text("Leader: none recorded (no scheduler leads, or its last one stopped)")
    return Text(f"Leader: {leader.holder} since {_when(leader.since)} UTC")


def jobs_table(statuses: list[JobStatus]) -> Table:
    """A rich table of job statuses (one row per job), readable at 80 columns.

    The table holds what fits a line (job, trigger, last run, outcome, next run); each
    run's summary and where it ran follow under it (:func:`run_lines`), so no column
    is squeezed to a letter when the output is piped or in a CI log.
    """
    table = Table(title="Scheduled jobs")
    table.add_column("job", no_wrap=True)
    table.add_column("trigger", overflow="fold", min_width=13)
    # Dates never wrap (a date split over two lines misreads at 80 columns).
    table.add_column("last run (UTC)", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("next run (UTC)", no_wrap=True)
    for status in statuses:
        last = status.last_run
        outcome = last.outcome if last else "never ran"
        style = _OUTCOME_STYLE.get(outcome, "dim")
        # Text cells: triggers contain brackets rich would read as markup.
        table.add_row(
            Text(status.name),
            Text(status.trigger),
            _minute(last.started_at) if last else "-",
            Text(outcome, style=style),
            _minute(status.next_run) if status.scheduled else "not scheduled",
        )
    return table


def run_lines(statuses: list[JobStatus]) -> list[Text]:
    """Each job's last run in words: ``<job> (on <runner>): <summary>``."""
    return [
        Text(f"{status.name} (on {status.last_run.runner}): {status.last_run.summary}")
        for status in statuses
        if status.last_run is not None
    ]


def _when(moment: datetime | None) -> str:
    return "paused" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


def _minute(moment: datetime | None) -> str:
    """A table date to the minute: two of them and the rest of a row fit 80 columns."""
    return "paused" if moment is None else moment.strftime("%Y-%m-%d %H:%M")


def _print_outbox(counts: Mapping[Status, int]) -> None:
    """One line on the webhook outbox; dead letters in red, with how to retry them."""
    line = (
        f"Webhook outbox: {counts['pending']} pending, {counts['delivered']} delivered, "
        f"{counts['dead']} dead"
    )
    if counts["dead"]:
        line = (
            f"[red]{line}[/]: list them with `foresight webhooks dead`, retry with "
            "`foresight webhooks retry --all` once the receiver is fixed"
        )
    console.print(line, soft_wrap=True)
