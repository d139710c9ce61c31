"""What the CLI shows a person: progress bars, score tables, forecast tables, files."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TimeElapsedColumn
from rich.table import Table

from forecaster.exceptions import ConfigError
from forecaster.metrics import HORIZON
from forecaster.training import TrainingOutcome, TrainingPlan
from forecaster.types import MODEL, STEP, UID, Levels, quantile_column
from forecaster.types import Progress as ProgressCallback

_STAGES = {"backtest": "Backtesting series", "fit": "Fitting the champion", "register": "Logging"}


@contextmanager
def progress_bar(console: Console) -> Iterator[ProgressCallback]:
    """Yield a ``(stage, done, total)`` callback that drives one bar per stage.

    Without a terminal (a pipe, a log file, a CI job) bars would only be drawn when
    they end; plain lines are printed as work proceeds instead (:class:`ProgressLines`).
    """
    if not console.is_terminal:
        yield ProgressLines(console).report
        return
    tasks: dict[str, TaskID] = {}
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:

        def report(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(_STAGES.get(stage, stage), total=total)
            progress.update(tasks[stage], completed=done, total=total)

        yield report


class ProgressLines:
    """Progress as plain lines: a stage's start, every tenth of it, and its end.

    Args:
        clock: seconds, for the elapsed time (a parameter for tests).
    """

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self._console = console
        self._clock = clock
        self._started: dict[str, float] = {}
        self._shown: dict[str, int] = {}

    def report(self, stage: str, done: int, total: int) -> None:
        """Print a line when ``stage`` starts, passes a further tenth, or ends."""
        now = self._clock()
        start = self._started.setdefault(stage, now)
        tenth = 10 if total <= 0 else min(10, done * 10 // total)
        if stage in self._shown and tenth <= self._shown[stage]:
            return
        self._shown[stage] = tenth
        label = _STAGES.get(stage, stage)
        self._console.print(f"{label}: {done}/{total} ({now - start:.0f} s)", highlight=False)


def scores_table(scores: pd.DataFrame, levels: Levels) -> Table:
    """Mean scores per model and horizon over all series."""
    cov = [quantile_column(level) for level in levels if level > 0.5]
    table = Table(title="Backtest scores (mean over series)")
    for col in ["model", "horizon", "MASE", "sMAPE", *(f"cover {c}" for c in cov)]:
        table.add_column(col, justify="left" if col in {"model", "horizon"} else "right")
    grouped = scores.groupby([MODEL, HORIZON], sort=False)
    for (model, horizon), rows in grouped:
        table.add_row(
            str(model),
            str(horizon),
            _fmt(rows["mase"]),
            _fmt(rows["smape"]),
            *(_fmt(rows[f"coverage_{c}"]) for c in cov),
        )
    return table


def training_table(outcome: TrainingOutcome, plan: TrainingPlan) -> Table:
    """Champion per series with its score beside persistence at the selection horizon."""
    horizon = plan.selection_horizon or next(iter(plan.horizons))
    upper = quantile_column(max(plan.levels))
    at = outcome.scores[outcome.scores[HORIZON] == horizon]
    mase = {
        (str(u), str(m)): float(v) for u, m, v in zip(at[UID], at[MODEL], at["mase"], strict=True)
    }
    cover = {
        (str(u), str(m)): float(v)
        for u, m, v in zip(at[UID], at[MODEL], at[f"coverage_{upper}"], strict=True)
    }
    table = Table(title=f"Champion per series (scores at {horizon})")
    for col in ["series", "champion", "MASE", "persistence MASE", f"cover {upper}"]:
        table.add_column(col, justify="left" if col in {"series", "champion"} else "right")
    for uid, family in sorted(outcome.selection.items()):
        table.add_row(
            uid,
            family,
            _fmt(mase.get((uid, family), np.nan)),
            _fmt(mase.get((uid, "persistence"), np.nan)),
            _fmt(cover.get((uid, family), np.nan)),
        )
    return table


def forecast_table(frame: pd.DataFrame, horizons: Mapping[str, int], levels: Levels) -> Table:
    """Mean and quantiles per series at each labelled horizon."""
    upper = quantile_column(max(levels))
    table = Table(title="Forecasts (mean / upper quantile)")
    table.add_column("series")
    for label in horizons:
        table.add_column(f"+{label}", justify="right")
    for uid, rows in frame.groupby(UID, sort=True):
        by_step = rows.set_index(STEP)
        cells = []
        for steps in horizons.values():
            if steps in by_step.index:
                point = by_step.loc[steps]
                cells.append(f"{point['mean']:.1f} / {point[upper]:.1f}")
            else:
                cells.append("-")
        table.add_row(str(uid), *cells)
    return table


def write_frame(frame: pd.DataFrame, path: Path) -> None:
    """Write a frame as CSV or JSON (records) by the file's extension."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        frame.to_json(path, orient="records", date_format="iso", indent=1)
    elif path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        raise ConfigError(f"output {path} must end in .csv or .json; rename the file")


def _fmt(values: pd.Series | float) -> str:
    value = float(np.nanmean(values)) if isinstance(values, pd.Series) else float(values)
    return "-" if not np.isfinite(value) else f"{value:.3f}"
