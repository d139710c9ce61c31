"""``foresight jobs`` at 80 columns: every date stays on one line."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console

from cli.scheduler import jobs_table, run_lines
from pipelines.scheduler.status import JobStatus
from pipelines.store.job_runs import JobRun


def test_dates_do_not_wrap_at_80_columns() -> None:
    started = datetime(2026, 12, 3, 9, 55, tzinfo=UTC)
    run = JobRun(
        id=1,
        job="foresight.train",
        started_at=started,
        finished_at=started,
        outcome="ok",
        summary="trained 15 series; champion version 3 promoted after the gate compared "
        "it with version 2 on the same windows",
        runner="host-1",
    )
    statuses = [
        JobStatus(
            id=f"foresight.{name}",
            name=name,
            trigger="cron[hour='3', minute='0', day_of_week='*']",
            scheduled=True,
            next_run=datetime(2026, 12, 4, 3, 0, tzinfo=UTC),
            last_run=run,
        )
        for name in ("ingest", "train", "forecast", "evaluate", "publish")
    ]
    out = io.StringIO()
    Console(file=out, width=80, force_terminal=False).print(jobs_table(statuses))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.count("2026-12-03 09:55") == 5
    assert text.count("2026-12-04 03:00") == 5


def test_piped_at_80_columns_no_column_is_squeezed_to_letters() -> None:
    statuses = [
        JobStatus(
            id=f"foresight.{name}",
            name=name,
            trigger=trigger,
            scheduled=False,
            next_run=None,
            last_run=None,
        )
        for name, trigger in (
            ("ingest", "every 0:05:00"),
            ("train", "cron 0 3 * * * UTC"),
            ("evaluate", "every 1:00:00"),
        )
    ]
    out = io.StringIO()
    Console(file=out, width=80, force_terminal=False).print(jobs_table(statuses))
    lines = out.getvalue().splitlines()

    # One line per job: each row's job, trigger, outcome and next run read whole.
    assert any("ingest" in line and "every 0:05:00" in line for line in lines)
    assert any("train" in line and "cron 0 3 * * * UTC" in line for line in lines)
    assert any(
        "evaluate" in line and "never ran" in line and "not scheduled" in line for line in lines
    )
    headers = " ".join(lines[:4])
    for header in ("trigger", "outcome", "last run (UTC)", "next run (UTC)"):
        assert header in headers


def test_the_last_runs_summary_follows_the_table_in_words() -> None:
    started = datetime(2026, 12, 3, 9, 55, tzinfo=UTC)
    run = JobRun(
        id=1,
        job="foresight.forecast",
        started_at=started,
        finished_at=started,
        outcome="skipped",
        summary="no new data: the newest sample is the one the last run was made from",
        runner="host-1",
    )
    status = JobStatus(
        id="foresight.forecast",
        name="forecast",
        trigger="every 0:05:00",
        scheduled=True,
        next_run=started,
        last_run=run,
    )
    (line,) = run_lines([status])
    assert line.plain == (
        "forecast (on host-1): no new data: the newest sample is the one the last run was made from"
    )
