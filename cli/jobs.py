"""``foresight ingest`` and ``foresight backfill``: run the ingest job once, with a bar.

Details: docs/jobs.md, "Notes from the code", `cli/jobs.py`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from cli.support import ConfigOption, cli_errors, cli_settings, console
from forecaster.exceptions import ConfigError

if TYPE_CHECKING:
    from pipelines.jobs.report import JobReport

_STYLES = {"ok": "green", "partial": "yellow", "failed": "bold red", "skipped": "dim"}

FromOption = Annotated[
    str, typer.Option("--from", help="First instant, e.g. 2024-01-01 or 2024-01-01T06:00Z (UTC).")
]
ToOption = Annotated[
    str, typer.Option("--to", help="Last instant (inclusive), after --from, e.g. 2024-01-14.")
]


def ingest_command(config: ConfigOption = None) -> None:
    """Fetch what is new of every pool signal since the last stored sample, once."""
    from pipelines.jobs.ingest import run_ingest
    from pipelines.reporting import progress_bar

    with cli_errors():
        settings = cli_settings(config)
        with progress_bar(console) as report:
            result = run_ingest(settings, progress=report)
    _print(result)


def backfill_command(
    start: FromOption,
    end: ToOption,
    config: ConfigOption = None,
) -> None:
    """Fetch and store every pool signal over a past window (re-fetching is harmless)."""
    from pipelines.jobs.ingest import backfill
    from pipelines.reporting import progress_bar

    with cli_errors():
        first, last = parse_instant(start, "--from"), parse_instant(end, "--to")
        if first >= last:
            raise ConfigError(
                f"--from {first.isoformat()} is not before --to {last.isoformat()}; "
                "give an earlier --from"
            )
        settings = cli_settings(config)
        with progress_bar(console) as report:
            result = backfill(settings, first, last, progress=report)
    _print(result)


def parse_instant(text: str, option: str) -> datetime:
    """Parse an ISO date or date-time; without a time zone it is UTC.

    Raises:
        ConfigError: ``text`` is not a date; the message names the option.
    """
    import pandas as pd

    try:
        stamp = pd.Timestamp(text)
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            f"{option} {text!r} is not a date; use ISO 8601, e.g. 2024-01-01 or "
            "2024-01-01T06:00:00Z"
        ) from exc
    if pd.isna(stamp):
        raise ConfigError(f"{option} {text!r} is not a date; use ISO 8601, e.g. 2024-01-01")
    stamp = stamp.tz_localize(UTC) if stamp.tzinfo is None else stamp.tz_convert(UTC)
    return stamp.to_pydatetime()


def _print(report: JobReport) -> None:
    style = _STYLES[report.outcome]
    console.print(f"[{style}]{report.job} {report.outcome}[/]: {report.summary}", soft_wrap=True)
    if report.problems:
        table = Table(title="Series with problems")
        table.add_column("series")
        table.add_column("problem", overflow="fold")
        for series_id, problem in sorted(report.problems.items()):
            table.add_row(series_id, problem)
        console.print(table)
    if report.outcome == "failed":
        raise typer.Exit(code=1)
