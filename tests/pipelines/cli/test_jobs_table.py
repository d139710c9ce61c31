"""``foresight jobs`` at 80 columns: every date stays on one line."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from rich.console import Console

from pipelines.cli.scheduler import jobs_table
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
    assert text.count("2026-12-03 09:55:00") == 5
    assert text.count("2026-12-04 03:00:00") == 5
