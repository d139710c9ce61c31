"""What every ``foresight`` command shares: the console, options, settings and errors.

Details: docs/layout.md, "Notes from the code", `cli/support.py`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from forecaster.exceptions import ForesightError

if TYPE_CHECKING:
    from api.settings import AppSettings
    from pipelines.jobs.publish import PublishMode

console = Console()

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="YAML settings file (FORESIGHT_* env wins).")
]
DataOption = Annotated[
    Path | None,
    typer.Option("--data", help="CSV/Parquet series file; default: the committed sample."),
]
SeriesOption = Annotated[
    list[str] | None, typer.Option("--series", help="Only this series id (repeatable).")
]


def cli_settings(config: Path | None) -> AppSettings:
    """Load settings (file, then ``FORESIGHT_*`` variables) and configure logging."""
    from api.settings import load_app_settings  # pandas: only when a command runs

    settings = load_app_settings(config)
    logging.basicConfig(level=settings.log_level, format="%(levelname)s %(name)s: %(message)s")
    return settings


def publish_mode(settings: AppSettings) -> PublishMode:
    """The scheduled publish job's mode: ``dry_run`` while ``service.forecast_only``."""
    return "dry_run" if settings.service.forecast_only else "apply"


@contextmanager
def cli_errors() -> Iterator[None]:
    """Print our own errors as one readable line and exit 2, instead of a traceback."""
    try:
        yield
    except ForesightError as exc:
        console.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(code=2) from exc
