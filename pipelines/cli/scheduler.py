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

from forecaster.exceptions import ConfigError
from pipelines.cli.support import ConfigOption, cli_errors, cli_settings, console
from pipelines.config.settings import Settings
from pipelines.jobs.publish import Publisher, publishing_runner
from pipelines.scheduler import default_plan, job_statuses, start_scheduler
from pipelines.scheduler.clocked import clocked_runner
from pipelines.scheduler.dispatch import default_runner
from pipelines.scheduler.status import JobStatus
from pipelines.store import Store, open_store
from pipelines.store.leader import Leader
from pipelines.store.outbox import Status

if TYPE_CHECKING:
    from api.clock import ClockMode

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

    with cli_errors():
        if clock not in ("system", "replay"):
            raise ConfigError(f"--clock must be 'system' or 'replay', not {clock!r}")
        mode: ClockMode = "replay" if clock == "replay" else "system"
        settings = cli_settings(config)
        # One clock: forecasts are stamped, evaluations dated and recommendations
        # published at the time the API decides by.
        runner = publishing_runner(
            lambda: _publisher(mode),
            clocked_runner(store_clock(settings, mode), default_runner, replay=mode == "replay"),
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


def _publisher(mode: ClockMode) -> Publisher:
    """Publish with a recommendation service of its own per run, on the ``mode`` clock."""
    from api.publishing import publish_once, publishing_service

    def publish(
        settings: Settings, store: Store, *, apply: bool, now: datetime | None = None
    ) -> object:
        service = publishing_service(settings, store, clock=mode)
        return publish_once(settings, store, apply=apply, now=now, service=service)

    return publish


def jobs_command(config: ConfigOption = None) -> None:
    """Show the scheduler's leader and each job: trigger, last run, where, outcome, next."""
    with cli_errors():
        settings = cli_settings(config)
        with open_store(settings.store_url) as store:
            statuses = job_statuses(store, default_plan(settings))
            outbox = store.outbox.counts()
            leader = store.leader.current()
        console.print(leader_line(leader), soft_wrap=True)
        console.print(jobs_table(statuses))
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
    """A rich table of job statuses (one row per job)."""
    table = Table(title="Scheduled jobs")
    table.add_column("job", no_wrap=True)
    # Dates never wrap (a date split over two lines misreads at 80 columns); the
    # trigger and summary text give way instead.
    columns = ("trigger", "last run (UTC)", "ran on", "outcome", "summary", "next run (UTC)")
    for column in columns:
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
            Text(last.runner) if last else "-",
            Text(outcome, style=style),
            Text(last.summary if last else ""),
            _when(status.next_run) if status.scheduled else "not scheduled",
        )
    return table


def _when(moment: datetime | None) -> str:
    return "paused" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


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
